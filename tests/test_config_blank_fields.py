"""String and integer fields of both formats: written but blank (``auditLog:``, ``~``, ``null``, ``''``) is refused.

A blank field once loaded as absent and took its default: ``proxy.auditLog:`` left to be filled
in meant "no audit log", ``maxOffset:`` the default depth. Every string and integer field must
refuse it with a ``ConfigValidationError`` naming the field (docs/configuration.md#checks-at-load),
as tests/test_config_switches.py shows for the boolean switches.

The fields are not listed here. They are what the readers read through ``Section.str`` and
``Section.int`` while loading the documents below; a test fails when a reader's call is not made
while loading them, or a field it reads is written by none of them, so a new field is covered as
soon as a document writes it, and cannot be forgotten.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import pathlib
import sys
from typing import Any, Iterator
from unittest import mock

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from test_config_switches import BLANKS, DOCUMENTS, value_nodes

import ddm_core.metadata
from ddm_core.metadata import ConfigValidationError, load_config
from ddm_core.metadata.fields import Section

#: What the switch documents leave out: replicas, pools, readWrite, xa, metadata, the rest of proxy,
#: the short form's table fields, an explicit table's strategy kind and both kinds of key generator.
NATIVE_FIELDS = """\
name: fields
appName: shop
defaultDataSource: ds_0
dataSources:
  ds_0:
    url: sqlite:///fields_0.db
    primaryName: primary_0
    weight: 2
    loadBalancer: round_robin
    transactionalReads: fixed
    pool: {maxSize: 10, minIdle: 2, acquireTimeoutMs: 3000, idleTimeoutMs: 60000, maxLifetimeMs: 1800000, aliveBypassWindowMs: 500}
    replicas:
      - {url: sqlite:///fields_0r.db, name: replica_0, weight: 1}
  ds_1: sqlite:///fields_1.db
pool: {maxSize: 10, minIdle: 2, acquireTimeoutMs: 3000, idleTimeoutMs: 60000, maxLifetimeMs: 1800000}
readWrite:
  readYourWrites: window
  writeWindowMs: 500
  maxLagMs: 1000
  lagCheckIntervalMs: 1000
  gtidWaitMs: 50
  primaryReadCapPercent: 50
  recoveryIntervalMs: 1000
  recoveryStepPercent: 20
  breakerFailures: 3
  breakerResetMs: 5000
  breakerProbeMs: 1000
keyGenerators:
  order_ids: {type: SNOWFLAKE}
tables:
  - logicTable: t_order
    databases: [ds_0, ds_1]
    shardKey: user_id
    algorithm: slots
    slotCount: 64
    shardCount: 2
    tablePerShard: 2
    tableKey: order_id
    tableAlgorithm: HASH_MOD
    tablePattern: "{logic}_{db}_{table}"
    keyGenerator: {column: order_id, generator: order_ids}
  - logicTable: t_item
    dataNodes: ds_${0..1}.t_item
    databaseStrategy: {kind: standard, columns: user_id, algorithm: item_by_user}
    keyGenerator: {column: item_id, type: SNOWFLAKE}
algorithms:
  item_by_user: {type: INLINE, props: {algorithm-expression: "ds_${user_id % 2}"}}
runtime:
  fullRouteThreshold: 8
  maxOffset: 10000
  slowSqlMs: 200
  appName: shop
  mergeMemoryWarnMb: 256
  maxJoinRows: 500000
  maxJoinMemoryMb: 256
  insertSelectAutocommit: false
xa:
  logDataSource: ds_0
  timeoutMs: 30000
  abandonAfterMs: 600000
  maxConcurrent: 16
metadata:
  server: config-center:8848
  namespace: prod
  failoverSnapshot: snapshot.json
proxy:
  transactionMode: xa
  slowSqlMs: 200
  auditLog: audit.jsonl
  workers: 16
  batchRows: 500
  shutdownGraceMs: 10000
  linkIdleMs: 2000
  statementTimeoutMs: 3000
  maxConnections: 1000
  maxUserConnections: 100
  maxConnectErrors: 100
  hostBlockMs: 60000
  failedLoginsBeforeDelay: 3
  failedLoginDelayMaxMs: 2000
  connectTimeoutMs: 10000
  netReadTimeoutMs: 30000
  waitTimeoutMs: 28800000
  maxAllowedPacket: 16777216
  backLog: 128
  tableRateLimits: {t_order: 100}
  masks:
    - {column: phone, mask: phone, table: t_order}
  tls: {cert: server.pem, key: server.key, clientCa: clients.pem, clientCert: optional}
  users:
    - name: app
      sha2Hash: "0000000000000000000000000000000000000000000000000000000000000000"
      rateLimit: 10
      requireCertSubject: "CN=app,O=Acme"
"""

#: Read/write splitting (5.1.0's ``type: Static`` group beside 5.1's staticStrategy), the props of
#: ddm-core's own read/write settings, per-table strategies, 5.5's keyGenerateStrategies, single tables.
SHARDINGSPHERE_FIELDS = """\
databaseName: fields
dataSources:
  primary_0: {jdbcUrl: "jdbc:mysql://127.0.0.1:3306/fields_0"}
  replica_0: {jdbcUrl: "jdbc:mysql://127.0.0.1:3306/fields_0r"}
  primary_1: {jdbcUrl: "jdbc:mysql://127.0.0.1:3306/fields_1"}
  replica_1: {jdbcUrl: "jdbc:mysql://127.0.0.1:3306/fields_1r"}
rules:
- !READWRITE_SPLITTING
  dataSources:
    rw_0:
      staticStrategy:
        writeDataSourceName: primary_0
        readDataSourceNames: [replica_0]
      loadBalancerName: by_weight
      transactionalReadQueryStrategy: FIXED
    rw_1:
      type: Static
      props:
        write-data-source-name: primary_1
        read-data-source-names: replica_1
  loadBalancers:
    by_weight:
      type: WEIGHT
      props:
        replica_0: 1
  props:
    read-your-writes: window
    write-window-ms: 500
    max-lag-ms: 1000
    lag-check-interval-ms: 1000
    gtid-wait-ms: 50
    primary-read-cap-percent: 50
    recovery-interval-ms: 1000
    recovery-step-percent: 20
    breaker-failures: 3
    breaker-reset-ms: 5000
    breaker-probe-ms: 1000
- !TRANSACTION
  defaultType: XA
  providerType: Atomikos
- !SHARDING
  defaultShardingColumn: user_id
  tables:
    t_order:
      actualDataNodes: rw_${0..1}.t_order_${0..1}
      tableStrategy:
        standard:
          shardingColumn: order_id
          shardingAlgorithmName: by_order
      keyGenerateStrategy:
        column: order_id
        keyGeneratorName: snowflake
    t_item:
      actualDataNodes: rw_${0..1}.t_item
  defaultDatabaseStrategy:
    standard:
      shardingAlgorithmName: by_user
  keyGenerateStrategies:
    item_ids:
      keyGenerateType: column
      logicTable: t_item
      keyGenerateColumn: item_id
      keyGeneratorName: snowflake
  shardingAlgorithms:
    by_user:
      type: INLINE
      props:
        algorithm-expression: rw_${user_id % 2}
    by_order:
      type: INLINE
      props:
        algorithm-expression: t_order_${order_id % 2}
  keyGenerators:
    snowflake:
      type: SNOWFLAKE
- !SINGLE
  defaultDataSource: rw_0
"""

FIELD_DOCUMENTS = {**DOCUMENTS, "native fields": NATIVE_FIELDS, "shardingsphere fields": SHARDINGSPHERE_FIELDS}
GETTERS = ("str", "int")
READERS = pathlib.Path(ddm_core.metadata.__file__).parent


@dataclasses.dataclass(frozen=True)
class Field:
    document: str
    path: str  # as problems spell it: proxy.auditLog, rules[0].dataSources.rw_0.loadBalancerName


@dataclasses.dataclass(frozen=True)
class Read:
    """One reader's call of a getter for one field name: where in the readers, and which name."""

    site: str  # metadata/native/proxy.py:84
    name: str  # the first name asked for (the others are its aliases)


def site_of(frame: Any) -> str:
    return f"{pathlib.Path(frame.f_code.co_filename).relative_to(READERS.parent)}:{frame.f_lineno}"


@contextlib.contextmanager
def fields_read() -> Iterator[list[tuple[Read, str]]]:
    """While active: every ``Section.str`` / ``Section.int`` call as (the reader's call, the field path)."""
    calls: list[tuple[Read, str]] = []
    originals = {getter: getattr(Section, getter) for getter in GETTERS}

    def recording(getter: str) -> Any:
        def read(self: Section, *names: str, **options: Any) -> Any:
            calls.append((Read(site_of(sys._getframe(1)), names[0]), self.field_path(*names)))
            return originals[getter](self, *names, **options)

        return read

    with contextlib.ExitStack() as stack:
        for getter in GETTERS:
            stack.enter_context(mock.patch.object(Section, getter, recording(getter)))
        yield calls


def reader_calls() -> set[str]:
    """Every line of the readers that calls ``.str(...)`` or ``.int(...)``, from their source."""
    sites = set()
    for module in READERS.rglob("*.py"):
        if module.name == "fields.py":
            continue
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in GETTERS:
                sites.add(f"{module.relative_to(READERS.parent)}:{node.lineno}")
    return sites


@functools.cache
def discovered() -> tuple[tuple[Field, ...], frozenset[Read], frozenset[Read]]:
    """(the fields the documents write, every read made, the reads of fields no document writes)."""
    written: list[Field] = []
    reads: set[Read] = set()
    covered: set[Read] = set()
    for name, text in FIELD_DOCUMENTS.items():
        nodes = value_nodes(text)
        with fields_read() as calls:
            load_config(text, check_env=False)
        for read, path in calls:
            reads.add(read)
            if path in nodes:
                covered.add(read)
                written.append(Field(name, path))
    return tuple(dict.fromkeys(written)), frozenset(reads), frozenset(reads - covered)


def fields() -> tuple[Field, ...]:
    return discovered()[0]


def test_the_documents_load_as_written() -> None:
    native = load_config(NATIVE_FIELDS, check_env=False)
    assert (native.proxy.audit_log, native.runtime.max_offset, native.xa.log_data_source) == ("audit.jsonl", 10000, "ds_0")
    shardingsphere = load_config(SHARDINGSPHERE_FIELDS, check_env=False)
    assert shardingsphere.data_sources["rw_0"].transactional_reads == "fixed"


def test_every_reader_call_is_made_loading_the_documents() -> None:
    made = {read.site for read in discovered()[1]}
    assert "metadata/native/proxy.py" in " ".join(made)
    missing = sorted(reader_calls() - made)
    assert not missing, f"reader calls of Section.str / Section.int no document here reaches: {missing}"


def test_the_documents_write_every_field_the_readers_read() -> None:
    unwritten = sorted(f"{r.site} {r.name}" for r in discovered()[2])
    assert not unwritten, f"the readers read these fields, which no document here writes: {unwritten}"


def refusal(field: Field, blank: str, comment: bool = False) -> ConfigValidationError:
    """The error of loading ``field``'s document with ``blank`` written as the field's value."""
    text = FIELD_DOCUMENTS[field.document]
    node = value_nodes(text)[field.path]
    at_line_end = text[node.end_mark.index :].startswith("\n")  # a comment would end a flow mapping
    value = blank + ("  # to be decided" if comment and at_line_end else "")
    with pytest.raises(ConfigValidationError) as info:
        load_config(text[: node.start_mark.index] + value + text[node.end_mark.index :], check_env=False)
    return info.value


def test_every_field_left_empty_is_refused_naming_it() -> None:
    # The case as it was found, for every field: `auditLog:` written to be filled in, left empty.
    named = {field: refusal(field, "").problems[0] for field in fields()}
    wrong = {
        field.path: f"{problem.path}: {problem.message}"
        for field, problem in named.items()
        if problem.path != field.path or not problem.message.endswith("not blank (empty, ~ or null)")
    }
    assert not wrong, wrong
    assert len(named) > 100 and {f.document for f in named} == set(FIELD_DOCUMENTS)


@settings(max_examples=300, deadline=None)
@given(field=st.deferred(lambda: st.sampled_from(fields())), blank=BLANKS, comment=st.booleans())
def test_a_blank_field_is_refused_naming_the_field(field: Field, blank: str, comment: bool) -> None:
    err = refusal(field, blank, comment)
    # The first problem — the one a caller that shows one shows — is the field's.
    assert err.field == field.path, str(err)
    assert f"{field.path}: " in str(err)
    if yaml.safe_load(blank) is None:  # a quoted blank is a string, refused as one
        assert err.problems[0].message.endswith("not blank (empty, ~ or null)"), str(err)


def test_a_blank_audit_log_is_refused() -> None:
    with pytest.raises(ConfigValidationError) as info:
        load_config("dataSources:\n  ds_0: sqlite:///a.db\nproxy:\n  auditLog:\n  slowSqlMs: 100\n")
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("proxy.auditLog", "must be a non-empty string, not blank (empty, ~ or null)")
    ]
