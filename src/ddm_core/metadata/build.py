"""Pieces both readers share: algorithms, key generators, endpoints, the path index.

The native reader and the ShardingSphere reader differ in shape, not in what
they build; this module turns a type + props into an :class:`AlgorithmSpec`
(creating the live object through :func:`ddm_core.algorithms.create`), props
into a :class:`KeyGeneratorSpec`, a URL + credentials into an
:class:`Endpoint`, and remembers the field path of everything it built so the
cross-checks of :mod:`ddm_core.metadata.validate` can name them.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Mapping, Protocol

from ddm_core._fast.id_layout import LOW_BITS
from ddm_core.algorithms import create, known_types
from ddm_core.errors import ConfigError
from ddm_core.metadata.fields import as_int
from ddm_core.metadata.limits import (
    KEY_GENERATOR_RANGES,
    MAX_INT_DIGITS,
    PROP_INT_MAX,
    PROP_INT_MIN,
    RANGES,
    IntRange,
    show_int,
)
from ddm_core.metadata.model import (
    AlgorithmSpec,
    Endpoint,
    KeyGeneratorSpec,
    PoolSettings,
    ReadWriteSettings,
    ShardingConfig,
    freeze,
    is_leased_worker,
    thaw,
)
from ddm_core.metadata.nodes import NameBudget
from ddm_core.metadata.problems import Problems, join_path
from ddm_core.metadata.ranges import check_range_list, check_slot_map
from ddm_core.metadata.urls import ENV_REF, Secret, parse_url, substitute_env

__all__ = [
    "Paths", "Context", "ParseConfig", "KEY_GENERATOR_TYPES", "LOAD_BALANCERS", "POOL_RANGES", "pool_settings",
    "precheck_props", "READ_WRITE_FIELDS", "read_write_settings",
]  # fmt: skip

_INT_TEXT = re.compile(r"[+-]?[0-9]+")

#: Key generator types and the props each accepts.
KEY_GENERATOR_TYPES: Mapping[str, frozenset[str]] = {
    "SNOWFLAKE": frozenset(
        {
            "worker-id",
            "max-vibration-offset",
            "max-tolerate-time-difference-milliseconds",
            "max-backward-ms",
            "epoch-ms",
        }
    ),
    "GENE": frozenset(
        {"gene-bits", "shard-column", "worker-id", "worker-bits", "max-backward-ms", "epoch-ms"}
    ),
    "UUID": frozenset(),
}

#: ShardingSphere load balancer types → the model's ``DataSource.load_balancer``.
LOAD_BALANCERS: Mapping[str, str] = {"ROUND_ROBIN": "round_robin", "RANDOM": "random", "WEIGHT": "weight"}


@dataclass
class Paths:
    """Field paths of what was built, for messages from the cross-checks."""

    tables: dict[str, str] = field(default_factory=dict)
    database_strategy: dict[str, str] = field(default_factory=dict)
    table_strategy: dict[str, str] = field(default_factory=dict)
    data_nodes: dict[str, str] = field(default_factory=dict)
    key_generation: dict[str, str] = field(default_factory=dict)
    algorithms: dict[str, str] = field(default_factory=dict)
    key_generators: dict[str, str] = field(default_factory=dict)
    binding_groups: list[str] = field(default_factory=list)
    broadcast: dict[str, str] = field(default_factory=dict)
    single: dict[str, str] = field(default_factory=dict)
    slot_maps: dict[str, str] = field(default_factory=dict)  # algorithm name → path of its slot map
    data_sources: dict[str, str] = field(default_factory=dict)
    default_data_source: str = "defaultDataSource"


class ParseConfig(Protocol):
    """:func:`ddm_core.metadata.load.parse_config`, handed down by the loader to the readers that parse
    configurations of their own (a migration's target, a cut-over's derived placements): they sit below
    the loader, so they are given the function instead of importing it."""

    def __call__(
        self,
        source: str | Mapping[str, Any],
        *,
        origin: str,
        format: str | None = None,
        base_dir: Path | None = None,
        check_env: bool = True,
    ) -> ShardingConfig: ...


class Context:
    """State of one load: problems, warnings, paths, algorithms and key generators built so far.

    Args:
        origin: File path or ``<string>``/``<dict>`` (for messages).
        base_dir: Directory relative SQLite paths resolve against.
        check_env: Check at load time that referenced environment variables exist.
    """

    def __init__(self, origin: str, *, base_dir: Path | None = None, check_env: bool = True) -> None:
        self.origin = origin
        self.base_dir = base_dir
        self.check_env = check_env
        self.problems = Problems(origin)
        self.warnings: list[str] = []
        self.paths = Paths()
        self.algorithms: dict[str, AlgorithmSpec] = {}
        self.key_generators: dict[str, KeyGeneratorSpec] = {}
        #: Data sources that are defined but could not be built (their problems
        #: are listed); references to them are not reported again.
        self.failed_data_sources: set[str] = set()
        #: Names expressions, lists and table shapes may still give (bounds a hostile file's work).
        self.names = NameBudget()

    def warn(self, path: str, message: str) -> None:
        self.warnings.append(f"{self.origin}: {path}: {message}")

    # -- algorithms -------------------------------------------------------------------

    def algorithm(
        self,
        name: str,
        type_name: Any,
        props: Any,
        path: str,
        *,
        prop_paths: Mapping[str, str] | None = None,
        type_path: str | None = None,
    ) -> AlgorithmSpec | None:
        """Build and register the algorithm ``name``; ``None`` (problem recorded) on failure.

        Args:
            prop_paths: Where a prop was written when not at ``path.props.<prop>``
                (the native format's ``slots:`` sits on the table).
            type_path: Where the type was written when not at ``path.type``.
        """
        prop_paths = dict(prop_paths or {})
        if name in self.algorithms:
            self.problems.add(path, f"duplicate sharding algorithm name {name!r}", name)
            return None
        self.paths.algorithms[name] = path
        tpath = type_path or join_path(path, "type")
        if not isinstance(type_name, str) or not type_name.strip():
            self.problems.add(tpath, f"must name an algorithm type, not {type_name!r}", type_name)
            return None
        type_key = type_name.strip().upper()
        if type_key not in {t.upper() for t in known_types()}:
            self.problems.add(
                tpath,
                f"unknown sharding algorithm type {type_name!r} (known: {', '.join(known_types())})",
                type_name,
            )
            return None
        if props is None:
            props = {}
        if not isinstance(props, Mapping):
            self.problems.add(join_path(path, "props"), f"must be a mapping, not {props!r}", props)
            return None

        def where(prop: str) -> str:
            return prop_paths.get(prop) or join_path(join_path(path, "props"), prop)

        before = len(self.problems)
        precheck_props(type_key, props, where, self.problems)
        if len(self.problems) > before:
            return None  # the precise problems are listed; the factory would repeat the first
        try:
            obj = create(type_key, thaw(props), name=name)
        except ConfigError as exc:
            prop = getattr(exc, "prop", None)
            self.problems.add(
                where(prop) if isinstance(prop, str) else path, exc.message, getattr(exc, "value", None)
            )
            return None
        except (ValueError, TypeError, OverflowError, ArithmeticError) as exc:
            # a prop value the factory did not foresee: still a problem of this field, not a crash
            self.problems.add(path, f"sharding algorithm {name!r} ({type_key}) cannot use these props: {exc}")
            return None
        spec = AlgorithmSpec(name=name, type=type_key, props=freeze(dict(props)), algorithm=obj)
        self.algorithms[name] = spec
        if "slots" in props:
            self.paths.slot_maps[name] = where("slots")
        return spec

    # -- key generators ---------------------------------------------------------------

    def key_generator(self, name: str, type_name: Any, props: Any, path: str) -> KeyGeneratorSpec | None:
        """Build and register the key generator ``name``; ``None`` (problem recorded) on failure."""
        if name in self.key_generators:
            self.problems.add(path, f"duplicate key generator name {name!r}", name)
            return None
        type_key = type_name.strip().upper() if isinstance(type_name, str) else ""
        if type_key not in KEY_GENERATOR_TYPES:
            self.problems.add(
                join_path(path, "type"),
                f"unknown key generator type {type_name!r} (known: {', '.join(KEY_GENERATOR_TYPES)})",
                type_name,
            )
            return None
        props = props or {}
        if not isinstance(props, Mapping):
            self.problems.add(join_path(path, "props"), f"must be a mapping, not {props!r}", props)
            return None
        ppath = join_path(path, "props")
        self._unknown_generator_props(type_key, props, ppath)
        leased = is_leased_worker(props.get("worker-id"))
        numbers = self._generator_numbers({k: v for k, v in props.items() if not (leased and k == "worker-id")}, ppath)
        gene_bits = shard_column = None
        if type_key == "GENE":
            gene_bits = numbers.get("gene-bits")
            if "gene-bits" not in props:
                self.problems.add(join_path(ppath, "gene-bits"), "a GENE key generator needs gene-bits", None)
            self._gene_layout(numbers, props, ppath)
            shard_column = self._gene_column(props, ppath)
        spec = KeyGeneratorSpec(
            name=name,
            type=type_key,
            props=freeze(dict(props)),
            worker_id=numbers.get("worker-id"),
            gene_bits=gene_bits,
            shard_column=shard_column,
        )
        self.key_generators[name] = spec
        self.paths.key_generators[name] = path
        return spec

    def _unknown_generator_props(self, type_key: str, props: Mapping[str, Any], ppath: str) -> None:
        for key in props:
            if key not in KEY_GENERATOR_TYPES[type_key]:
                known = ", ".join(sorted(KEY_GENERATOR_TYPES[type_key])) or "none"
                self.problems.add(
                    join_path(ppath, str(key)),
                    f"unknown {type_key} key generator prop {key!r} (known: {known})",
                    key,
                )

    def _generator_numbers(self, props: Mapping[str, Any], ppath: str) -> dict[str, int]:
        """The numeric props given, each checked against its range (problems for the others)."""
        numbers: dict[str, int] = {}
        for key, bounds in KEY_GENERATOR_RANGES.items():
            value = props.get(key)
            if value is None:
                continue
            number = as_int(value)
            why = f"must be {bounds.describe()}, not {value!r}" if number is None else bounds.problem(number)
            if why is not None:
                self.problems.add(join_path(ppath, key), why, value)
            elif number is not None:
                numbers[key] = number
        return numbers

    def _gene_layout(self, numbers: Mapping[str, int], props: Mapping[str, Any], ppath: str) -> None:
        """A GENE id has 22 bits below its time for worker, sequence and gene: check they fit."""
        worker_bits = numbers.get("worker-bits", KEY_GENERATOR_RANGES["worker-bits"].default or 0)
        gene_bits = numbers.get("gene-bits")
        bits_path = join_path(ppath, "worker-bits" if "worker-bits" in props else "gene-bits")
        if gene_bits is not None and worker_bits + gene_bits > LOW_BITS - 1:
            self.problems.add(
                bits_path,
                f"worker-bits {worker_bits} + gene-bits {gene_bits} leave no sequence bit: GENE ids have "
                f"{LOW_BITS} bits for worker, sequence and gene, so the two add up to at most "
                f"{LOW_BITS - 1}",
                worker_bits + gene_bits,
            )
        worker_id = numbers.get("worker-id")
        if worker_id is not None and worker_id >= 1 << worker_bits:
            self.problems.add(
                join_path(ppath, "worker-id"),
                f"must be below 2 ** worker-bits = {1 << worker_bits} (worker-bits {worker_bits}), not {worker_id}",
                worker_id,
            )

    def _gene_column(self, props: Mapping[str, Any], ppath: str) -> str | None:
        column = props.get("shard-column")
        if column is None:
            self.problems.add(
                join_path(ppath, "shard-column"),
                "a GENE key generator must name the shard column whose slot its ids carry",
                None,
            )
            return None
        if not isinstance(column, str) or not column.strip():
            self.problems.add(join_path(ppath, "shard-column"), f"must be a column name, not {column!r}", column)
            return None
        return column.strip()

    # -- endpoints ----------------------------------------------------------------------

    def text(self, value: Any, path: str) -> str | None:
        """A string field with ``${ENV:NAME}`` substituted (missing variables are problems)."""
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)
        if not isinstance(value, str):
            self.problems.add(path, f"must be a string, not {value!r}", value)
            return None
        result, missing = substitute_env(value)
        for name in missing:
            self.problems.add(
                path, f"environment variable {name} is not set (referenced as ${{ENV:{name}}})", name
            )
        return result if not missing else None

    def secret(self, value: Any, env_name: Any, path: str, env_path: str) -> Secret | None:
        """A password: ``${ENV:NAME}`` / an env-name field (lazy), or a literal."""
        if env_name is not None:
            if not isinstance(env_name, str) or not env_name.strip():
                self.problems.add(env_path, f"must name an environment variable, not {env_name!r}", env_name)
                return None
            if value is not None:
                self.problems.add(
                    path, "give either a password or a password environment variable, not both", None
                )
            return self._env_secret(env_name.strip(), env_path)
        if value is None:
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            value = str(value)  # YAML reads `password: 123456` as an int
        if not isinstance(value, str):
            self.problems.add(path, f"must be a string, not {type(value).__name__}", None)
            return None
        match = ENV_REF.fullmatch(value.strip())
        if match:
            return self._env_secret(match.group(1), path)
        if ENV_REF.search(value):
            resolved = self.text(value, path)
            return Secret(literal=resolved) if resolved is not None else None
        if value and set(value) == {"*"}:
            self.warn(
                path, f"password {value!r} looks redacted; set the real one with passwordEnv or ${{ENV:NAME}}"
            )
        return Secret(literal=value)

    def _env_secret(self, name: str, path: str) -> Secret:
        if self.check_env and name not in os.environ:
            self.problems.add(path, f"environment variable {name} is not set", name)
        return Secret(env=name)

    def endpoint(
        self,
        name: str,
        url: Any,
        url_path: str,
        *,
        username: str | None,
        password: Secret | None,
        weight: int = 1,
        props: Mapping[str, Any] | None = None,
    ) -> Endpoint | None:
        """An endpoint from a URL; credentials in the URL are used when none are given."""
        if url is None:
            self.problems.add(url_path, "is required (the database URL)", None)
            return None
        text = self.text(url, url_path)
        if text is None:
            return None
        try:
            parsed = parse_url(text, base_dir=self.base_dir)
        except ConfigError as exc:
            self.problems.add(url_path, exc.message, url)
            return None
        if parsed.password is not None and password is None:
            password = Secret(literal=parsed.password)
        return Endpoint(
            name=name,
            dialect=parsed.dialect,
            host=parsed.host,
            port=parsed.port,
            database=parsed.database,
            username=username if username is not None else parsed.username,
            password=password,
            options=parsed.options,
            weight=weight,
            props=freeze(dict(props or {})),
        )


def _as_time(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.replace(tzinfo=None)
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    if isinstance(value, str):
        return datetime.fromisoformat(value.strip())  # ValueError: leave it to the algorithm
    raise ValueError(value)


def precheck_props(type_key: str, props: Mapping[str, Any], where: Any, problems: Problems) -> None:
    """Checks that list *every* problem where an algorithm factory stops at the first.

    * SLOTS / GENE ``slots``: each slot owned exactly once (one lost line of a
      slot map makes a whole share of the data unreachable);
    * TIME_RANGE ``ranges``: no overlap, no gap unless ``allow-gaps`` (a mistyped
      range must not leave routing two owners to pick from).
    """
    _check_prop_integers(props, where, problems)
    if type_key in ("SLOTS", "GENE") and isinstance(props.get("slots"), Mapping):
        bits = as_int(props.get("slot-bits" if type_key == "SLOTS" else "gene-bits", 10))
        if bits is not None and 1 <= bits <= 16:
            check_slot_map(props["slots"], 1 << bits, None, problems, where("slots"))
    elif (
        type_key == "TIME_RANGE"
        and isinstance(props.get("ranges"), (list, tuple))
        and "datetime-pattern" not in props
    ):
        entries = []
        for item in props["ranges"]:
            if isinstance(item, Mapping) and {"start", "end", "target"} <= set(item):
                item = (item["start"], item["end"], item["target"])
            if not isinstance(item, (list, tuple)) or len(item) != 3:
                return  # malformed: the factory names it
            try:
                entries.append((_as_time(item[0]), _as_time(item[1]), str(item[2])))
            except ValueError:
                return
        gaps = str(props.get("allow-gaps", "false")).strip().lower() != "true"
        check_range_list(entries, problems, where("ranges"), what="time range", gaps=gaps)


def _check_prop_integers(props: Mapping[str, Any], where: Any, problems: Problems) -> None:
    """Every integer prop (or its text) fits a signed 64-bit integer, as ShardingSphere reads them."""
    for key, value in props.items():
        if isinstance(value, str) and _INT_TEXT.fullmatch(value.strip()):
            digits = len(value.strip().lstrip("+-"))
            number = int(value.strip()) if digits <= MAX_INT_DIGITS else None
        elif type(value) is int:
            number, digits = value, 0
        else:
            continue
        if number is None or not PROP_INT_MIN <= number <= PROP_INT_MAX:
            shown = show_int(number) if number is not None else f"a number of {digits} digits"
            problems.add(
                where(str(key)),
                f"must fit a signed 64-bit integer ({PROP_INT_MIN} to {PROP_INT_MAX}), not {shown}",
                value,
            )


#: PoolSettings field → its range (both formats spell the fields differently).
POOL_RANGES: Mapping[str, IntRange] = {
    "max_size": RANGES["pool.maxSize"],
    "min_idle": RANGES["pool.minIdle"],
    "acquire_timeout_ms": RANGES["pool.acquireTimeoutMs"],
    "idle_timeout_ms": RANGES["pool.idleTimeoutMs"],
    "max_lifetime_ms": RANGES["pool.maxLifetimeMs"],
    "alive_bypass_window_ms": RANGES["pool.aliveBypassWindowMs"],
}


#: ReadWriteSettings field → (native name, ShardingSphere ``!READWRITE_SPLITTING`` props name);
#: the integer ones have the range ``RANGES["readWrite.<native name>"]`` (docs/readwrite.md).
READ_WRITE_FIELDS: tuple[tuple[str, str, str], ...] = (
    ("read_your_writes", "readYourWrites", "read-your-writes"),
    ("write_window_ms", "writeWindowMs", "write-window-ms"),
    ("gtid_wait_ms", "gtidWaitMs", "gtid-wait-ms"),
    ("primary_read_cap_percent", "primaryReadCapPercent", "primary-read-cap-percent"),
    ("max_lag_ms", "maxLagMs", "max-lag-ms"),
    ("lag_check_interval_ms", "lagCheckIntervalMs", "lag-check-interval-ms"),
    ("recovery_step_percent", "recoveryStepPercent", "recovery-step-percent"),
    ("recovery_interval_ms", "recoveryIntervalMs", "recovery-interval-ms"),
    ("breaker_failures", "breakerFailures", "breaker-failures"),
    ("breaker_reset_ms", "breakerResetMs", "breaker-reset-ms"),
    ("breaker_probe_ms", "breakerProbeMs", "breaker-probe-ms"),
)
READ_YOUR_WRITES_MODES = ("window", "gtid", "off")


def read_write_settings(sec: Any, base: ReadWriteSettings, *, shardingsphere: bool = False) -> ReadWriteSettings:
    """``base`` with the fields ``sec`` (a :class:`~ddm_core.metadata.fields.Section`) gives; problems to its collector."""
    values: dict[str, Any] = {}
    for field_name, native, ss in READ_WRITE_FIELDS:
        name = ss if shardingsphere else native
        if field_name == "read_your_writes":
            mode = sec.str(name)
            if mode is not None:
                mode = mode.lower()
                if mode in READ_YOUR_WRITES_MODES:
                    values[field_name] = mode
                else:
                    sec.problems.add(sec.field_path(name), f"must be window, gtid or off, not {mode!r}", mode)
            continue
        number = sec.int(name, bounds=RANGES[f"readWrite.{native}"])
        if number is not None:
            values[field_name] = number
    sec.finish()
    settings = dataclasses.replace(base, **values) if values else base
    if "breaker_probe_ms" in values and settings.breaker_probe_ms > settings.breaker_reset_ms:
        # Only a probe wait given here is refused: an older config's short breakerResetMs alone still loads
        # (the first wait is then breakerResetMs itself, see readwrite/breaker.py).
        spelled = {field_name: ss if shardingsphere else native for field_name, native, ss in READ_WRITE_FIELDS}
        probe, reset = spelled["breaker_probe_ms"], spelled["breaker_reset_ms"]
        sec.problems.add(
            sec.field_path(probe),
            f"the first wait before a probe ({settings.breaker_probe_ms} ms) must not exceed {reset}, "
            f"the longest wait ({settings.breaker_reset_ms} ms)",
            settings.breaker_probe_ms,
        )
    return settings


def pool_settings(values: Mapping[str, int], base: PoolSettings | None = None) -> PoolSettings:
    """``base`` (or the defaults) with the given fields replaced."""
    base = base or PoolSettings()
    current = {f: getattr(base, f) for f in POOL_RANGES}
    current.update(values)
    return PoolSettings(**current)
