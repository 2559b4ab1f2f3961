"""SQLAlchemy's own dialect compliance suite (``sqlalchemy.testing.suite``) against ``ddm+pymysql``.

The suite runs in a subprocess (tests/sqlalchemy_suite/: SQLAlchemy's pytest plugin takes the
session over), once per configuration, each written here into a temp file over four fresh
databases on the local MariaDB, plus the suite's two schemas (``<ds_0's database>_test_schema``
and ``_test_schema_2``, tests/sqlalchemy_suite/suite_schemas.py):

* ``single``: nothing sharded: every table the suite creates is a single table on ``ds_0``
  (tables a configuration does not name live on the default data source);
* ``sharded``: the suite's tables whose tests allow it, sharded over the four data sources by
  their key (:data:`SHARDED`); everything else single on ``ds_0``. The engine's transactions are
  XA ones (``transaction_mode=xa``): the suite writes rows of one table to several shards inside
  one transaction.

What ddm-core rules out is excluded with its reason in tests/sqlalchemy_suite/requirements.py;
anything that fails fails this test, with the counts and the failures printed.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import pytest

from services import fresh_mariadb_databases

ROOT = Path(__file__).resolve().parent.parent
SUITE = ROOT / "tests" / "sqlalchemy_suite"
SHARDS = 4

#: Suite tables sharded in the ``sharded`` configuration: (table, shard key, tables per data source).
#: ``some_table`` (test_select, test_cte, test_dialect) is the suite's query table: every definition
#: has an integer ``id`` the tests give; ``employees`` (test_rowcount) is keyed by ``employee_id``.
SHARDED = (("some_table", "id", 2), ("employees", "employee_id", 1))


class Counts(NamedTuple):
    passed: int
    skipped: int
    failed: int
    errors: int


def suite_config(kind: str, databases: list[str]) -> dict[str, Any]:
    """The ddm-core configuration of one run: ``ds_0`` .. ``ds_3`` over the first four ``databases``, the
    suite's schemas the last two (tests/sqlalchemy_suite/suite_schemas.py reads them from ``props``)."""
    sources, schemas = databases[:SHARDS], databases[SHARDS:]
    urls = {f"ds_{i}": {"url": f"mysql://127.0.0.1:3306/{db}", "username": "root", "password": ""}
            for i, db in enumerate(sources)}  # fmt: skip
    config: dict[str, Any] = {
        "name": "ddm_suite", "dataSources": urls, "defaultDataSource": "ds_0",
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True},
        # The suite builds engines of its own, each with an executor (pools) until it is collected: no idle
        # connections kept, so they do not add up to the server's max_connections.
        "pool": {"maxSize": 8, "minIdle": 0},
        "props": {"sqlalchemySuiteSchemas": schemas},
    }  # fmt: skip
    if kind == "sharded":
        config["tables"] = [_sharded(table, key, per, list(urls)) for table, key, per in SHARDED]
    return config


def _sharded(table: str, key: str, per: int, names: list[str]) -> dict[str, Any]:
    """``key % 4`` picks the data source, ``key % per`` the table; the suite's integer primary keys are
    AUTO_INCREMENT in its DDL, which a sharded table refuses: the key generator fills the column instead
    (the suite gives its ids)."""
    spec: dict[str, Any] = {
        "logicTable": table, "shardKey": key, "algorithm": "MOD", "databases": names, "tablePerShard": per,
        "keyGenerator": {"column": key, "type": "snowflake"},
    }  # fmt: skip
    if per > 1:
        spec["tableAlgorithm"] = "MOD"
    return spec


@pytest.fixture()
def databases() -> Iterator[list[str]]:
    """Four fresh databases for the data sources, then two for the suite's schemas; all dropped afterwards."""
    with fresh_mariadb_databases(SHARDS + 2) as names:
        yield names


def run_suite(dburi: str, junit: Path) -> tuple[Counts, str]:
    """Run the suite against ``dburi``; its counts (from the JUnit report) and its printed summary."""
    command = [
        sys.executable, "-m", "pytest", "-c", str(SUITE / "setup.cfg"), "--rootdir", str(SUITE),
        "--confcutdir", str(SUITE), str(SUITE), "--dburi", dburi, "-p", "no:cacheprovider", "-q",
        "--tb=short", "-rfE", f"--junitxml={junit}",
    ]  # fmt: skip
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if not junit.exists():
        raise AssertionError(f"the suite did not run (exit {done.returncode}):\n{done.stdout[-5000:]}\n{done.stderr[-5000:]}")
    suite = ET.parse(junit).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")  # type: ignore[assignment]
    tests, skipped, failed, errors = (int(suite.get(k, "0")) for k in ("tests", "skipped", "failures", "errors"))
    summary = "\n".join(done.stdout.splitlines()[-60:])
    return Counts(tests - skipped - failed - errors, skipped, failed, errors), summary


@pytest.mark.parametrize("kind", ["single", "sharded"])
def test_sqlalchemy_compliance_suite(kind: str, databases: list[str], tmp_path: Path) -> None:
    path = tmp_path / f"{kind}.json"  # JSON is YAML: the configuration loader reads it
    path.write_text(json.dumps(suite_config(kind, databases), indent=2))
    dburi = f"ddm+pymysql:///?config={path}" + ("&transaction_mode=xa" if kind == "sharded" else "")
    counts, summary = run_suite(dburi, tmp_path / "junit.xml")
    print(f"{kind}: {counts.passed} passed, {counts.skipped} skipped, {counts.failed} failed, {counts.errors} errors")
    assert counts.passed > 0 and counts.failed == counts.errors == 0, f"{kind}: {counts}\n{summary}"
    assert re.search(r"\d+ passed", summary), summary
