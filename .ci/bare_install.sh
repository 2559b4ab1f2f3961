#!/usr/bin/env bash
# README's front door on a machine that has only Python: ddm-core installed with no extra, once
# from the checkout (`pip install .`) and once from the built wheel (what users get), each in a new
# venv, then .ci/bare_check.py in each: every command loads, `ddm demo` runs, a command that needs
# an extra names it, README's snippets run. .ci/run runs it; it runs alone as well.
# It builds from a copy of the committed tree (git archive HEAD), so it may run beside `make test`, which
# builds the same checkout in place: the two builds share no directory.
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/ddm-bare.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/tree"
git archive HEAD | tar -x -C "$work/tree"
cd "$work/tree"

check() {  # check VENV WHAT: a new venv, WHAT installed into it with pip, the checks in it
    "$python" -m venv "$1"
    "$1/bin/pip" install -q --disable-pip-version-check "$2"
    echo "== bare install: $2"
    "$1/bin/python" .ci/bare_check.py
}

check "$work/checkout" .
"$work/checkout/bin/pip" wheel -q --disable-pip-version-check --no-deps -w "$work/dist" .
wheels=("$work"/dist/ddm_core-*.whl)
check "$work/wheel" "${wheels[0]}"
