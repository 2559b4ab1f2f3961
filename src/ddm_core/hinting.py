"""``@shard_database``: route a function's statements by a shard key taken from its arguments.

It works like the ``@ShardDatabase(key, strategy, forceMaster)`` annotations of
Java sharding SDKs::

    @shard_database(key="order.user.id", strategy="user_id_mod_16")
    def place(order): ...                           # hint set for the call

``key`` is a dotted path whose first segment is a parameter name and whose
further segments are attributes or mapping keys; ``strategy`` is the *id* of a
configured sharding algorithm (a string, never a class:
docs/architecture.md#strategy-ids-not-classes); the value is resolved before the
function body runs, and a missing value or ``None`` raises
:class:`~ddm_core.errors.ShardKeyNotFoundError` instead of falling back to a
default database. On a class it sets a default that every public method
inherits.

Each call runs inside a :class:`~ddm_core.route.hints.Hint` nested in the
active one (:func:`~ddm_core.route.hints.merged`), set and reset on the context
variable the router reads (:data:`~ddm_core.route.hints.HINT_VAR`). This is the
access layer: the router knows hints, not decorators.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeVar, cast

from ddm_core.errors import ConfigError, ShardKeyNotFoundError
from ddm_core.route.hints import HINT_VAR, UNSET, Hint, merged

__all__ = ["ShardSpec", "shard_database"]

_T = TypeVar("_T")
_get = HINT_VAR.get
_set = HINT_VAR.set
_reset = HINT_VAR.reset


@dataclass(frozen=True, slots=True)
class ShardSpec:
    """What one ``@shard_database`` declares (available as ``func.__shard_database__``).

    Attributes:
        key: Dotted key path (``"order.user.id"``); ``""`` when inherited.
        strategy: Strategy id; ``""`` when inherited.
        force_primary: Reads of the call go to the primary.
    """

    key: str = ""
    strategy: str = ""
    force_primary: bool = False

    def filled_from(self, default: ShardSpec) -> ShardSpec:
        """This spec with its empty parts taken from a class-level ``default``."""
        return ShardSpec(
            key=self.key or default.key,
            strategy=self.strategy or default.strategy,
            force_primary=self.force_primary or default.force_primary,
        )


_SPEC_ATTR: Final = "__shard_database__"
_ORIGINAL_ATTR: Final = "__shard_database_original__"


def _describe(func: Callable[..., Any]) -> str:
    module = getattr(func, "__module__", None) or "?"
    return f"{module}.{getattr(func, '__qualname__', repr(func))}"


def _in_class_body(func: Callable[..., Any]) -> bool:
    """Whether ``func`` was defined directly in a class body (``C.m``, ``f.<locals>.C.m``)."""
    parts = getattr(func, "__qualname__", "").split(".")
    return len(parts) >= 2 and parts[-2] != "<locals>"


def _check_text(name: str, value: object) -> str:
    if isinstance(value, str):
        return value.strip()
    if isinstance(value, type) or callable(value):
        hint_text = (
            "use @shard_database(key=..., strategy=...) with parentheses"
            if name == "key"
            else "pass the id of a configured sharding algorithm, never a class"
        )
        raise ConfigError(f"@shard_database({name}=...) takes a string; {hint_text}", field=name, value=value)
    raise ConfigError(
        f"@shard_database({name}=...) takes a string, got {type(value).__name__} {value!r}",
        field=name,
        value=value,
    )


def _split_key(key: str, where: str) -> tuple[str, ...]:
    segments = tuple(part.strip() for part in key.split("."))
    if not all(segments):
        raise ConfigError(
            f"@shard_database on {where}: key {key!r} has an empty path segment", function=where, key=key
        )
    return segments


# Resolution of the first segment, compiled at decoration time into one of these kinds.
_POS_OR_KW: Final = 0  # args[index] or kwargs[name] or default
_POS_ONLY: Final = 1  # args[index] or default
_KW_ONLY: Final = 2  # kwargs[name] or default
_EXTRA_KW: Final = 3  # not a parameter, but **kwargs may carry it


class _Resolver:
    """Pulls the value at a dotted key path out of one call's arguments."""

    __slots__ = ("_default", "_fn", "_index", "_kind", "_name", "_rest", "_sig", "key", "where")

    def __init__(self, func: Callable[..., Any], key: str, where: str) -> None:
        segments = _split_key(key, where)
        self.key = key
        self.where = where
        self._fn = func
        self._name = segments[0]
        self._rest = segments[1:]
        try:
            sig = inspect.signature(func)
        except (TypeError, ValueError) as exc:
            raise ConfigError(
                f"@shard_database on {where}: cannot read the signature to resolve key {key!r}",
                function=where,
                key=key,
            ) from exc
        self._sig = sig
        params = list(sig.parameters.values())
        param = sig.parameters.get(self._name)
        if param is None or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            if param is None and any(p.kind is p.VAR_KEYWORD for p in params):
                self._kind, self._index, self._default = _EXTRA_KW, -1, inspect.Parameter.empty
                return
            names = ", ".join(p.name for p in params) or "none"
            raise ConfigError(
                f"@shard_database on {where}: key {key!r} starts with {self._name!r}, which is not a "
                f"named parameter (parameters: {names}); the first segment of a key is a parameter "
                "name, e.g. 'order.user.id' or 'self.tenant_id'",
                function=where,
                key=key,
                segment=self._name,
            )
        self._default = param.default
        if param.kind is param.KEYWORD_ONLY:
            self._kind, self._index = _KW_ONLY, -1
        else:
            self._kind = _POS_ONLY if param.kind is param.POSITIONAL_ONLY else _POS_OR_KW
            self._index = params.index(param)

    def _missing(self, segment: str, why: str) -> ShardKeyNotFoundError:
        return ShardKeyNotFoundError(
            f"shard key {self.key!r} of {self.where}() not found: {why}; refusing to route "
            "without it (no default database)",
            key=self.key,
            function=self.where,
            segment=segment,
        )

    def _first(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        kind, name = self._kind, self._name
        if kind == _POS_OR_KW:
            if len(args) > self._index:
                return args[self._index]
            if name in kwargs:
                return kwargs[name]
        elif kind == _POS_ONLY:
            if len(args) > self._index:
                return args[self._index]
        elif kind == _KW_ONLY:
            if name in kwargs:
                return kwargs[name]
        else:  # _EXTRA_KW
            if name in kwargs:
                return kwargs[name]
            self._sig.bind(*args, **kwargs)  # a TypeError for a malformed call comes first
            raise self._missing(name, f"no argument {name!r} was passed")
        if self._default is not inspect.Parameter.empty:
            return self._default
        # A required argument is missing: raise the TypeError the call itself would raise.
        self._sig.bind(*args, **kwargs)
        raise self._missing(name, f"argument {name!r} was not passed")  # pragma: no cover

    def __call__(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        value = self._first(args, kwargs)
        if value is None:
            raise self._missing(self._name, f"argument {self._name!r} is None")
        path = self._name
        for segment in self._rest:
            value = self._step(value, segment, path)
            path = f"{path}.{segment}"
            if value is None:
                raise self._missing(segment, f"{path!r} is None")
        return value

    def _step(self, obj: Any, segment: str, path: str) -> Any:
        if isinstance(obj, Mapping):
            try:
                return obj[segment]
            except KeyError:
                raise self._missing(segment, f"{path!r} has no key {segment!r}") from None
        try:
            return getattr(obj, segment)
        except AttributeError as exc:
            if segment.isdigit() and isinstance(obj, Sequence) and not isinstance(obj, str):
                try:
                    return obj[int(segment)]
                except IndexError:
                    raise self._missing(segment, f"{path!r} has no index {segment}") from None
            raise self._missing(
                segment, f"{path!r} ({type(obj).__name__}) has no attribute or key {segment!r}"
            ) from exc


_MakeHint = Callable[[tuple[Any, ...], dict[str, Any]], Hint]


def _build_wrapper(func: Callable[..., Any], spec: ShardSpec, where: str) -> Callable[..., Any]:
    """Wrap ``func`` so each call runs inside the hint ``spec`` resolves to."""
    make_hint = _hint_maker(func, spec, where)
    if inspect.iscoroutinefunction(func):
        wrapper = _coroutine_wrapper(func, make_hint)
    elif inspect.isasyncgenfunction(func):
        wrapper = _async_generator_wrapper(func, make_hint)
    elif inspect.isgeneratorfunction(func):
        wrapper = _generator_wrapper(func, make_hint)
    else:
        wrapper = _plain_wrapper(func, make_hint)
    return _mark(wrapper, func, spec)


def _hint_maker(func: Callable[..., Any], spec: ShardSpec, where: str) -> _MakeHint:
    """One call's arguments → the hint its body runs in (the active hint, plus the resolved key)."""
    resolver = _Resolver(func, spec.key, where)
    strategy = spec.strategy
    force_primary = spec.force_primary

    def make_hint(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Hint:
        value = resolver(args, kwargs)
        return merged(_get(), None, None, UNSET, UNSET, strategy, value, force_primary)

    return make_hint


def _plain_wrapper(func: Callable[..., Any], make_hint: _MakeHint) -> Callable[..., Any]:
    """The hint is set for the call."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _set(make_hint(args, kwargs))
        try:
            return func(*args, **kwargs)
        finally:
            _reset(token)

    return wrapper


def _coroutine_wrapper(func: Callable[..., Any], make_hint: _MakeHint) -> Callable[..., Any]:
    """The hint is set while the coroutine runs (its task's context)."""

    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = _set(make_hint(args, kwargs))
        try:
            return await func(*args, **kwargs)
        finally:
            _reset(token)

    return wrapper


def _generator_wrapper(func: Callable[..., Any], make_hint: _MakeHint) -> Callable[..., Any]:
    """The hint is set only while the generator's own body runs, step by step.

    The caller's code between two ``next()`` calls runs without it; values
    sent and exceptions thrown in are passed through, and closing closes the
    wrapped generator inside the hint.
    """

    def wrapper(*args: Any, **kwargs: Any) -> Generator[Any, Any, Any]:
        current = make_hint(args, kwargs)
        gen = func(*args, **kwargs)
        sent: Any = None
        error: BaseException | None = None
        while True:
            token = _set(current)
            try:
                item = gen.send(sent) if error is None else gen.throw(error)
            except StopIteration as stop:
                return stop.value
            finally:
                _reset(token)
                error = None
            try:
                sent = yield item
            except GeneratorExit:
                token = _set(current)
                try:
                    gen.close()
                finally:
                    _reset(token)
                raise
            except BaseException as exc:  # delivered into the wrapped generator
                error, sent = exc, None

    return wrapper


def _async_generator_wrapper(func: Callable[..., Any], make_hint: _MakeHint) -> Callable[..., Any]:
    """:func:`_generator_wrapper` for async generators."""

    async def wrapper(*args: Any, **kwargs: Any) -> AsyncGenerator[Any, Any]:
        current = make_hint(args, kwargs)
        agen = func(*args, **kwargs)
        sent: Any = None
        error: BaseException | None = None
        while True:
            token = _set(current)
            try:
                item = await (agen.asend(sent) if error is None else agen.athrow(error))
            except StopAsyncIteration:
                return
            finally:
                _reset(token)
                error = None
            try:
                sent = yield item
            except GeneratorExit:
                token = _set(current)
                try:
                    await agen.aclose()
                finally:
                    _reset(token)
                raise
            except BaseException as exc:  # delivered into the wrapped generator
                error, sent = exc, None

    return wrapper


def _mark(wrapper: Callable[..., Any], func: Callable[..., Any], spec: ShardSpec) -> Callable[..., Any]:
    """Give ``wrapper`` ``func``'s name and docs, and remember the spec and the original.

    The class decorator reads both back to rebuild a method's wrapper with the
    class's defaults filled in.
    """
    functools.update_wrapper(wrapper, func)
    setattr(wrapper, _SPEC_ATTR, spec)
    setattr(wrapper, _ORIGINAL_ATTR, func)
    return wrapper


def _deferred_wrapper(func: Callable[..., Any], spec: ShardSpec, where: str) -> Callable[..., Any]:
    """A method whose key or strategy must come from its class's ``@shard_database``.

    The class decorator replaces it; if the class is never decorated, every call
    fails loudly rather than running unrouted.
    """
    missing = "key" if not spec.key else "strategy"

    def fail() -> ConfigError:
        return ConfigError(
            f"@shard_database on {where} gives no {missing} and its class has no "
            f"@shard_database default to take it from; give the {missing} or decorate the class",
            function=where,
            field=missing,
        )

    wrapper: Callable[..., Any]
    if inspect.iscoroutinefunction(func):

        async def wrapper(*args: Any, **kwargs: Any) -> Any:
            raise fail()

    else:

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            raise fail()

    return _mark(wrapper, func, spec)


def _complete(spec: ShardSpec, where: str, *, class_default: bool) -> None:
    """Raise ConfigError unless ``spec`` names both a key and a strategy."""
    for field in ("key", "strategy"):
        if not getattr(spec, field):
            source = "neither the method nor its class" if class_default else "it"
            raise ConfigError(
                f"@shard_database on {where}: {source} gives a {field}"
                + (" (a shard key path such as 'order.user.id')" if field == "key" else "")
                + (" (the id of a configured sharding algorithm)" if field == "strategy" else ""),
                function=where,
                field=field,
            )


def _decorate_function(func: Callable[..., Any], spec: ShardSpec) -> Callable[..., Any]:
    where = _describe(func)
    if (not spec.key or not spec.strategy) and _in_class_body(func):
        return _deferred_wrapper(func, spec, where)
    _complete(spec, where, class_default=False)
    return _build_wrapper(func, spec, where)


def _decorate_class(cls: type[_T], default: ShardSpec) -> type[_T]:
    where = _describe(cls)
    if not default.key and not default.strategy:
        raise ConfigError(
            f"@shard_database on class {where} gives neither a key nor a strategy", function=where
        )
    for name, member in list(vars(cls).items()):
        if name.startswith("_"):
            continue  # private and dunder methods are left alone
        outer: type[staticmethod[Any, Any]] | type[classmethod[Any, Any, Any]] | None = None
        func: Any = member
        if isinstance(member, (staticmethod, classmethod)):
            outer, func = type(member), member.__func__
        if not inspect.isfunction(func):
            continue  # properties, nested classes, plain attributes, other descriptors
        original = getattr(func, _ORIGINAL_ATTR, None)
        own: ShardSpec = getattr(func, _SPEC_ATTR, ShardSpec())
        if original is not None and getattr(func, "__wrapped__", None) is not original:
            # Another decorator (functools.wraps copies our attributes) sits on top of
            # ours: the inner wrapper cannot be rebuilt, so it must be complete already.
            if not own.key or not own.strategy:
                raise ConfigError(
                    f"@shard_database on {_describe(func)} leaves its "
                    f"{'key' if not own.key else 'strategy'} to the class, but another "
                    "decorator is stacked on top of it; put @shard_database outermost",
                    function=_describe(func),
                )
            continue
        if original is None:
            original = func
        spec = own.filled_from(default)
        method_where = _describe(original)
        _complete(spec, method_where, class_default=True)
        wrapped = _build_wrapper(original, spec, method_where)
        setattr(cls, name, outer(wrapped) if outer is not None else wrapped)
    setattr(cls, _SPEC_ATTR, default)
    return cls


def shard_database(key: str = "", strategy: str = "", force_primary: bool = False) -> Callable[[_T], _T]:
    """Route calls by a shard key taken from their arguments (like Java's ``@ShardDatabase``).

    On a function or method (sync, ``async``, generator, async generator), each
    call resolves ``key`` from its arguments *before* the body runs, then runs
    the body inside ``hint(strategy=strategy, strategy_value=value,
    force_primary=force_primary)``, nested in whatever hint is already active.
    Coroutine and generator functions stay what they are and set the hint only
    while their own body runs (per task for coroutines).

    ``key`` is a dotted path: the first segment names a parameter (``self`` and
    ``cls`` included; a name only ``**kwargs`` can carry is looked up there),
    each further segment is a mapping key for a ``Mapping`` or else an attribute
    (a non-negative integer segment indexes a sequence). Missing segments and
    ``None`` values raise :class:`~ddm_core.errors.ShardKeyNotFoundError` with
    ``key``, ``function`` and ``segment`` attributes.

    On a class, ``(key, strategy, force_primary)`` becomes the default of every
    public method defined in the class body (staticmethods and classmethods
    included; names starting with ``_``, properties and other descriptors are
    left alone). A method's own ``@shard_database`` wins for the parts it gives
    and takes the missing key or strategy from the class; ``force_primary`` is
    on if either says so. Methods inherited from base classes are not rewrapped.

    Raises (at decoration time):
        ConfigError: ``key``/``strategy`` is not a string (a strategy is an id,
            never a class); the key has an empty segment or does not start with
            a parameter name; a function ends up without a key or a strategy
            (a method in a class body may leave them to the class decorator —
            if the class has none, calling it raises ConfigError).
    """
    spec = ShardSpec(_check_text("key", key), _check_text("strategy", strategy), bool(force_primary))

    def decorate(target: _T) -> _T:
        if isinstance(target, type):
            return cast(_T, _decorate_class(target, spec))
        if isinstance(target, (staticmethod, classmethod)):
            return cast(_T, type(target)(_decorate_function(target.__func__, spec)))
        if not callable(target):
            raise ConfigError(
                f"@shard_database decorates functions, methods and classes, not {type(target).__name__}",
                value=target,
            )
        return cast(_T, _decorate_function(cast(Callable[..., Any], target), spec))

    return decorate
