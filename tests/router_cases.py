"""Shared fixtures of the router suite: the three configs, independent expectations, the case runner.

Expected targets are computed here from the *documented formulas*, never by asking
the router (or its algorithms) where a value goes:

* ``native_orders.yaml`` (own format, 4 databases × 4 tables, 1024 slots):
  database ``ds_{slot_of(user_id, 10) // 256}`` (explicit layout ``ds_0: 0-255``...),
  table ``t_order_{db}_{hash64(user_id) % 4}`` (HASH_MOD over xxh3_64).
* ``ss_order_db_2x16.yaml`` (ShardingSphere YAML, INLINE): database
  ``ds{user_id % 32 / 16}`` with integer division (not Groovy's decimal:
  docs/notes.md#integer-division-in-inline-expressions),
  table ``t_order_{user_id % 16}`` — 2 × 16 = 32 nodes.
* ``router_ranges.yaml`` (written for this suite): ``t_log`` database ``user_id % 4``,
  table ``BOUNDARY_RANGE`` at 1000 (``t_log_{db}_0`` below, ``_1`` from 1000 up);
  ``t_account`` database by ``VOLUME_RANGE`` 100/200/300; ``t_audit`` by a hint.

A :class:`Case` is one statement with its expected units ``(data source, SQL, params)``;
SQL is compared after collapsing whitespace only.
"""

from __future__ import annotations

import os
import re
from contextlib import nullcontext
from dataclasses import replace, dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Sequence

from ddm_core.hashing import hash64, slot_of
from ddm_core.metadata import load_config
from ddm_core.route import RouteKind, Router, hint

CONFIGS = Path(__file__).parent / "configs"
os.environ.setdefault("DDM_ORDER_PASSWORD", "router-suite")


# -- the configurations ---------------------------------------------------------------


@lru_cache(maxsize=None)
def config(name: str, cross_node: bool = False) -> Any:
    """One of the suite's configurations. The router suites test what the co-location proof decides,
    so a SELECT it cannot prove is refused here unless ``cross_node`` (docs/cross-node-queries.md)."""
    files = {"N": "native_orders.yaml", "S": "ss_order_db_2x16.yaml", "R": "router_ranges.yaml"}
    loaded = load_config(CONFIGS / files[name])
    return replace(loaded, runtime=replace(loaded.runtime, cross_node_queries=cross_node))


def router(name: str) -> Router:
    """A fresh router (own plan cache) over one of the suite's configs."""
    return Router(config(name))


# -- independent expectations ------------------------------------------------------------


@dataclass(frozen=True, order=True)
class Node:
    """One physical node: ``order`` sorts like the configuration lists nodes."""

    order: tuple[int, ...]
    ds: str = field(compare=False)
    suffix: str = field(compare=False)  # appended to the logic table name

    def table(self, logic: str) -> str:
        return logic + self.suffix


def n_node(user_id: Any) -> Node:
    """native_orders: SLOTS (1024, 256 per database) then HASH_MOD 4."""
    d = slot_of(user_id, 10) // 256
    t = hash64(user_id) % 4
    return Node((d, t), f"ds_{d}", f"_{d}_{t}")


def s_node(user_id: int) -> Node:
    """ss_order_db_2x16.yaml: ds${user_id % 32 / 16} (integer division), t_order_${user_id % 16}."""
    assert user_id >= 0
    d = (user_id % 32) // 16
    t = user_id % 16
    return Node((d, t), f"ds{d}", f"_{t}")


def r_log_node(user_id: int) -> Node:
    """router_ranges t_log: MOD 4 databases, BOUNDARY_RANGE 1000 tables."""
    d = user_id % 4
    t = 0 if user_id < 1000 else 1
    return Node((d, t), f"ds_{d}", f"_{d}_{t}")


def r_account_node(account_id: int) -> Node:
    """router_ranges t_account: VOLUME_RANGE lower 100, upper 300, volume 100."""
    d = 0 if account_id < 100 else 1 if account_id < 200 else 2 if account_id < 300 else 3
    return Node((d,), f"ds_{d}", "")


def gene_id(seq: int, user_id: Any) -> int:
    """An order id carrying its user's slot in the low 10 bits, as native_orders' GENE ids do
    (explicit ids must carry it: ``WHERE order_id = ?`` finds rows through it)."""
    return (seq << 10) | slot_of(user_id, 10)


def nodes(fn: Callable[[Any], Node], *keys: Any) -> list[Node]:
    """The distinct nodes of ``keys``, in configuration order."""
    return sorted(set(fn(k) for k in keys))


def all_nodes(name: str, logic: str = "") -> list[Node]:
    if name == "N":
        return [Node((d, t), f"ds_{d}", f"_{d}_{t}") for d in range(4) for t in range(4)]
    if name == "S":
        return [Node((d, t), f"ds{d}", f"_{t}") for d in range(2) for t in range(16)]
    if logic == "t_account":
        return [Node((d,), f"ds_{d}", "") for d in range(4)]
    if logic == "t_audit":
        return [Node((d,), f"ds_{d}", "") for d in range(4)]
    return [Node((d, t), f"ds_{d}", f"_{d}_{t}") for d in range(4) for t in range(2)]


SHARDED = {
    "N": ("t_order_item", "t_order"),
    "S": ("t_order_item", "t_order"),
    "R": ("t_log_detail", "t_log", "t_account", "t_audit"),
}


# -- comparing ------------------------------------------------------------------------------


def comment(name: str, ds: str) -> str:
    """The SQL comment prefix of a unit (docs/operations.md#sql-comments): ``/* app=<app>,shard=<ds> */ `` when
    ``sqlComment`` is on (native_orders.yaml: on, app = the config's name), else nothing."""
    runtime = config(name).runtime
    if not runtime.sql_comment:
        return ""
    return f"/* app={runtime.app_name or config(name).name or 'ddm'},shard={ds} */ "


def norm(sql: str) -> str:
    """Collapse whitespace (the only normalisation the suite allows)."""
    return " ".join(sql.split())


_PYFORMAT = re.compile(r"%\([A-Za-z_][A-Za-z0-9_]*\)s")


def physical_sql(text: str, name: str, node: Node | None) -> str:
    """``text`` with the config's sharded logic tables named as on ``node``.

    ``{t_order}`` fields are filled; otherwise bare / backticked identifiers are
    replaced outside quoted strings (an independent, deliberately simple rewrite).
    ``%(name)s`` becomes ``%s`` (units use the ``format`` family).
    """
    text = _PYFORMAT.sub("%s", text)
    logic = SHARDED[name]
    if "{" in text:
        return text.format(**{t: node.table(t) if node else t for t in logic})
    if node is None:
        return text
    alternation = "|".join(logic)
    pattern = re.compile(rf"'(?:[^'\\]|\\.|'')*'|`({alternation})`|\b({alternation})\b")

    def swap(m: re.Match[str]) -> str:
        table = m.group(1) or m.group(2)
        return node.table(table) if table else m.group(0)

    return pattern.sub(swap, text)


@dataclass
class Case:
    """One table-driven statement and what the router must produce for it.

    Attributes:
        config: ``"N"``, ``"S"`` or ``"R"``.
        sql, params: What the caller passes.
        nodes: Expected sharded nodes, in order (``None``: no sharded table).
        sources: Expected data sources when no sharded table decides (broadcast, single...).
        unit_sql: Expected unit SQL (``{t_order}`` fields for physical names), or a function
            of the node giving it; default: ``sql`` with the sharded tables renamed. The
            config's SQL comment prefix is added.
        unit_params: Expected params of every unit; default ``tuple(params)``. A callable
            gets the node (``None`` for unsharded units) and returns them.
        kind, statement, is_write: Checked when given.
        error: ``(exception class, fragments the message must contain)``.
        merge: MergeSpec fields to check (name → value).
        hint: Keyword arguments of ``ddm_core.route.hint`` to route under.
    """

    id: str
    config: str
    sql: str
    params: Any = None
    nodes: Sequence[Node] | None = None
    sources: Sequence[str] | None = None
    unit_sql: str | None = None
    unit_params: Any = None
    kind: RouteKind | None = None
    statement: str | None = None
    is_write: bool | None = None
    error: tuple[type[BaseException], tuple[str, ...]] | None = None
    merge: dict[str, Any] | None = None
    hint: dict[str, Any] | None = None

    def expected_units(self) -> list[tuple[str, str, tuple[Any, ...]]]:
        text = self.unit_sql if self.unit_sql is not None else self.sql
        out = []
        targets: list[tuple[str, Node | None]]
        if self.nodes is not None:
            targets = [(n.ds, n) for n in self.nodes]
        else:
            assert self.sources is not None, f"{self.id}: give nodes or sources"
            targets = [(ds, None) for ds in self.sources]
        for ds, node in targets:
            if callable(self.unit_params):
                params = tuple(self.unit_params(node))
            elif self.unit_params is not None:
                params = tuple(self.unit_params)
            elif self.params is None:
                params = ()
            else:
                assert not isinstance(self.params, dict), f"{self.id}: give unit_params for %(name)s params"
                params = tuple(self.params)
            sql = physical_sql(text(node) if callable(text) else text, self.config, node)
            out.append((ds, norm(comment(self.config, ds) + sql), params))
        return out


def route_case(case: Case, r: Router | None = None) -> Any:
    r = r or router(case.config)
    with hint(**case.hint) if case.hint else nullcontext():
        return r.route(case.sql, case.params)


def check(case: Case, r: Router | None = None) -> Any:
    """Route ``case`` and compare everything it specifies; returns the plan (or the error)."""
    if case.error is not None:
        cls, fragments = case.error
        try:
            route_case(case, r)
        except cls as err:
            message = str(err)
            for fragment in fragments:
                assert fragment in message, f"{case.id}: {fragment!r} not in {message!r}"
            return err
        raise AssertionError(f"{case.id}: expected {cls.__name__}")
    plan = route_case(case, r)
    got = [(u.data_source, norm(u.sql), tuple(u.params)) for u in plan.units]
    assert got == case.expected_units(), case.id
    if case.nodes is not None:
        # The unit's table map names the physical tables too.
        for unit, node in zip(plan.units, case.nodes):
            for logic, physical in unit.tables:
                assert physical == node.table(logic.lower()) or physical == node.table(logic), (case.id, unit.tables)
    if case.kind is not None:
        assert plan.kind is case.kind, (case.id, plan.kind)
    if case.statement is not None:
        assert plan.statement == case.statement, (case.id, plan.statement)
    if case.is_write is not None:
        assert plan.is_write is case.is_write, (case.id, plan.is_write)
    for name, value in (case.merge or {}).items():
        assert getattr(plan.merge, name) == value, (case.id, name, getattr(plan.merge, name), value)
    return plan


def ids(cases: Sequence[Case]) -> list[str]:
    seen: dict[str, int] = {}
    out = []
    for c in cases:
        n = seen.get(c.id, 0)
        seen[c.id] = n + 1
        out.append(c.id if n == 0 else f"{c.id}#{n}")
    return out
