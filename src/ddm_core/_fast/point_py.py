"""The router's hit path for point statements, in one call (pure-Python twin of ``point.pyx``).

A cached SELECT / UPDATE / DELETE whose WHERE binds the shard key by ``=`` to
one value routes to one node. The general path gets there through five
interpreted frames (the plan cache, binding, the compiled statement, the point
route, the single-node plan: ~280 opcodes); here it is one call.

:class:`PointPath` holds, per statement, what those frames read: how the
parameters bind, which parameter (or literal) each strategy level reads, the
level's scalar function (``value → index``), the node lookup table, the
per-node parts (data source, physical SQL, tables, reasons) the general path
fills, and how the unit's parameters are taken. :meth:`PointPath.route` gives
the same :class:`~ddm_core.route.plan.RoutePlan` the general path gives, or
``None`` for anything it does not cover (another container, a string where an
integer column wants a number, a scalar that raises, a node whose parts the
general path has not built yet): the caller then takes the general path, which
routes or refuses as always. It never routes differently: every value goes
through the same scalar functions the general path's point route calls.

A level whose scalar depends only on a remainder is given it: an exact
integer's remainder (``MOD``, a periodic inline expression), or a hash's
(``HASH_MOD``: the scalar's own ``hash64``). Such values are then answered from
a per-remainder table the scalar itself fills, without calling it again.

:class:`PointFront` is what :meth:`Router.route <ddm_core.route.Router.route>`
calls first: the configuration and hint checks, the plan-cache lookup and LRU
touch, then the entry's :class:`PointPath`.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

__all__ = ["PointPath", "PointFront", "MEMO_LIMIT"]

#: Largest period a level memoizes per remainder (the table holds at most this many entries).
MEMO_LIMIT = 1 << 16

#: One level: ``(sources, as_tuple, scalar, period, floor, hasher)``; a source is ``(param index, constant)``,
#: the constant used when the index is negative. ``period`` 0: no remainder table; else the key of
#: a value is ``hasher(value) % period`` (any value ``hasher`` takes), or without a hasher an exact
#: int's remainder, floored (``floor``) or truncated towards zero.
Level = tuple[tuple[tuple[int, Any], ...], bool, Callable[[Any], int], int, bool, "Callable[[Any], int] | None"]

_new_tuple = tuple.__new__


class _Level:
    __slots__ = ("sources", "as_tuple", "scalar", "period", "floor", "hasher", "memo", "index", "constant")

    def __init__(self, spec: Level) -> None:
        sources, self.as_tuple, self.scalar, period, self.floor, self.hasher = spec
        self.sources = tuple((int(i), c) for i, c in sources)
        if not self.sources:
            raise ValueError("a level reads at least one value")
        self.index, self.constant = self.sources[0]
        # 0: no remainder table (no period, or too long a one to keep)
        self.period = period if 0 < period <= MEMO_LIMIT and not self.as_tuple else 0
        self.memo: dict[int, int] = {}

    def pick(self, bound: Sequence[Any]) -> Any:
        if self.as_tuple:
            return self.scalar(tuple([bound[i] if i >= 0 else c for i, c in self.sources]))
        value = bound[self.index] if self.index >= 0 else self.constant
        period = self.period
        if not period:
            return self.scalar(value)
        hasher = self.hasher
        if hasher is not None:
            key = hasher(value) % period
        elif type(value) is int:
            key = value % period if self.floor or value >= 0 else -(-value % period)
        else:
            return self.scalar(value)
        found = self.memo.get(key)
        if found is None:
            found = self.memo[key] = self.scalar(value)
        return found


class PointPath:
    """One cached point statement's route, from its parameters in one call.

    Args:
        names: For ``%(name)s`` placeholders, the parameter keys in placeholder
            order (a mapping is then expected); ``None`` for positional ones.
        count: How many positional parameters the statement takes.
        normalized: Parameter indexes an integer shard column compares with: a
            ``str`` or ``bytes`` there is read as a number by the general path.
        db: The database level (``None``: the one database, index 0).
        tb: Per database index, the table level (``None``: its first table).
        lut: ``lut[database][table]`` → node index.
        nodes: Node index → ``(data source, SQL, tables, reasons)``, filled by the general path.
        params: The unit's parameter indexes, ``None`` when they are all parameters in order.
        unit_type, plan_type: The plan's tuple types (``RouteUnit``, ``RoutePlan``).
        head: The plan fields after ``units`` up to ``tables`` (its kind).
        tail: The plan fields after ``tables``.
    """

    __slots__ = ("names", "count", "normalized", "db", "tb", "lut", "nodes", "params", "unit_type", "plan_type",
                 "head", "tail")

    def __init__(
        self, names: Sequence[Any] | None, count: int, normalized: Sequence[int], db: Level | None,
        tb: Sequence[Level | None], lut: Sequence[Sequence[int]], nodes: dict[int, tuple[Any, Any, Any, Any]],
        params: Sequence[int] | None, unit_type: type, plan_type: type, head: Any, tail: tuple[Any, ...],
    ) -> None:
        self.names = None if names is None else tuple(names)
        self.count = count
        self.normalized = tuple(normalized)
        self.db = None if db is None else _Level(db)
        self.tb = [None if spec is None else _Level(spec) for spec in tb]
        self.lut = [list(row) for row in lut]
        self.nodes = nodes
        self.params = None if params is None else tuple(params)
        if not (isinstance(unit_type, type) and issubclass(unit_type, tuple) and isinstance(plan_type, type)
                and issubclass(plan_type, tuple)):  # fmt: skip
            raise TypeError("a point path makes tuples: its unit and plan types are tuple subclasses")
        self.unit_type = unit_type
        self.plan_type = plan_type
        self.head = head
        self.tail = tuple(tail)
        if len(self.tb) != len(self.lut):
            raise ValueError("one table level per database")
        width = count if names is None else len(self.names or ())
        read = [*self.normalized, *(self.params or ())]
        for level in (self.db, *self.tb):
            read += [i for i, _ in level.sources] if level is not None else []
        if any(i >= width for i in read) or any(i < 0 for i in [*self.normalized, *(self.params or ())]):
            raise ValueError(f"a parameter index is outside the statement's {width} parameters")

    def route(self, params: Any) -> Any:
        """The plan for ``params``, or ``None``: the general path routes this call."""
        names = self.names
        kind = type(params)
        if names is not None:
            if kind is not dict:
                return None
            try:
                bound: Sequence[Any] = [params[k] for k in names]
            except KeyError:
                return None
        elif kind is tuple or kind is list:
            if len(params) != self.count:
                return None
            bound = params
        else:
            return None
        for i in self.normalized:
            kind = type(bound[i])
            if kind is str or kind is bytes:
                return None
        try:
            db = self.db
            ds = 0 if db is None else db.pick(bound)
            tb = self.tb[ds]
            node = self.lut[ds][0 if tb is None else tb.pick(bound)]
        except Exception:  # noqa: BLE001 - the general path decides, and raises the real error
            return None
        parts = self.nodes.get(node)
        if parts is None:
            return None
        order = self.params
        values = tuple(bound) if order is None else tuple([bound[i] for i in order])
        unit: Any = _new_tuple(self.unit_type, (parts[0], parts[1], values, parts[2]))
        return _new_tuple(self.plan_type, ((unit,), self.head, parts[3], *self.tail))


class PointFront:
    """The router's first step for every statement: a cached point statement answered in one call.

    Args:
        cache: The plan cache (a dict by SQL text whose entries carry ``point``:
            a :class:`PointPath` or anything else for none).
        holder: The configuration holder followed, or ``None``.
        config: The version the cache's plans were built from.
        hint: Returns the current hint (``None``: no hint).
        enabled: ``False`` while a migration or cut-over is followed (every call takes the general path).
    """

    __slots__ = ("cache", "holder", "config", "hint", "enabled", "hits")

    def __init__(self, cache: dict[Any, Any], holder: Any, config: Any, hint: Callable[[], Any], enabled: bool) -> None:
        self.cache = cache
        self.holder = holder
        self.config = config
        self.hint = hint
        self.enabled = enabled
        #: Statements this front answered (the plan cache's hits it counted).
        self.hits = 0

    def route(self, sql: Any, params: Any) -> Any:
        """The plan of a cached point statement, or ``None``: the general path routes this call."""
        if params is None or not self.enabled or type(sql) is not str:
            return None
        holder = self.holder
        if holder is not None and holder.config is not self.config:
            return None
        if self.hint() is not None:
            return None
        cache = self.cache
        entry = cache.get(sql)
        if entry is None:
            return None
        path = entry.point
        if type(path) is not PointPath:
            return None
        plan = path.route(params)
        if plan is not None:
            self.hits += 1
            try:
                cache.move_to_end(sql)  # type: ignore[attr-defined]
            except KeyError:  # evicted by another thread meanwhile
                pass
        return plan
