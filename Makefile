# Developer entry points. `make test` is the command README and CI run.
VENV ?= .venv
PY := $(VENV)/bin/python
FAST := $(wildcard src/ddm_core/_fast/*.pyx src/ddm_core/_fast/*.pxd)

.PHONY: install deps services compile typecheck test test-c test-crash test-c-rest test-py bench wheels clean

# A venv with ddm-core installed editable; the extensions must build (no silent fallback).
$(VENV)/.installed: pyproject.toml setup.py $(FAST)
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	DDM_REQUIRE_EXTENSIONS=1 $(PY) -m pip install -q -e ".[test,fast]"
	$(PY) -c "import ddm_core; assert ddm_core.implementation() == 'cython', 'compiled modules did not load'"
	touch $@

install: $(VENV)/.installed

# The editable install compiles in place; it reruns when a .pyx/.pxd changes.
compile: install

# mypy --strict (configured in pyproject.toml) over the whole package; any error fails.
typecheck: compile
	$(PY) -m mypy

# The Debian tools the tests drive (sysbench, percona-toolkit, valgrind): apt-get installs the
# missing ones; without apt-get this names them and stops.
deps:
	bash .ci/install_tools.sh

# The tools, a type check, then the whole suite twice: compiled units selected, then the pure-Python
# twins selected. Each pass runs on $(WORKERS) pytest-xdist workers, one test file per worker at a time
# (--dist loadfile: a module's servers, proxies and databases stay in one process); most tests wait on
# servers, processes killed and started again, or timers, so four workers share 2 cores well.
# The crash and fail-over tests (writers racing a migration, a cut-over or a promoted replica, each bounded in
# time the way the commands are) run last, on their own, when nothing else loads the machine (CI's bare
# installs compile beside the first passes): beside the CPU-heavy oracles, and again beside those builds, a
# catch-up pass missed its 120 s bound and a fail-over's sync its 60 s. tests/conftest.py starts the longest
# files of each run first.
WORKERS ?= 4
XDIST := -n $(WORKERS) --dist loadfile --no-loadscope-reorder

test: deps typecheck test-c-rest test-py test-crash

# The machine's MariaDB, Redis and PostgreSQL started when they do not answer, and MariaDB's max_connections
# raised for four workers (.ci/services.sh). A server that still does not answer is left to the tests to name.
services:
	@bash .ci/services.sh

CRASH := tests/test_migrate_e2e.py tests/test_cutover_e2e.py tests/test_crossnode_crash.py tests/test_outbox_crash.py \
	tests/test_cutover_gtid_failover.py
CRASH_SKIP := $(foreach t,$(CRASH),--ignore=$(t))

# The whole compiled pass in one run (what `make test` runs in two parts).
test-c: compile deps services
	DDM_REQUIRE_EXTENSIONS=1 DDM_REQUIRE_SERVICES=1 $(PY) -m pytest -q $(XDIST) --durations=25

test-crash: compile deps services
	DDM_REQUIRE_EXTENSIONS=1 DDM_REQUIRE_SERVICES=1 $(PY) -m pytest -q $(XDIST) --durations=10 $(CRASH)

test-c-rest: compile deps services
	DDM_REQUIRE_EXTENSIONS=1 DDM_REQUIRE_SERVICES=1 $(PY) -m pytest -q $(XDIST) --durations=25 $(CRASH_SKIP)

# The pure pass runs what exercises the compiled units and their callers; the operational
# suites (servers killed, frozen, replicated; proxies, relays, migrations; the bare-install check) run once, above.
OPERATIONAL := proxy* xa* outbox* migrate* cutover* readwrite* id_lease* config_redis* config_table_source* etcd* config_etcd* instances* \
	observe* health* lint* frozen_data_source* execute_unavailable* leaks* watchdog* session_state* typing* \
	bare_install* aio_cancel* aio_frozen* aio_kill* aio_pools* pool_alive* sqlalchemy* crossnode_crash* workflow* gtid_positions*
# Checks that read the source, docs or packaging and load no compiled unit: the same in both passes.
STATIC := architecture_doc* layers* import_cycles* packaging* errors*
PURE_SKIP := $(foreach t,$(OPERATIONAL) $(STATIC),--ignore-glob='tests/test_$(t)')

test-py: compile services
	DDM_REQUIRE_EXTENSIONS=1 DDM_REQUIRE_SERVICES=1 DDM_NO_EXTENSIONS=1 $(PY) -m pytest -q $(XDIST) --durations=15 $(PURE_SKIP)

bench: compile
	$(PY) benchmarks/report.py

wheels:
	bash wheels/build.sh

clean:
	rm -rf build dist src/ddm_core/_fast/*.c src/ddm_core/_fast/*.so src/ddm_core/_fast/*.html
