#!/usr/bin/env bash
# The Debian tools the tests and benchmarks drive, installed with apt-get when missing (`make deps`,
# which `make test` runs first): sysbench (a libmariadb client of `ddm proxy`), pt-table-checksum
# (percona-toolkit, the checker benchmark's baseline), valgrind (benchmarks/instructions.py) and etcd
# (etcd-server: the private etcd of tests/etcd_support.py).
# Without apt-get it names what is missing and fails, before a test fails for it.
set -euo pipefail
tools=(sysbench:sysbench pt-table-checksum:percona-toolkit valgrind:valgrind etcd:etcd-server)  # command:Debian package
missing=()
for tool in "${tools[@]}"; do
    command -v "${tool%%:*}" >/dev/null || missing+=("${tool#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if ! command -v apt-get >/dev/null; then
    echo "make deps: the tests need ${missing[*]} (Debian package names); install them and run again" >&2
    exit 1
fi
sudo=()
[ "$(id -u)" -eq 0 ] || sudo=(sudo)
echo "make deps: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq || echo "make deps: apt-get update failed; installing from the package lists at hand" >&2
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
