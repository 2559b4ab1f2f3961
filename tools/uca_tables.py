"""Write ddm-core's UCA weight files from a MariaDB server: src/ddm_core/merge/data/uca400.bin, uca520.bin.

The library reads these files to compare strings as ``utf8mb4_unicode_ci`` (UCA 4.0.0) and
``utf8mb4_unicode_520_ci`` (UCA 5.2.0) do (see ``ddm_core.merge.uca`` for the format). They
are MariaDB's own weights: ``WEIGHT_STRING`` of every code point, U+0000 to U+10FFFF (the
surrogates excepted). A code point whose weights follow the implicit rule is stored as part of
a run (or not at all, for the common base); every other one with its weights. The file is
read back and checked against every weight the server gave before it is kept.

Run it against MariaDB 10.11 (the version the tests prove the keys against), from the checkout:

    .venv/bin/python tools/uca_tables.py --host 127.0.0.1 --port 3306 --user root

It needs PyMySQL (a dependency of ddm-core) and reads ``mysql.seq_*`` (the Sequence engine); it writes
nothing to the server.
"""

from __future__ import annotations

import argparse
import struct
import sys
import zlib
from pathlib import Path
from typing import Any

from ddm_core.execute.mysql_connect import pymysql_module
from ddm_core.merge.uca import MAGIC, VERSIONS, UcaTable

OUT = Path(__file__).resolve().parents[1] / "src" / "ddm_core" / "merge" / "data"
COLLATIONS = {"400": "utf8mb4_unicode_ci", "520": "utf8mb4_unicode_520_ci"}
TOP = 0x10FFFF
SURROGATES = range(0xD800, 0xE000)
BEYOND_BMP = 0xFFFD  # UCA 4.0.0's weight for every character past U+FFFF
DEFAULT_BASE = 0xFBC0  # the implicit base of an unassigned character
STEP = 0x20000  # code points per query


def server_weights(conn: Any, collation: str) -> dict[int, tuple[int, ...]]:
    """Every code point's primary weights under ``collation``, as the server gives them."""
    out: dict[int, tuple[int, ...]] = {}
    with conn.cursor() as cur:
        for lo in range(0, TOP + 1, STEP):
            hi = min(TOP, lo + STEP - 1)
            cur.execute(
                f"SELECT seq, WEIGHT_STRING(CONVERT(CHAR(seq USING utf32) USING utf8mb4) COLLATE {collation}) "
                f"FROM mysql.seq_{lo}_to_{hi} WHERE seq NOT BETWEEN {SURROGATES[0]} AND {SURROGATES[-1]}"
            )
            for code, weight_string in cur.fetchall():
                out[code] = struct.unpack(f">{len(weight_string) // 2}H", weight_string)
    return out


def implicit(code: int, base: int) -> tuple[int, int]:
    return base + (code >> 15), (code & 0x7FFF) | 0x8000


def implicit_base(code: int, weights: tuple[int, ...]) -> int | None:
    """The base the implicit rule gives ``weights`` for ``code``, if it does."""
    if len(weights) == 2 and weights[1] == implicit(code, 0)[1] and 0xFB40 <= weights[0] - (code >> 15) < 0xFC00:
        return weights[0] - (code >> 15)
    return None


def encode(weights: dict[int, tuple[int, ...]]) -> bytes:
    beyond_bmp = {w for code, w in weights.items() if code > 0xFFFF}
    maxchar = 0xFFFF if beyond_bmp == {(BEYOND_BMP,)} else TOP
    runs: list[list[int]] = []  # [first, last, base]
    listed: list[tuple[int, tuple[int, ...]]] = []
    for code in sorted(weights):
        if code > maxchar:
            break
        base = implicit_base(code, weights[code])
        if base is None:
            listed.append((code, weights[code]))
        elif base != DEFAULT_BASE:
            if runs and runs[-1][2] == base and runs[-1][1] == code - 1:
                runs[-1][1] = code
            else:
                runs.append([code, code, base])
    payload = [struct.pack(">IHHII", maxchar, BEYOND_BMP, DEFAULT_BASE, len(runs), len(listed))]
    payload += [struct.pack(">IIH", *run) for run in runs]
    payload.append(struct.pack(f">{len(listed)}I", *(code for code, _ in listed)))
    payload.append(bytes(len(w) for _, w in listed))
    payload.append(b"".join(struct.pack(f">{len(w)}H", *w) for _, w in listed))
    return MAGIC + zlib.compress(b"".join(payload), 9)


def check(data: bytes, weights: dict[int, tuple[int, ...]], name: str) -> None:
    table = UcaTable(data, name)
    wrong = [code for code, w in weights.items() if tuple(table.weights(code)) != w]
    if wrong:
        sys.exit(f"{name}: {len(wrong)} code points read back wrong, e.g. U+{wrong[0]:04X}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=3306)
    parser.add_argument("--user", default="root")
    parser.add_argument("--password", default="")
    args = parser.parse_args()
    conn = pymysql_module().connect(
        host=args.host, port=args.port, user=args.user, password=args.password, charset="utf8mb4"
    )
    with conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        (version,) = cur.fetchone()
    if "MariaDB" not in version:
        sys.exit(f"the server at {args.host}:{args.port} is {version}, not MariaDB")
    for uca, collation in COLLATIONS.items():
        weights = server_weights(conn, collation)
        data = encode(weights)
        check(data, weights, VERSIONS[uca])
        (OUT / VERSIONS[uca]).write_bytes(data)
        print(f"{VERSIONS[uca]}: {collation} on MariaDB {version}, {len(weights)} code points, {len(data)} bytes")


if __name__ == "__main__":
    main()
