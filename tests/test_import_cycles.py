"""No module of ddm_core imports itself back through others (docs/architecture.md#import-rules).

tests/test_layers.py checks that imports point down from layer to layer; this checks the graph of
modules for cycles, inside a layer as well as across them, counting imports inside functions and
under ``TYPE_CHECKING``: a cycle hidden in a function is an import-order error waiting for the
first caller that imports the other end first.
"""

from __future__ import annotations

from test_layers import MODULES, PACKAGE, _imports, _module_name

#: Modules still in an import cycle, each with the issue that removes it (this list only shrinks:
#: a module listed here that is in no cycle any more fails the test, so it is taken off).
_ONE_ROW = "the one-row INSERT fast path reads the compiled statement's internals: compile_insert leaves insert.py"
KNOWN_CYCLES: dict[str, str] = {
    **{m: _ONE_ROW for m in ("route.insert.insert", "route.insert.insert_fast")},
}  # fmt: skip


def _graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (a name inside a module counts as the module)."""
    modules = {_module_name(p): p for p in MODULES}

    def known(target: str) -> str:
        while target not in modules and "." in target:
            target = target.rsplit(".", 1)[0]
        return target if target in modules else ""

    return {m: {known(t) for t in _imports(p, m)} - {"", m} for m, p in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_no_import_cycles() -> None:
    cycles = _cycles(_graph())
    unknown = [c for c in cycles if not set(c) <= set(KNOWN_CYCLES)]
    assert unknown == [], f"modules importing each other (through function-level and TYPE_CHECKING imports too): {unknown}"
    still = {m for c in cycles for m in c}
    assert set(KNOWN_CYCLES) <= still, f"no longer in a cycle, take them off KNOWN_CYCLES: {set(KNOWN_CYCLES) - still}"


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"} - {"e"}}
    assert _cycles(graph) == [["a", "b", "c"]]
    assert _imports(PACKAGE / "xa" / "recovery.py", "xa.recovery") >= {"xa.branches", "xa.runtime"}
