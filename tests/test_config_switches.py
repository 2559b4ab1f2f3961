"""Boolean switches of both formats: written but blank (``allowFullRoute:``, ``~``, ``null``, ``''``) is refused.

A blank switch once loaded as its default: ``allowFullRoute:`` left empty under ``runtime:``
let ``SELECT * FROM t_order`` reach every shard. Every boolean field must refuse it with a
``ConfigValidationError`` naming the field (docs/configuration.md#checks-at-load).

The switches are not listed here. They are the fields the readers themselves read as booleans
(``Section.bool``, and ``Props.boolean`` for algorithm props) while loading the documents below,
which write every section that has one; a test fails when a reader reads a switch these documents
do not write, or when a boolean field of the model is read by no reader here, so a new switch is
covered as soon as it is added to the documents, and cannot be forgotten.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
from typing import Any, Iterator
from unittest import mock

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from ddm_core.algorithms._props import Props
from ddm_core.metadata import ConfigValidationError, load_config, model
from ddm_core.metadata.fields import Section, canon
from ddm_core.metadata.problems import join_path

NATIVE = """\
name: switches
dataSources:
  ds_0: sqlite:///switches_0.db
  ds_1: sqlite:///switches_1.db
algorithms:
  by_user:
    type: INLINE
    props:
      algorithm-expression: ds_${user_id % 2}
      allow-range-query-with-inline-sharding: true
tables:
  - logicTable: t_order
    dataNodes: ds_${0..1}.t_order
    databaseStrategy:
      columns: user_id
      algorithm: by_user
    auto: false
runtime:
  allowFullRoute: false
  allowDmlFullRoute: true
  sqlComment: true
  crossNodeQueries: false
  insertSelectAutocommit: true
  oneUnitPerDataSource: false
xa:
  recoverOnStart: true
proxy:
  auditLog: audit.jsonl
  auditAll: true
  inlineStatements: false
  relay: false
  tls:
    cert: server.pem
    key: server.key
    required: true
  users:
    - name: app
      passwordHash: "*81F5E21E35407D884A6CD4A731AEBFB6AF209E1B"
      unmask: true
"""

#: The runtime switches inside the ``ddm:`` block (``ddm.route``), the Spring-style layout.
NATIVE_DDM_BLOCK = """\
ddm:
  appName: shop
  route:
    allowFullRoute: false
    allowDmlFullRoute: true
    sqlComment: true
    crossNodeQueries: false
    insertSelectAutocommit: true
    oneUnitPerDataSource: false
dataSources:
  ds_0: sqlite:///switches_0.db
"""

SHARDINGSPHERE = """\
databaseName: switches
dataSources:
  ds_0:
    jdbcUrl: jdbc:mysql://127.0.0.1:3306/switches_0
  ds_1:
    jdbcUrl: jdbc:mysql://127.0.0.1:3306/switches_1
rules:
- !SHARDING
  tables:
    t_order:
      actualDataNodes: ds_${0..1}.t_order
      auditStrategy:
        auditorNames:
          - sharding_key_required_auditor
        allowHintDisable: true
  defaultDatabaseStrategy:
    standard:
      shardingColumn: user_id
      shardingAlgorithmName: by_user
  defaultAuditStrategy:
    auditorNames:
      - sharding_key_required_auditor
    allowHintDisable: false
  shardingAlgorithms:
    by_user:
      type: INLINE
      props:
        algorithm-expression: ds_${user_id % 2}
        allow-range-query-with-inline-sharding: true
  auditors:
    sharding_key_required_auditor:
      type: DML_SHARDING_CONDITIONS
"""

DOCUMENTS = {"native": NATIVE, "native ddm block": NATIVE_DDM_BLOCK, "shardingsphere": SHARDINGSPHERE}


@dataclasses.dataclass(frozen=True)
class Switch:
    document: str
    path: str  # as problems spell it: runtime.allowFullRoute, rules[0].tables.t_order.auditStrategy.allowHintDisable


def value_nodes(text: str) -> dict[str, yaml.Node]:
    """Every value of the YAML ``text`` by its field path, spelled as ``join_path`` spells problems' paths."""
    nodes: dict[str, yaml.Node] = {}
    todo: list[tuple[str, yaml.Node]] = [("", yaml.compose(text, Loader=yaml.SafeLoader))]
    while todo:
        path, node = todo.pop()
        nodes[path] = node
        if isinstance(node, yaml.MappingNode):
            todo.extend((join_path(path, key.value), value) for key, value in node.value)
        elif isinstance(node, yaml.SequenceNode):
            todo.extend((join_path(path, i), value) for i, value in enumerate(node.value))
    return nodes


@contextlib.contextmanager
def booleans_read() -> Iterator[tuple[list[str], list[tuple[str, str]]]]:
    """While active: the field paths ``Section.bool`` reads, and the (algorithm, prop) pairs ``Props.boolean`` reads."""
    fields: list[str] = []
    props: list[tuple[str, str]] = []
    section_bool, props_boolean = Section.bool, Props.boolean

    def read_field(self: Section, *names: str, default: Any = None) -> Any:
        fields.append(self.field_path(*names))
        return section_bool(self, *names, default=default)

    def read_prop(self: Props, prop: str, default: bool) -> bool:
        props.append((self.name, prop))
        return props_boolean(self, prop, default)

    with mock.patch.object(Section, "bool", read_field), mock.patch.object(Props, "boolean", read_prop):
        yield fields, props


@functools.cache
def discovered() -> tuple[tuple[Switch, ...], tuple[str, ...]]:
    """(the switches the documents write, the paths the readers read as switches that no document writes).

    A reader reads the switches of a section even when a document leaves the section out
    (``xa.recoverOnStart`` while loading the ``ddm:`` block document): one document writing each is enough.
    """
    written: list[Switch] = []
    read: list[str] = []
    for name, text in DOCUMENTS.items():
        nodes = value_nodes(text)
        with booleans_read() as (fields, props):
            load_config(text, check_env=False)
        paths = list(fields)
        for algorithm, prop in props:  # an algorithm's props lie wherever the format keeps algorithms
            tail = join_path(join_path(join_path("", algorithm), "props"), prop)
            paths += [p for p in nodes if p == tail or p.endswith("." + tail)] or [tail]
        read += paths
        written += [Switch(name, path) for path in dict.fromkeys(paths) if path in nodes]
    unwritten = set(read) - {s.path for s in written}
    return tuple(written), tuple(sorted(unwritten))


def switches() -> tuple[Switch, ...]:
    return discovered()[0]


def test_the_documents_load_as_written() -> None:
    native, ddm_block, shardingsphere = (load_config(text, check_env=False) for text in DOCUMENTS.values())
    assert (native.runtime.allow_full_route, native.proxy.audit_all, native.proxy.users[0].unmask) == (False, True, True)
    assert ddm_block.runtime.allow_full_route is False
    assert shardingsphere.tables["t_order"].auditors == ("sharding_key_required_auditor",)


def test_the_documents_write_every_switch_the_readers_read() -> None:
    written, unwritten = discovered()
    assert not unwritten, f"the readers read these switches, which no document here writes: {unwritten}"
    assert {s.document for s in written} == set(DOCUMENTS)


def model_booleans() -> set[str]:
    """Every bool field of the configuration model, as ``Class.field``."""
    classes = [c for c in vars(model).values() if isinstance(c, type) and c.__module__ == model.__name__]
    return {
        f"{c.__name__}.{f.name}"
        for c in classes
        if dataclasses.is_dataclass(c)
        for f in dataclasses.fields(c)
        if f.type in ("bool", bool)
    }


def test_every_boolean_field_of_the_model_is_a_switch_here() -> None:
    # Own-format field names are the model's, matched loosely (allow_full_route is allowFullRoute).
    read = {canon(s.path.rsplit(".", 1)[-1]) for s in switches() if s.document.startswith("native")}
    booleans = model_booleans()
    assert "RuntimeSettings.allow_full_route" in booleans
    missing = sorted(b for b in booleans if canon(b.split(".")[1]) not in read)
    assert not missing, f"boolean fields no document here writes (add them to NATIVE): {missing}"


#: Blank as YAML writes it: nothing, the null spellings, an empty or all-blank string.
BLANKS = st.one_of(
    st.sampled_from(["", "~", "null", "Null", "NULL", "''", '""']),
    st.text(alphabet=" \t", min_size=1, max_size=4).map(json.dumps),
)


@settings(max_examples=200, deadline=None)
@given(switch=st.deferred(lambda: st.sampled_from(switches())), blank=BLANKS, comment=st.booleans())
def test_a_blank_switch_is_refused_naming_the_field(switch: Switch, blank: str, comment: bool) -> None:
    text = DOCUMENTS[switch.document]
    node = value_nodes(text)[switch.path]
    value = blank + ("  # to be decided" if comment else "")
    with pytest.raises(ConfigValidationError) as info:
        load_config(text[: node.start_mark.index] + value + text[node.end_mark.index :], check_env=False)
    err = info.value
    # The first problem — the one a caller that shows one shows — is the switch's.
    assert err.field == switch.path, str(err)
    assert "true or false" in err.problems[0].message
    assert f"{switch.path}: " in str(err)


def test_a_blank_allow_full_route_is_refused() -> None:
    # The case as it was found: the switch written to be filled in, left empty.
    with pytest.raises(ConfigValidationError) as info:
        load_config("dataSources:\n  ds_0: sqlite:///a.db\nruntime:\n  allowFullRoute:\n  maxOffset: 100\n")
    assert [(p.path, p.message) for p in info.value.problems] == [
        ("runtime.allowFullRoute", "must be true or false, not blank (empty, ~ or null)")
    ]
