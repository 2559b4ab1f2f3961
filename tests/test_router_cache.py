"""The router's plan cache is bounded by the characters of its texts, not only by their count."""

from __future__ import annotations

from pathlib import Path

from ddm_core import Router, load_config
from ddm_core.route.router import CACHED_CHARS, CACHED_TEXT_LIMIT

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "orders.yaml"


def _text(i: int, size: int) -> str:
    head = f"SELECT * FROM t_order WHERE user_id = {i} AND order_no = '"
    return head + "x" * (size - len(head) - 1) + "'"


def test_long_texts_are_routed_but_the_cache_keeps_a_bounded_number_of_characters() -> None:
    router = Router(load_config(EXAMPLE))
    size = CACHED_TEXT_LIMIT // 2
    for i in range(3 * CACHED_CHARS // size):  # three times what the cache may hold
        plan = router.route(_text(i, size))
        assert plan.units
    info = router.cache_info()
    assert info.misses == 3 * CACHED_CHARS // size
    assert info.size * size <= CACHED_CHARS, f"{info.size} texts of {size} characters are kept"
    assert info.size >= CACHED_CHARS // size - 1, "as many as fit are kept"
    # the most recent one is still a hit
    router.route(_text(3 * CACHED_CHARS // size - 1, size))
    assert router.cache_info().hits == 1


def test_a_text_past_the_limit_is_never_cached_and_pushes_nothing_out() -> None:
    router = Router(load_config(EXAMPLE))
    router.route("SELECT * FROM t_order WHERE user_id = %s", [1])
    huge = _text(7, CACHED_TEXT_LIMIT + 10)
    router.route(huge)
    router.route(huge)
    info = router.cache_info()
    assert info.size == 1 and info.hits == 0 and info.misses == 3
    router.route("SELECT * FROM t_order WHERE user_id = %s", [2])
    assert router.cache_info().hits == 1
