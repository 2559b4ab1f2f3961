"""How the proxy sorts statements by their first words (``session_statements.py``), without a parse."""

from __future__ import annotations

import pytest

from services import require_module

require_module("mysql_mimic", "ddm proxy")

from ddm_core.session_statements import Kind, classify, probe_items  # noqa: E402


@pytest.mark.parametrize(("sql", "kind", "rest"), [
    # what mysqldump and mariadb-dump write at the top of a dump: the server runs the body
    ("/*!40101 SET NAMES utf8mb4 */;", Kind.SET, "SET NAMES utf8mb4"),
    ("/*!40014 SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0 */;", Kind.SET,
     "SET @OLD_UNIQUE_CHECKS=@@UNIQUE_CHECKS, UNIQUE_CHECKS=0"),
    ("/*M!100401 SET @x = 1 */", Kind.SET, "SET @x = 1"),
    ("/*!50503 SET NAMES utf8mb4 */ ;  \n", Kind.SET, "SET NAMES utf8mb4"),
    ("/*! USE logic_db */", Kind.USE, "logic_db"),
    ("/*!40000 ALTER TABLE t_order DISABLE KEYS */", Kind.ROUTED, ""),
    ("-- a dump\n/*!40101 SET NAMES utf8 */", Kind.SET, "SET NAMES utf8"),
    # not one whole executable comment: the router (and the privilege check) read it as written
    ("/*! SELECT 1 */ /*! SELECT 2 */", Kind.ROUTED, ""),
    ("SELECT 1 /*!, 2 */", Kind.ROUTED, ""),
    # a plain comment is no statement
    ("/* SET NAMES utf8 */", Kind.EMPTY, ""),
    ("  ;; ", Kind.EMPTY, ""),
])  # fmt: skip
def test_a_statement_in_one_executable_comment_is_its_body(sql: str, kind: Kind, rest: str) -> None:
    assert classify(sql) == (kind, rest)


@pytest.mark.parametrize("size", [1_000, 100_000, 2_000_000])
def test_long_texts_are_classified_in_one_pass(size: int) -> None:
    # Each of these took time quadratic in its length (a trailing-run regex, a lazy probe pattern):
    # 2 000 000 characters would not finish in an hour. In one pass they take milliseconds.
    assert classify("SELECT" + " " * size + "1").kind is Kind.ROUTED
    assert classify("SELECT" + " " * size + "@@version_comment").kind is Kind.PROBE
    assert probe_items("SELECT" + " " * size + "@@version_comment LIMIT 1") is not None
    assert classify("/*!" + "x" * size + "*/").kind is Kind.ROUTED
    assert classify("SELECT 1" + " ;" * size).kind is Kind.ROUTED
