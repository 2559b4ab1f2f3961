"""Routing hints (contextvars) and ``@shard_database`` (docs/architecture.md#hints-live-in-context-variables)."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import pickle
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import FrozenInstanceError, dataclass
from types import SimpleNamespace
from typing import Any

import pytest

from ddm_core.errors import ConfigError, RoutingError, ShardKeyNotFoundError
from ddm_core.hinting import ShardSpec, shard_database
from ddm_core.route.hints import Hint, current_hint, hint


def seen() -> tuple[Any, ...]:
    """(strategy, strategy_value, force_primary) of the active hint, () when none."""
    h = current_hint()
    return () if h is None else (h.strategy, h.strategy_value, h.force_primary)


# -- Hint ------------------------------------------------------------------------------


def test_hint_defaults_and_immutability() -> None:
    h = Hint()
    assert (h.database, h.table, h.database_value, h.table_value) == (None, None, None, None)
    assert (h.strategy, h.strategy_value, h.force_primary, h.has_strategy_value) == (None, None, False, False)
    with pytest.raises(FrozenInstanceError):
        h.database = "ds_0"  # type: ignore[misc]
    assert not hasattr(h, "__dict__")  # slots


def test_merged_hints_equal_normally_built_ones() -> None:
    with hint(database="ds_1", table_value=2) as outer:
        assert outer == Hint(database="ds_1", table_value=2)
        with hint(strategy="s", strategy_value=None, force_primary=True) as inner:
            assert inner == Hint(
                database="ds_1", table_value=2, strategy="s", force_primary=True, has_strategy_value=True
            )
            assert hash(inner) == hash(
                Hint(database="ds_1", table_value=2, strategy="s", force_primary=True, has_strategy_value=True)
            )
            assert repr(inner).startswith("Hint(database='ds_1'")


def test_no_hint_by_default() -> None:
    assert current_hint() is None


# -- hint() context manager ----------------------------------------------------------


def test_hint_sets_and_restores() -> None:
    with hint(database="ds_1", table="t_order_3") as h:
        assert current_hint() is h
        assert (h.database, h.table, h.force_primary) == ("ds_1", "t_order_3", False)
    assert current_hint() is None


def test_nested_hint_overrides_set_fields_and_inherits_the_rest() -> None:
    with hint(database="ds_1", database_value=7, table_value=3) as outer:
        with hint(table="t_order_2", table_value=9, force_primary=True) as inner:
            assert inner.database == "ds_1"  # inherited
            assert inner.database_value == 7  # inherited
            assert inner.table == "t_order_2"
            assert inner.table_value == 9  # overridden
            assert inner.force_primary
            with hint(database="ds_0") as innermost:
                assert innermost.database == "ds_0"
                assert innermost.table == "t_order_2"
                assert innermost.force_primary  # an inner hint cannot switch it off
            assert current_hint() is inner
        assert current_hint() is outer
    assert current_hint() is None


def test_explicit_none_value_replaces_outer_value() -> None:
    with hint(database_value=5):
        with hint(database_value=None) as h:
            assert h.database_value is None
        with hint() as h2:
            assert h2.database_value == 5


def test_strategy_value_none_is_distinguished_from_no_value() -> None:
    with hint(strategy="user_mod") as h:
        assert not h.has_strategy_value
    with hint(strategy="user_mod", strategy_value=None) as h:
        assert h.has_strategy_value and h.strategy_value is None
    with hint(strategy="user_mod", strategy_value=0) as h:
        with hint(database="ds_1") as inner:
            assert inner.has_strategy_value and inner.strategy_value == 0 and inner.strategy == "user_mod"


def test_hint_reset_after_exception() -> None:
    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        with hint(database="ds_0"):
            with hint(table="t_1"):
                raise Boom
    assert current_hint() is None

    with hint(database="ds_0") as outer:
        with pytest.raises(Boom):
            with hint(database="ds_9"):
                raise Boom
        assert current_hint() is outer


def test_hint_rejects_non_string_names() -> None:
    with pytest.raises(ConfigError, match="database"):
        with hint(database=1):  # type: ignore[arg-type]
            pass
    assert current_hint() is None


def test_hint_keyword_only() -> None:
    with pytest.raises(TypeError):
        hint("ds_0")  # type: ignore[call-arg]


# -- threads ----------------------------------------------------------------------------


def test_threads_do_not_see_each_others_hints() -> None:
    barrier = threading.Barrier(4)

    def job(i: int) -> tuple[Any, Any]:
        before = current_hint()
        with hint(database=f"ds_{i}"):
            barrier.wait(timeout=5)  # all four hints are active at once
            mine = current_hint()
            barrier.wait(timeout=5)
            assert mine is not None
            return before, mine.database

    with hint(database="main_thread"):
        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(job, range(4)))
        assert current_hint() is not None and current_hint().database == "main_thread"  # type: ignore[union-attr]
    assert results == [(None, f"ds_{i}") for i in range(4)]


def test_reused_worker_thread_does_not_inherit_previous_task_hint() -> None:
    """The thread-pool hint leak: one pooled thread, request 1 fails mid-hint, request 2 is clean."""

    @shard_database(key="user_id", strategy="user_mod")
    def request_that_fails(user_id: int) -> None:
        with hint(database="ds_3"):
            raise RuntimeError("handler crashed")

    @shard_database(key="user_id", strategy="user_mod")
    def request_ok(user_id: int) -> tuple[Any, ...]:
        return seen()

    with ThreadPoolExecutor(max_workers=1) as pool:
        thread_ids = []

        def first() -> None:
            thread_ids.append(threading.get_ident())
            request_that_fails(1)

        def second() -> tuple[Any, Any]:
            thread_ids.append(threading.get_ident())
            return current_hint(), request_ok(2)

        with pytest.raises(RuntimeError):
            pool.submit(first).result()
        before, inside = pool.submit(second).result()
        after = pool.submit(current_hint).result()
    assert thread_ids[0] == thread_ids[1]  # same worker thread, reused
    assert before is None and after is None
    assert inside == ("user_mod", 2, False)


def test_copied_context_carries_hint_explicitly() -> None:
    with hint(database="ds_2"):
        ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1) as pool:
        got = pool.submit(ctx.run, current_hint).result()
        plain = pool.submit(current_hint).result()
    assert got is not None and got.database == "ds_2"
    assert plain is None


# -- asyncio ----------------------------------------------------------------------------


def test_asyncio_tasks_are_isolated() -> None:
    async def task(i: int) -> tuple[str | None, str | None, str | None]:
        inherited = current_hint()
        with hint(table=f"t_{i}"):
            await asyncio.sleep(0.001 * (3 - i))  # interleave
            await asyncio.sleep(0)
            h = current_hint()
            assert h is not None
            return (inherited.database if inherited else None), h.database, h.table

    async def main() -> list[tuple[str | None, str | None, str | None]]:
        with hint(database="ds_parent"):
            results = await asyncio.gather(*(task(i) for i in range(3)))
            h = current_hint()
            assert h is not None and h.table is None  # no task leaked its table back
            return list(results)

    results = asyncio.run(main())
    assert results == [("ds_parent", "ds_parent", f"t_{i}") for i in range(3)]
    assert current_hint() is None


def test_async_decorated_functions_gathered_with_different_keys() -> None:
    @shard_database(key="user_id", strategy="user_mod")
    async def load(user_id: int) -> tuple[Any, ...]:
        await asyncio.sleep(0.001 * (user_id % 3))
        before = seen()
        await asyncio.sleep(0)
        assert seen() == before
        return before

    async def main() -> list[tuple[Any, ...]]:
        results = await asyncio.gather(*(load(u) for u in range(6)))
        assert current_hint() is None
        return list(results)

    assert asyncio.run(main()) == [("user_mod", u, False) for u in range(6)]


def test_async_function_stays_coroutine_function_and_resets() -> None:
    @shard_database(key="order.user_id", strategy="user_mod", force_primary=True)
    async def save(order: dict[str, int]) -> tuple[Any, ...]:
        await asyncio.sleep(0)
        return seen()

    assert inspect.iscoroutinefunction(save)
    assert save.__name__ == "save"

    async def main() -> tuple[Any, ...]:
        got = await save({"user_id": 42})
        assert current_hint() is None
        with pytest.raises(ShardKeyNotFoundError):
            await save({})
        assert current_hint() is None
        return got

    assert asyncio.run(main()) == ("user_mod", 42, True)


def test_async_exception_resets() -> None:
    @shard_database(key="x", strategy="s")
    async def fail(x: int) -> None:
        await asyncio.sleep(0)
        raise ValueError(x)

    async def main() -> None:
        with pytest.raises(ValueError):
            await fail(1)
        assert current_hint() is None

    asyncio.run(main())


# -- @shard_database: key resolution -----------------------------------------------------


@dataclass
class User:
    id: int | None
    tenant: str = "acme"


@dataclass
class Order:
    user: User
    store_id: int | None = None
    meta: dict[str, Any] | None = None


def test_key_from_positional_and_keyword_args() -> None:
    @shard_database(key="user_id", strategy="user_mod")
    def f(a: int, user_id: int, z: int = 0) -> tuple[Any, ...]:
        return seen()

    assert f(0, 11) == ("user_mod", 11, False)
    assert f(0, user_id=12) == ("user_mod", 12, False)
    assert f(a=0, user_id=13, z=1) == ("user_mod", 13, False)
    assert current_hint() is None


def test_key_from_default_value() -> None:
    @shard_database(key="region", strategy="region_range")
    def f(x: int, region: int = 3) -> tuple[Any, ...]:
        return seen()

    assert f(1) == ("region_range", 3, False)
    assert f(1, 4) == ("region_range", 4, False)


def test_key_positional_only_and_keyword_only() -> None:
    @shard_database(key="a", strategy="s")
    def pos_only(a: int, /, b: int) -> Any:
        return seen()[1]

    @shard_database(key="b.id", strategy="s")
    def kw_only(a: int, *rest: int, b: User) -> Any:
        return seen()[1]

    assert pos_only(5, 6) == 5
    assert kw_only(1, 2, 3, b=User(8)) == 8


def test_key_via_var_keyword() -> None:
    @shard_database(key="user_id", strategy="s")
    def f(**kwargs: Any) -> Any:
        return seen()[1]

    assert f(user_id=3) == 3
    with pytest.raises(ShardKeyNotFoundError, match="user_id"):
        f(other=1)


def test_nested_attribute_and_dict_paths() -> None:
    @shard_database(key="order.user.id", strategy="user_mod")
    def by_attr(order: Order) -> Any:
        return seen()[1]

    @shard_database(key="order.meta.shard.id", strategy="s")
    def by_dict(order: Order) -> Any:
        return seen()[1]

    @shard_database(key="req.order.user.id", strategy="s")
    def mixed(req: dict[str, Any]) -> Any:
        return seen()[1]

    @shard_database(key="req.items.1.id", strategy="s")
    def by_index(req: SimpleNamespace) -> Any:
        return seen()[1]

    assert by_attr(Order(User(1001))) == 1001
    assert by_dict(Order(User(1), meta={"shard": {"id": "x7"}})) == "x7"
    assert mixed({"order": Order(User(77))}) == 77
    assert by_index(SimpleNamespace(items=[User(1), User(2)])) == 2


def test_falsy_but_present_values_are_keys() -> None:
    @shard_database(key="order.user.id", strategy="user_mod")
    def f(order: Order) -> Any:
        return seen()

    assert f(Order(User(0))) == ("user_mod", 0, False)
    h: list[Hint | None] = []

    @shard_database(key="v", strategy="s")
    def g(v: Any) -> None:
        h.append(current_hint())

    g("")
    assert h[0] is not None and h[0].strategy_value == "" and h[0].has_strategy_value


def test_self_attribute_key() -> None:
    class Repo:
        def __init__(self, tenant: int) -> None:
            self.tenant = tenant

        @shard_database(key="self.tenant", strategy="tenant_mod")
        def find(self, order_id: int) -> tuple[Any, ...]:
            return seen()

    assert Repo(4).find(1) == ("tenant_mod", 4, False)
    assert Repo(5).find(order_id=1) == ("tenant_mod", 5, False)


def test_missing_segment_raises_naming_path_function_and_segment() -> None:
    @shard_database(key="order.user.id", strategy="user_mod")
    def place_order(order: Any) -> None:
        raise AssertionError("body must not run without a shard key")

    with pytest.raises(ShardKeyNotFoundError) as info:
        place_order(SimpleNamespace(user=SimpleNamespace(name="x")))
    err = info.value
    assert "order.user.id" in str(err)
    assert "place_order" in str(err)
    assert err.key == "order.user.id"  # type: ignore[attr-defined]
    assert err.segment == "id"  # type: ignore[attr-defined]
    assert "place_order" in err.function  # type: ignore[attr-defined]
    assert isinstance(err, RoutingError) and isinstance(err, LookupError)
    assert current_hint() is None

    with pytest.raises(ShardKeyNotFoundError) as info:
        place_order({"usr": 1})
    assert info.value.segment == "user"  # type: ignore[attr-defined]


def test_none_values_raise_never_default_route() -> None:
    calls = []

    @shard_database(key="order.user.id", strategy="user_mod")
    def place_order(order: Any) -> None:
        calls.append(1)

    no_user: Any = Order(User(1))
    no_user.user = None
    for bad, segment in [(None, "order"), (no_user, "user"), (Order(User(None)), "id")]:
        with pytest.raises(ShardKeyNotFoundError, match="is None") as info:
            place_order(bad)
        assert info.value.segment == segment  # type: ignore[attr-defined]
        assert "place_order" in str(info.value) and "order.user.id" in str(info.value)
    assert calls == []
    assert current_hint() is None


def test_missing_required_argument_is_the_callers_type_error() -> None:
    @shard_database(key="user_id", strategy="s")
    def f(user_id: int) -> None:
        pass

    with pytest.raises(TypeError, match="user_id"):
        f()  # type: ignore[call-arg]


def test_index_out_of_range_and_str_not_indexed() -> None:
    @shard_database(key="r.items.3", strategy="s")
    def f(r: Any) -> None:
        pass

    with pytest.raises(ShardKeyNotFoundError, match="index 3"):
        f(SimpleNamespace(items=[1]))
    with pytest.raises(ShardKeyNotFoundError):
        f(SimpleNamespace(items="abcd"))


def test_error_pickles_with_context() -> None:
    @shard_database(key="a.b", strategy="s")
    def f(a: Any) -> None:
        pass

    with pytest.raises(ShardKeyNotFoundError) as info:
        f({})
    again = pickle.loads(pickle.dumps(info.value))
    assert again.key == "a.b" and again.segment == "b"


# -- @shard_database: the hint it sets -------------------------------------------------


def test_decorator_nests_in_active_hint_and_resets() -> None:
    @shard_database(key="uid", strategy="user_mod", force_primary=True)
    def f(uid: int) -> Hint | None:
        return current_hint()

    with hint(database_value=3, table="t_9") as outer:
        h = f(10)
        assert current_hint() is outer
    assert h is not None
    assert (h.strategy, h.strategy_value, h.has_strategy_value, h.force_primary) == ("user_mod", 10, True, True)
    assert (h.database_value, h.table) == (3, "t_9")  # inherited from the enclosing hint
    assert current_hint() is None


def test_nested_decorated_calls_inner_overrides() -> None:
    @shard_database(key="store_id", strategy="store_mod")
    def deduct_stock(store_id: int) -> tuple[Any, ...]:
        return seen()

    @shard_database(key="req.user_id", strategy="user_mod", force_primary=True)
    def place(req: dict[str, int]) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...]]:
        return seen(), deduct_stock(req["store_id"]), seen()

    outer, inner, after = place({"user_id": 1, "store_id": 2})
    assert outer == after == ("user_mod", 1, True)
    assert inner == ("store_mod", 2, True)


def test_resolution_happens_before_body() -> None:
    body_ran = []

    @shard_database(key="o.id", strategy="s")
    def f(o: Any) -> None:
        body_ran.append(True)

    with pytest.raises(ShardKeyNotFoundError):
        f(object())
    assert body_ran == []


def test_sync_exception_resets() -> None:
    @shard_database(key="x", strategy="s")
    def f(x: int) -> None:
        raise KeyError(x)

    with pytest.raises(KeyError):
        f(1)
    assert current_hint() is None


def test_wraps_metadata() -> None:
    def original(user_id: int) -> int:
        """Doc."""
        return user_id

    wrapped = shard_database(key="user_id", strategy="s")(original)
    assert wrapped.__name__ == "original" and wrapped.__doc__ == "Doc."
    assert wrapped.__wrapped__ is original  # type: ignore[attr-defined]
    assert wrapped.__shard_database__ == ShardSpec("user_id", "s", False)  # type: ignore[attr-defined]
    assert inspect.signature(wrapped) == inspect.signature(original)


def test_generator_sets_hint_only_while_body_runs() -> None:
    @shard_database(key="uid", strategy="user_mod")
    def rows(uid: int) -> Any:
        for i in range(3):
            received = yield (i, seen())
            assert received in (None, "x")
        return "done"

    assert inspect.isgeneratorfunction(rows)
    gen = rows(9)
    assert current_hint() is None
    assert next(gen) == (0, ("user_mod", 9, False))
    assert current_hint() is None  # not leaked to the consumer between steps
    assert gen.send("x") == (1, ("user_mod", 9, False))
    assert current_hint() is None
    assert list(gen) == [(2, ("user_mod", 9, False))]


def test_generator_throw_and_close_run_inside_hint() -> None:
    log: list[Any] = []

    @shard_database(key="uid", strategy="s")
    def rows(uid: int) -> Any:
        try:
            while True:
                try:
                    yield 1
                except ValueError:
                    log.append(("caught", seen()))
        finally:
            log.append(("finally", seen()))

    gen = rows(3)
    next(gen)
    assert gen.throw(ValueError()) == 1
    gen.close()
    assert log == [("caught", ("s", 3, False)), ("finally", ("s", 3, False))]
    assert current_hint() is None


def test_async_generator() -> None:
    @shard_database(key="uid", strategy="user_mod")
    async def rows(uid: int) -> Any:
        for i in range(2):
            await asyncio.sleep(0)
            yield i, seen()

    assert inspect.isasyncgenfunction(rows)

    async def main() -> list[Any]:
        out = []
        async for item in rows(5):
            assert current_hint() is None
            out.append(item)
        return out

    assert asyncio.run(main()) == [(0, ("user_mod", 5, False)), (1, ("user_mod", 5, False))]


# -- @shard_database: decoration-time checks --------------------------------------------


def test_no_key_without_class_default_is_config_error() -> None:
    def lonely(x: int) -> None:
        pass

    with pytest.raises(ConfigError, match="lonely"):
        shard_database(strategy="s")(lonely)
    with pytest.raises(ConfigError, match="strategy"):
        shard_database(key="x")(lonely)


def test_strategy_must_be_an_id_not_a_class() -> None:
    class UserIdModStrategy:
        pass

    with pytest.raises(ConfigError, match="never a class"):
        shard_database(key="x", strategy=UserIdModStrategy)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="parentheses"):
        shard_database(lambda x: x)  # type: ignore[arg-type]


def test_key_must_start_with_a_parameter() -> None:
    def f(order: Any) -> None:
        pass

    with pytest.raises(ConfigError, match="not a named parameter") as info:
        shard_database(key="user.id", strategy="s")(f)
    assert "order" in str(info.value)
    with pytest.raises(ConfigError, match="empty path segment"):
        shard_database(key="order..id", strategy="s")(f)


# -- @shard_database on a class -----------------------------------------------------------


def test_class_default_inherited_and_overridden() -> None:
    @shard_database(key="request.user_id", strategy="user_id_mod_16")
    class OrderController:
        def create(self, request: dict[str, int]) -> tuple[Any, ...]:
            return seen()

        @shard_database(key="request.store_id", strategy="store_mod")
        def deduct(self, request: dict[str, int]) -> tuple[Any, ...]:
            return seen()

        @shard_database(strategy="user_range")
        def only_strategy(self, request: dict[str, int]) -> tuple[Any, ...]:
            return seen()

        @shard_database(key="request.store_id")
        def only_key(self, request: dict[str, int]) -> tuple[Any, ...]:
            return seen()

        @shard_database(key="request.user_id", force_primary=True)
        def primary(self, request: dict[str, int]) -> tuple[Any, ...]:
            return seen()

        def _helper(self) -> tuple[Any, ...]:
            return seen()

        def __repr__(self) -> str:
            return f"<ctl {seen()}>"

    c = OrderController()
    req = {"user_id": 7, "store_id": 3}
    assert c.create(req) == ("user_id_mod_16", 7, False)
    assert c.deduct(req) == ("store_mod", 3, False)
    assert c.only_strategy(req) == ("user_range", 7, False)
    assert c.only_key(req) == ("user_id_mod_16", 3, False)
    assert c.primary(req) == ("user_id_mod_16", 7, True)
    assert c._helper() == ()  # private: untouched
    assert repr(c) == "<ctl ()>"  # dunder: untouched
    assert OrderController.__shard_database__ == ShardSpec("request.user_id", "user_id_mod_16", False)  # type: ignore[attr-defined]
    with pytest.raises(ShardKeyNotFoundError, match="OrderController.create"):
        c.create({})
    assert current_hint() is None


def test_class_force_primary_applies_to_methods() -> None:
    @shard_database(key="self.tenant", strategy="tenant_mod", force_primary=True)
    class Repo:
        tenant = 2

        def get(self) -> tuple[Any, ...]:
            return seen()

    assert Repo().get() == ("tenant_mod", 2, True)


def test_staticmethod_classmethod_property_survive() -> None:
    @shard_database(key="user_id", strategy="user_mod")
    class Service:
        region = 4

        @staticmethod
        def static(user_id: int) -> tuple[Any, ...]:
            return seen()

        @classmethod
        def klass(cls, user_id: int) -> tuple[Any, ...]:
            return (cls.__name__, *seen())

        @classmethod
        @shard_database(key="cls.region", strategy="region_mod")
        def own_classmethod(cls) -> tuple[Any, ...]:
            return seen()

        @shard_database(strategy="other")
        @staticmethod
        def static_partial(user_id: int) -> tuple[Any, ...]:
            return seen()

        @property
        def prop(self) -> tuple[Any, ...]:
            return seen()

        def method(self, user_id: int) -> tuple[Any, ...]:
            return seen()

        LIMIT = 10

    s = Service()
    assert isinstance(Service.__dict__["static"], staticmethod)
    assert isinstance(Service.__dict__["klass"], classmethod)
    assert isinstance(Service.__dict__["prop"], property)
    assert Service.static(1) == s.static(1) == ("user_mod", 1, False)
    assert Service.klass(2) == s.klass(2) == ("Service", "user_mod", 2, False)
    assert Service.own_classmethod() == ("region_mod", 4, False)
    assert Service.static_partial(3) == ("other", 3, False)
    assert s.prop == ()
    assert s.method(user_id=5) == ("user_mod", 5, False)
    assert Service.LIMIT == 10


def test_class_with_async_methods() -> None:
    @shard_database(key="uid", strategy="user_mod")
    class AsyncRepo:
        async def get(self, uid: int) -> tuple[Any, ...]:
            await asyncio.sleep(0)
            return seen()

    assert inspect.iscoroutinefunction(AsyncRepo.get)
    assert asyncio.run(AsyncRepo().get(6)) == ("user_mod", 6, False)


def test_class_default_key_missing_parameter_is_config_error() -> None:
    with pytest.raises(ConfigError, match="Broken.describe"):

        @shard_database(key="request.user_id", strategy="s")
        class Broken:
            def handle(self, request: Any) -> None:
                pass

            def describe(self) -> str:
                return "no request parameter"


def test_class_needs_key_or_strategy() -> None:
    with pytest.raises(ConfigError, match="Empty"):

        @shard_database()
        class Empty:
            pass


def test_class_default_without_strategy_method_must_give_it() -> None:
    @shard_database(key="uid")
    class Partial:
        @shard_database(strategy="s1")
        def a(self, uid: int) -> tuple[Any, ...]:
            return seen()

    assert Partial().a(1) == ("s1", 1, False)

    with pytest.raises(ConfigError, match="strategy"):

        @shard_database(key="uid")
        class Missing:
            def b(self, uid: int) -> None:
                pass


def test_partial_method_in_undecorated_class_fails_loudly_on_call() -> None:
    class Plain:
        @shard_database(strategy="s")
        def m(self, uid: int) -> None:
            raise AssertionError("must not run unrouted")

    with pytest.raises(ConfigError, match="Plain.m"):
        Plain().m(1)


def test_foreign_decorator_on_top_of_partial_method_is_rejected() -> None:
    def logged(func: Any) -> Any:
        @functools.wraps(func)
        def inner(*a: Any, **k: Any) -> Any:
            return func(*a, **k)

        return inner

    with pytest.raises(ConfigError, match="outermost"):

        @shard_database(key="uid", strategy="s")
        class C:
            @logged
            @shard_database(force_primary=True)
            def m(self, uid: int) -> None:
                pass

    @shard_database(key="uid", strategy="s")
    class D:
        @logged
        @shard_database(key="uid", strategy="own")
        def m(self, uid: int) -> tuple[Any, ...]:
            return seen()

        @logged
        def n(self, uid: int) -> tuple[Any, ...]:
            return seen()

    assert D().m(1) == ("own", 1, False)  # complete inner decorator kept, outer decorator kept
    assert D().n(2) == ("s", 2, False)


# -- cost --------------------------------------------------------------------------------


def test_current_hint_is_cheap() -> None:
    """Sanity bound only (the real number is in the report / benchmarks): < 1 µs per call."""
    n = 200_000
    with hint(database="ds_0"):
        start = time.perf_counter()
        for _ in range(n):
            current_hint()
        elapsed = time.perf_counter() - start
    assert elapsed / n < 1e-6
