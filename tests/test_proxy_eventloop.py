"""Which event loop ``ddm proxy --loop`` runs on."""

from __future__ import annotations

import asyncio
import importlib.util

import pytest

from ddm_core.errors import DdmError, ProxyError
from ddm_core.proxy import eventloop

uvloop = pytest.importorskip("uvloop")  # a test dependency: the proxy extra installs it


def test_auto_is_uvloop_when_installed_and_each_choice_runs_on_its_loop() -> None:
    assert eventloop.chosen("auto") == "uvloop"
    seen: list[str] = []

    async def which() -> None:
        seen.append(type(asyncio.get_running_loop()).__module__)

    for choice in ("auto", "uvloop", "asyncio"):
        eventloop.run(which(), choice)
    assert seen[0].startswith("uvloop") and seen[1].startswith("uvloop") and seen[2].startswith("asyncio")


def test_without_uvloop_auto_falls_back_and_uvloop_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvloop" else real(name, *a))
    assert eventloop.chosen("auto") == "asyncio"
    with pytest.raises(ProxyError, match=r"'uvloop' is not installed.*--loop asyncio") as info:
        eventloop.chosen("uvloop")
    assert isinstance(info.value, DdmError)


def test_an_unknown_loop_is_named() -> None:
    with pytest.raises(ProxyError, match=r"event loop 'tokio' is not one of auto, uvloop, asyncio"):
        eventloop.chosen("tokio")
