"""Slot maps and range lists: parsing and the coverage checks.

A slot map assigns every slot ``0..2**bits-1`` to exactly one target; a range
list assigns every value of a span to exactly one target. Both are checked the
same way: no slot (value) claimed twice, none left out — one deleted line of a
slot map makes a whole share of the data unreachable
(docs/architecture.md#slots-rather-than-modulo-or-a-hash-ring).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping, Sequence

from ddm_core.metadata.problems import Problems, join_path

__all__ = ["parse_slot_spec", "format_slots", "check_slot_map", "check_range_list"]


def parse_slot_spec(spec: Any, n_slots: int) -> list[int]:
    """Slots named by ``spec``: ``"0-255,300"``, an int, or a list of those.

    Raises:
        ValueError: malformed text, a reversed range or a slot outside ``0..n_slots-1``.
    """
    items: Iterable[Any]
    if isinstance(spec, (list, tuple)):
        items = spec
    elif isinstance(spec, (int, str)) and not isinstance(spec, bool):
        items = [spec]
    else:
        raise ValueError(f'{spec!r} is not a slot list (write "0-255,300")')
    out: list[int] = []
    for item in items:
        parts: list[Any] | None = [item] if isinstance(item, int) and not isinstance(item, bool) else None
        if parts is None:
            if not isinstance(item, str):
                raise ValueError(f"{item!r} is not a slot or a slot range")
            parts = [p.strip() for p in item.split(",") if p.strip()]
        for part in parts:
            if isinstance(part, int):
                lo = hi = part
            else:
                lo_text, dash, hi_text = part.partition("-")
                try:
                    lo = int(lo_text)
                    hi = int(hi_text) if dash else lo
                except ValueError:
                    raise ValueError(f"{part!r} is not a slot or a slot range like 0-255") from None
            if lo > hi:
                raise ValueError(f"slot range {part!r} is reversed")
            if lo < 0 or hi >= n_slots:
                raise ValueError(f"slot range {part!r} is outside 0-{n_slots - 1}")
            out.extend(range(lo, hi + 1))
    return out


def format_slots(slots: Sequence[int], limit: int = 6) -> str:
    """``[0, 1, 2, 7]`` → ``"0-2,7"`` (at most ``limit`` runs, then ``+N more``)."""
    runs: list[tuple[int, int]] = []
    for s in sorted(slots):
        if runs and s == runs[-1][1] + 1:
            runs[-1] = (runs[-1][0], s)
        else:
            runs.append((s, s))
    text = ",".join(f"{a}-{b}" if a != b else str(a) for a, b in runs[:limit])
    if len(runs) > limit:
        text += f",... (+{len(runs) - limit} more runs)"
    return text


def check_slot_map(
    mapping: Any,
    n_slots: int,
    targets: Sequence[str] | None,
    problems: Problems,
    path: str,
) -> None:
    """Check an explicit slot map ``{target: "0-255,..."}`` (against ``targets`` if given).

    Problems: not a mapping, an unknown target, malformed ranges, a slot given
    to two targets, slots given to none.
    """
    if not isinstance(mapping, Mapping):
        problems.add(path, f'must map each target to its slots ({{ds_0: "0-255"}}), not {mapping!r}', mapping)
        return
    owner: dict[int, str] = {}
    twice: dict[tuple[str, str], list[int]] = {}
    for target, spec in mapping.items():
        tpath = join_path(path, str(target))
        if targets is not None and target not in targets:
            problems.add(tpath, f"target {target!r} is not one of {list(targets)}", target)
        try:
            slots = parse_slot_spec(spec, n_slots)
        except ValueError as exc:
            problems.add(tpath, str(exc), spec)
            continue
        for s in slots:
            first = owner.setdefault(s, str(target))
            if first != target:
                twice.setdefault((first, str(target)), []).append(s)
    for (first, second), slots in twice.items():
        problems.add(
            path,
            f"slots {format_slots(slots)} are given to both {first!r} and {second!r}",
            format_slots(slots),
        )
    missing = [s for s in range(n_slots) if s not in owner]
    if missing:
        problems.add(
            path,
            f"{len(missing)} of {n_slots} slots are not mapped to any target: {format_slots(missing)}; "
            "rows hashing there would have no home",
            format_slots(missing),
        )


def check_range_list(
    ranges: Sequence[tuple[Any, Any, str]],
    problems: Problems,
    path: str,
    *,
    what: str = "range",
    gaps: bool = True,
) -> None:
    """Check half-open ``[lower, upper)`` ranges, in any order, for overlaps and (``gaps``) gaps.

    ``None`` bounds are unbounded. Ranges are compared by their bounds only, so
    numbers and dates/times (ISO strings or datetimes, one kind per list) both work.
    """
    indexed = list(enumerate(ranges))
    try:
        indexed.sort(key=lambda it: (it[1][0] is not None, it[1][0]))
    except TypeError:
        problems.add(path, f"{what} bounds mix types that cannot be compared", None)
        return
    for i, (lo, hi, _target) in indexed:
        if lo is not None and hi is not None and not lo < hi:
            problems.add(join_path(path, i), f"{what} [{lo}, {hi}) is empty or reversed", (lo, hi))
    for (i, (lo1, hi1, t1)), (j, (lo2, hi2, t2)) in zip(indexed, indexed[1:]):
        if hi1 is None or lo2 is None or hi1 > lo2:
            problems.add(
                join_path(path, j),
                f"{what} [{lo2}, {hi2}) → {t2!r} overlaps [{lo1}, {hi1}) → {t1!r} (entry {i})",
                (lo2, hi2),
            )
        elif gaps and hi1 < lo2:
            problems.add(
                join_path(path, j),
                f"gap between {what}s: values in [{hi1}, {lo2}) belong to no target "
                f"(after entry {i} → {t1!r}, before entry {j} → {t2!r})",
                (hi1, lo2),
            )
