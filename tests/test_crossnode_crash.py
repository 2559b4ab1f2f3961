"""A cross-node INSERT ... SELECT under SIGKILL: every statement lands whole or not at all.

``t_src`` is sharded by ``id`` (MOD over three data sources), ``t_dst`` by ``grp``
(slots over the same three, two tables each), so each row's target is unrelated to
where it is read and every statement writes to every data source: the runner opens one
XA transaction for it (docs/cross-node-queries.md#insert-select). Everything runs on a
private ``mariadbd`` (tests/test_execute_support.py ``PrivateMariaDB``), so that
``information_schema.innodb_trx`` can be required to be empty afterwards.

Each round starts a child process that runs statement ``k`` = ``INSERT INTO t_dst ...
SELECT s.id + k * 1000000, ... FROM t_src s`` through the executor in autocommit,
``k`` = 1, 2, ..., and appends ``S k`` before and ``K k`` after each one to a journal
(fsynced); the statement's executor is the thread one or the asyncio one (each a test).
A writer thread in the same child, on an executor of its own, keeps updating, deleting
and re-inserting hot rows of statements already reported done (``W`` before, ``w``
after each operation, with the values it wrote), so its row locks and gap locks race the
statement's XA branches on every node. The parent kills the child with SIGKILL:

* while it waits inside a commit step (the XA step hook: after the log's PREPARING,
  after the first / the last PREPARE, after the COMMIT decision, after the first
  COMMIT, after the final log write): the outcome is known in advance;
* a random delay after a statement started (mostly while batches are inserted), after
  its log row was written (among the PREPAREs and COMMITs), or after a statement
  returned (anywhere).

Then it runs recovery (the runner's ``recover_xa()``, then an abandon age of 0: the
coordinator is dead) and counts, against a reference computed from ``t_src`` and the
journal alone, what the data sources hold (read behind ddm-core's back):

* lost: rows of a statement reported done (or committed by recovery) that are missing;
* partial: statements with some but not all of their rows;
* duplicated: extra copies of an id;
* differing: rows whose values are not the source's, or the writer's last recorded ones;
* stray: rows that no statement or writer operation accounts for;
* misplaced: rows in a physical table their ``grp`` does not route to.

Each must be 0 after every round, nothing may be left prepared and no transaction open.
The statement in flight at the kill and a writer operation in flight are the only
unknowns: each is resolved to what the servers hold (a statement wholly there or wholly
absent, a row as before or after the operation) and the resolution is appended to the
journal, so the next round's reference includes it.

19 rounds per runner; ``DDM_CRASH_SEED`` (printed) repeats a run's data and kill plans.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest

from ddm_core import load_config
from ddm_core.errors import DdmError
from ddm_core.execute import Executor
from ddm_core.xa import recover
from runners import RUNNERS, BlockingAsyncExecutor
from test_execute_support import PrivateMariaDB, assert_no_leaks, running_mariadb
from test_xa_support import all_trx, assert_nothing_left, xa_host, xa_runtime

TESTS = Path(__file__).resolve().parent
DATA_SOURCES = ("ds_0", "ds_1", "ds_2")
SOURCE_ROWS = 600  # 256 + 256 + 64 + 16 + 8: five INSERT batches, each fanned out to six tables
STRIDE = 1_000_000  # statement k writes ids s.id + k * STRIDE
HOT_EVERY = 50  # the writer works on rows whose source id is a multiple of this
HOT_STATEMENTS = 4  # ... of the last few statements present

SRC_DDL = ("CREATE TABLE t_src (id BIGINT NOT NULL PRIMARY KEY, grp INT NOT NULL, amount DECIMAL(12,3), "
           "label VARCHAR(40), qty BIGINT, day DATE) DEFAULT CHARSET=utf8mb4")  # fmt: skip
DST_DDL = ("CREATE TABLE t_dst (seq BIGINT NOT NULL PRIMARY KEY, id BIGINT NOT NULL, grp INT NOT NULL, "
           "amount DECIMAL(12,3), label VARCHAR(40), qty BIGINT, day DATE, KEY (id)) "
           "DEFAULT CHARSET=utf8mb4")  # fmt: skip
STATEMENT = ("INSERT INTO t_dst (id, grp, amount, label, qty, day) "
             "SELECT s.id + %s * 1000000, s.grp, s.amount, s.label, s.qty, s.day FROM t_src s")  # fmt: skip
# The writer's operations: U updates by the shard key (one table), V by id only (every table of every
# data source), D deletes, R re-inserts a deleted row with new values.
WRITES = {
    "U": "UPDATE t_dst SET amount = %s, label = %s, qty = %s, day = %s WHERE grp = %s AND id = %s",
    "V": "UPDATE t_dst SET amount = %s, label = %s, qty = %s, day = %s WHERE id = %s",
    "D": "DELETE FROM t_dst WHERE grp = %s AND id = %s",
    "R": "INSERT INTO t_dst (amount, label, qty, day, grp, id) VALUES (%s, %s, %s, %s, %s, %s)",
}
LABELS = ("", "O'Reilly", "back\\slash", "naïve ✓ 文字", "%s", "%(v0)s", "NULL", "  padded  ", "\"quoted\"")

Row = tuple[Any, ...]  # (grp, amount, label, qty, day)


def random_values(rng: random.Random) -> Row:
    """``(amount, label, qty, day)``: decimals, strings, big integers, dates, and NULLs among them."""
    amount = None if rng.random() < 0.15 else Decimal(rng.randrange(-999_999_999_999, 999_999_999_999)) / 1000
    suffix = str(rng.randrange(10_000)) if rng.random() < 0.5 else ""
    label = None if rng.random() < 0.1 else rng.choice(LABELS) + suffix
    qty = None if rng.random() < 0.15 else rng.randrange(-(2**62), 2**62)
    day = None if rng.random() < 0.2 else date.fromordinal(rng.randrange(693_596, 767_010))  # 1900..2100
    return amount, label, qty, day


def encode(values: Sequence[Any]) -> list[Any]:
    """``values`` as JSON can carry them (decimals and dates as text)."""
    return [str(v) if isinstance(v, (Decimal, date)) else v for v in values]


def decode(values: Sequence[Any]) -> Row:
    """The inverse of :func:`encode` for ``(amount, label, qty, day)``."""
    amount, label, qty, day = values
    return (None if amount is None else Decimal(amount), label, qty,
            None if day is None else date.fromisoformat(day))  # fmt: skip


class Journal:
    """An append-only file of one-line records, each fsynced before :meth:`add` returns (two threads write)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._file = open(path, "a", encoding="utf-8")
        self._lock = threading.Lock()

    def add(self, line: str) -> None:
        with self._lock:
            self._file.write(line + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())

    def close(self) -> None:
        self._file.close()


# -- the child: statements, and a writer racing them ------------------------------------------------


CHILD = "import sys; sys.path.insert(0, sys.argv[1]); from test_crossnode_crash import child_main; child_main()"


class HotRows:
    """The rows the writer may touch: hot rows of the last statements present, with whether each exists."""

    def __init__(self, rows: Sequence[Sequence[Any]], grp_of: dict[int, int]) -> None:
        self._lock = threading.Lock()
        self._grp_of = grp_of
        self._exists: dict[int, bool] = {}
        self._by_statement: dict[int, list[int]] = {}
        for row_id, exists in rows:
            self._exists[row_id] = exists
            self._by_statement.setdefault(row_id // STRIDE, []).append(row_id)

    def add_statement(self, k: int) -> None:
        with self._lock:
            ids = [sid + k * STRIDE for sid in self._grp_of if sid % HOT_EVERY == 0]
            self._exists.update((i, True) for i in ids)
            self._by_statement[k] = ids

    def pick(self, rng: random.Random) -> tuple[int, int, bool] | None:
        with self._lock:
            recent = sorted(self._by_statement)[-HOT_STATEMENTS:]
            if not recent:
                return None
            row_id = rng.choice(self._by_statement[rng.choice(recent)])
            return row_id, self._grp_of[row_id % STRIDE], self._exists[row_id]

    def set(self, row_id: int, exists: bool) -> None:
        with self._lock:
            self._exists[row_id] = exists


def _write_forever(ex: Executor, journal: Journal, hot: HotRows, rng: random.Random, seq: int) -> None:
    """Update, delete and re-insert hot rows until killed; stop at the first operation that raises
    (recorded ``X``: its outcome is one of the round's two unknowns)."""
    while True:
        picked = hot.pick(rng)
        if picked is None:
            time.sleep(0.005)
            continue
        row_id, grp, exists = picked
        kind = "R" if not exists else rng.choice("UUVD")
        values = random_values(rng) if kind != "D" else ()
        journal.add(f"W {seq} {kind} {row_id} {grp} {json.dumps(encode(values))}")
        params = (grp, row_id) if kind != "V" else (row_id,)
        try:
            ex.execute(WRITES[kind], (*values, *params)).close()
        except DdmError as exc:
            journal.add(f"X {seq} {type(exc).__name__}: {exc}".replace("\n", " "))
            return
        journal.add(f"w {seq}")
        hot.set(row_id, kind != "D")
        seq += 1


def child_main() -> None:
    """The child process (``CHILD``): once its spec arrives on stdin, statements from ``first`` on and the
    writer beside them, until killed (at end of input, nothing).

    Prints ``S k`` / ``K k`` / ``F k`` per statement and ``STEP k <step> <data source>`` per XA commit
    step on stdout, for the parent to time its kill; with ``stop`` set, waits (to be killed) at that
    step of the first statement started after ``arm_after`` statements returned.
    """
    spec_text = sys.stdin.readline()
    if not spec_text:
        return
    spec = json.loads(spec_text)
    config = load_config(spec["config"])
    make: Any = Executor if spec["runner"] == "threads" else BlockingAsyncExecutor
    ex = make(config, load_schema=False, timeout=30.0)
    journal = Journal(Path(spec["journal"]))
    grp_of = {int(sid): int(grp) for sid, grp in spec["grp_of"]}
    hot = HotRows(spec["hot"], grp_of)
    writer = Executor(config, load_schema=False, timeout=30.0)  # another client, on threads either way
    threading.Thread(target=_write_forever, args=(writer, journal, hot, random.Random(spec["seed"]), spec["seq"]),
                     daemon=True).start()  # fmt: skip
    stop = spec["stop"]
    state = {"k": 0, "armed": False}
    seen: Counter[str] = Counter()

    def step_hook(step: str, data_source: str | None) -> None:
        seen[step] += 1
        print(f"STEP {state['k']} {step} {data_source or '-'}", flush=True)
        if state["armed"] and stop is not None and [step, seen[step]] == stop:
            print("AT", flush=True)
            time.sleep(600)  # the parent SIGKILLs us here

    xa_runtime(ex).step_hook = step_hook
    k = spec["first"]
    while True:
        state["k"], state["armed"] = k, k >= spec["first"] + spec["arm_after"]
        seen.clear()
        journal.add(f"S {k}")
        print(f"S {k}", flush=True)
        try:
            ex.execute(STATEMENT, (k,)).close()
        except DdmError as exc:
            journal.add(f"F {k} {type(exc).__name__}: {exc}".replace("\n", " "))
            print(f"F {k}", flush=True)
        else:
            journal.add(f"K {k}")
            hot.add_statement(k)
            print(f"K {k}", flush=True)
        k += 1


# -- the parent's reference: t_src and the journal ------------------------------------------------------


@dataclass
class Op:
    """One writer operation from the journal."""

    seq: int
    kind: str
    id: int
    grp: int
    values: Row
    state: str = "open"  # open (no answer: killed), done, raised, applied / not applied (resolved)

    def apply(self, rows: dict[int, Row]) -> None:
        if self.kind == "D":
            rows.pop(self.id, None)
        elif self.kind == "R" or self.id in rows:  # an UPDATE of a missing row changes nothing
            rows[self.id] = (self.grp, *self.values)


@dataclass
class History:
    """What the journal says: each statement's state and the writer's operations."""

    statements: dict[int, str] = field(default_factory=dict)  # open, done, failed; committed / absent: resolved
    ops: dict[int, Op] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> History:
        h = cls()
        states = {"S": "open", "K": "done", "F": "failed", "C": "committed", "N": "absent"}
        for line in path.read_text(encoding="utf-8").splitlines():
            kind, _, rest = line.partition(" ")
            number = int(rest.split(" ", 1)[0])
            if kind in states:
                h.statements[number] = states[kind]
            elif kind == "W":
                _, op_kind, row_id, grp, values = rest.split(" ", 4)
                written = decode(json.loads(values)) if values != "[]" else ()
                h.ops[number] = Op(number, op_kind, int(row_id), int(grp), written)
            else:
                h.ops[number].state = {"w": "done", "X": "raised", "A": "applied", "B": "not applied"}[kind]
            if kind in ("F", "X"):
                h.errors.append(line)
        return h

    def expected(self, source: dict[int, Row]) -> dict[int, Row]:
        """id → row, for the statements present and the writer's operations known to be applied."""
        rows = {sid + k * STRIDE: row for k, st in self.statements.items() if st in ("done", "committed")
                for sid, row in source.items()}  # fmt: skip
        for op in sorted(self.ops.values(), key=lambda o: o.seq):
            if op.state in ("done", "applied"):
                op.apply(rows)
        return rows

    def hot(self, source: dict[int, Row]) -> list[tuple[int, bool]]:
        """The writer's candidates for the next round: hot rows of the last statements present."""
        rows = self.expected(source)
        present = sorted(k for k, st in self.statements.items() if st in ("done", "committed"))[-HOT_STATEMENTS:]
        return [(sid + k * STRIDE, sid + k * STRIDE in rows) for k in present for sid in source if sid % HOT_EVERY == 0]


@dataclass
class Faults:
    lost: int = 0
    partial: int = 0
    duplicated: int = 0
    differing: int = 0
    stray: int = 0
    misplaced: int = 0
    examples: list[str] = field(default_factory=list)

    def total(self) -> int:
        return self.lost + self.partial + self.duplicated + self.differing + self.stray + self.misplaced

    def line(self) -> str:
        return (f"lost {self.lost}, partial {self.partial}, duplicated {self.duplicated}, differing {self.differing}, "
                f"stray {self.stray}, misplaced {self.misplaced}")  # fmt: skip

    def note(self, text: str) -> None:
        if len(self.examples) < 12:
            self.examples.append(text)


Located = tuple[str, str, int, Row]  # data source, physical table, id, row


def read_tables(server: PrivateMariaDB, databases: dict[str, str], prefix: str) -> list[Located]:
    """Every row of every physical table named ``prefix``* on every data source, read with plain PyMySQL."""
    out: list[Located] = []
    for ds, db in databases.items():
        raw = server.raw(db)
        try:
            with raw.cursor() as cur:
                cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
                            "AND table_name LIKE %s", (db, prefix.replace("_", "\\_") + "%"))  # fmt: skip
                for (table,) in cur.fetchall():
                    cur.execute(f"SELECT id, grp, amount, label, qty, day FROM `{table}`")
                    out.extend((ds, table, int(r[0]), tuple(r[1:])) for r in cur.fetchall())
        finally:
            raw.close()
    return out


def count_faults(found: list[Located], history: History, source: dict[int, Row], journal: Journal,
                 placement: dict[int, tuple[str, str]]) -> Faults:
    """Count what the servers hold against the reference (module docstring); append the resolutions of
    the round's unknowns (the statement and the writer operation in flight) to the journal."""
    f = Faults()
    copies = Counter(row_id for _, _, row_id, _ in found)
    f.duplicated = sum(n - 1 for n in copies.values())
    for row_id, n in copies.items():
        if n > 1:
            f.note(f"id {row_id}: {n} copies")
    held = {row_id: row for _, _, row_id, row in found}
    partial_ids: set[int] = set()
    for k, st in sorted(history.statements.items()):
        ids = {sid + k * STRIDE for sid in source}
        present = len(ids & held.keys())
        if st in ("open", "failed", "absent") and 0 < present < len(ids):
            f.partial += 1
            partial_ids |= ids
            f.note(f"statement {k} ({st}): {present} of {len(ids)} rows")
        if st == "open":
            journal.add(f"{'C' if present == len(ids) else 'N'} {k}")
    unknown = [op for op in history.ops.values() if op.state in ("open", "raised")]
    assert len(unknown) <= 1, f"the writer stops at its first error: at most one operation is unknown, {unknown}"
    for op in unknown:  # as before the operation, or as after it
        before = History(history.statements, {s: o for s, o in history.ops.items() if s != op.seq}).expected(source)
        after = dict(before)
        op.apply(after)
        journal.add(f"{'A' if held.get(op.id) == after.get(op.id) else 'B'} {op.seq}")
    history = History.read(journal.path)
    expected = history.expected(source)
    for row_id in sorted(expected.keys() - held.keys()):
        f.lost += 1
        f.note(f"id {row_id} (statement {row_id // STRIDE}, {history.statements[row_id // STRIDE]}) missing")
    for row_id in sorted(held.keys() - expected.keys() - partial_ids):
        f.stray += 1
        f.note(f"id {row_id} (statement {row_id // STRIDE}, {history.statements.get(row_id // STRIDE)}) unexpected")
    for ds, table, row_id, row in found:
        if row_id in expected and row != expected[row_id]:
            f.differing += 1
            f.note(f"id {row_id} on {ds}.{table}: {row!r}, expected {expected[row_id]!r}")
        if (ds, table) != placement[row[0]]:
            f.misplaced += 1
            f.note(f"id {row_id} (grp {row[0]}) on {ds}.{table}, routed to {placement[row[0]]}")
    return f


# -- rounds -------------------------------------------------------------------------------------------


@dataclass
class Plan:
    """When a round's child is killed: at a commit step (``stop``: step, its n-th time in the statement),
    or ``delay`` seconds after an event (``after``: ``S`` a statement started, ``logged``, ``K`` returned)
    of a statement started after ``arm_after`` statements of the round returned."""

    arm_after: int
    stop: tuple[str, int] | None = None
    after: str = ""
    delay: float = 0.0

    def __str__(self) -> str:
        when = f"at {self.stop[0]} #{self.stop[1]}" if self.stop else f"{self.delay * 1000:.1f} ms after {self.after}"
        return f"{when}, after {self.arm_after} statement(s)"

    def check_stop(self, outcome: str, first: Any, second: Any, report: str) -> None:
        """At a commit step, what recovery must have done: commit the statement in flight from its COMMIT
        decision on, else keep its prepared branches (young) in the first pass and roll them back in the
        second (``first`` / ``second``: their :class:`~ddm_core.xa.RecoveryReport`)."""
        if self.stop is None:
            return
        step, nth = self.stop
        # The log's data source (ds_0) is the last resource: it never prepares, and its one-phase commit (its
        # "committed" step, the first) is the decision. The other branches' PREPAREs run as one round, their
        # COMMITs too (docs/xa.md#commit): at a branch's step hook every statement of that round has been answered.
        branches = len(DATA_SOURCES) - 1
        kept = {"logged": 0, "prepared": branches}.get(step)
        if kept is None:
            assert outcome == "committed", report
            pending = {"decided": branches, "committed": branches if nth == 1 else 0, "finished": 0}[step]
            assert (len(first.committed), len(first.kept), len(second.rolled_back)) == (pending, 0, 0), report
        else:
            assert outcome == "absent", report
            assert (len(first.committed), len(first.kept), len(second.rolled_back)) == (0, kept, kept), report


def plans(rng: random.Random) -> list[Plan]:
    n = len(DATA_SOURCES)
    stops = [("logged", 1), ("prepared", 1), ("prepared", n - 1), ("decided", 1), ("committed", 1), ("committed", n),
             ("finished", 1)]
    out = [Plan(rng.randint(1, 2), stop=s) for s in stops]
    out += [Plan(rng.randint(1, 2), after="S", delay=rng.uniform(0.0, 0.2)) for _ in range(5)]
    out += [Plan(rng.randint(1, 2), after="logged", delay=rng.uniform(0.0, 0.004)) for _ in range(4)]
    out += [Plan(rng.randint(1, 2), after="K", delay=rng.uniform(0.0, 0.4)) for _ in range(4)]
    rng.shuffle(out)
    return out


class Lines:
    """Lines of a pipe, each read as soon as it is there (no buffering ahead of ``select``)."""

    def __init__(self, stream: Any) -> None:
        self._fd = stream.fileno()
        self._buffer = b""
        self.last = ""

    def next(self, timeout: float) -> str | None:
        """The next line; ``None`` at end of stream. Fails after ``timeout`` seconds of silence."""
        while b"\n" not in self._buffer:
            ready, _, _ = select.select([self._fd], [], [], timeout)
            assert ready, f"the child said nothing for {timeout} s (last: {self.last!r})"
            chunk = os.read(self._fd, 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        self.last = line.decode()
        return self.last


def landing(last: str) -> str:
    """Where the child was when killed, from the last event it printed."""
    words = last.split()
    if not words:
        return "before its first statement"
    if words[0] == "STEP":
        return f"after {words[2]}" + (f" on {words[3]}" if words[3] != "-" else "")
    return {"S": "reading / inserting", "K": "between statements", "F": "after a failed statement",
            "AT": "stopped at the step"}[words[0]]  # fmt: skip


class Child:
    """A child process, started ahead (it imports ddm-core while the round before runs) and given its
    spec on stdin when its round starts."""

    def __init__(self, err: Path) -> None:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS.parent / "src"), str(TESTS)]))
        self.err = err
        with open(err, "wb") as stderr:
            self.proc = subprocess.Popen([sys.executable, "-c", CHILD, str(TESTS)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=stderr, env=env)  # fmt: skip

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)  # a real crash: no rollback, no socket shutdown by Python
        self.proc.wait(timeout=30)

    def close(self) -> None:
        """Kill (if it still runs) and close the pipes."""
        self.kill()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()

    def run(self, spec: dict[str, Any], plan: Plan) -> str:
        """Run until the plan's moment, SIGKILL; where the child was (:func:`landing`)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps(spec).encode() + b"\n")
        self.proc.stdin.flush()
        lines = Lines(self.proc.stdout)
        returned = 0
        try:
            while True:
                line = lines.next(60.0)
                assert line is not None, f"the child exited ({self.proc.wait()}): {self.err.read_text()[-3000:]}"
                words = line.split()
                if words[0] in ("K", "F"):
                    returned += 1
                if plan.stop is not None:
                    if words[0] == "AT":
                        break
                elif returned >= plan.arm_after and plan.after in (words[0], words[2] if words[0] == "STEP" else ""):
                    time.sleep(plan.delay)
                    break
        finally:
            self.kill()
        while lines.next(10.0) is not None:  # what it printed before it died
            pass
        self.close()
        return landing(lines.last)


def wait_for_sessions_to_end(server: PrivateMariaDB, databases: dict[str, str]) -> None:
    """No session is connected to ``databases`` any more: the dead child's sockets were closed by its kernel,
    and the server ends each session on its own schedule; only then is a prepared branch free for recovery."""
    raw = server.raw()
    marks = ", ".join(["%s"] * len(databases))
    try:
        for _ in range(600):
            with raw.cursor() as cur:
                cur.execute("SELECT id, db, command, time, state, info FROM information_schema.processlist "
                            f"WHERE id <> CONNECTION_ID() AND db IN ({marks})", list(databases.values()))  # fmt: skip
                sessions = cur.fetchall()
            if not sessions:
                return
            time.sleep(0.05)
        raise AssertionError(f"the killed child's sessions did not end within 30 s: {sessions}")
    finally:
        raw.close()


def wait_for_commits_to_end(server: PrivateMariaDB) -> list[Any]:
    """Wait (up to 10 s) while ``information_schema.innodb_trx`` lists only transactions in state COMMITTING
    (a commit InnoDB is finishing: it ends on its own); any other state returns at once, for
    :func:`assert_nothing_left` to report. The COMMITTING rows seen first, if any."""
    raw = server.raw()
    seen: list[Any] = []
    try:
        for _ in range(200):
            rows = all_trx(raw)
            if not rows or any(row[1] != "COMMITTING" for row in rows):
                return seen
            seen = seen or rows
            time.sleep(0.05)
        return seen
    finally:
        raw.close()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateMariaDB]:
    with running_mariadb(tmp_path_factory.mktemp("crossnode_mariadbd")) as s:
        yield s


@pytest.fixture()
def databases(server: PrivateMariaDB) -> dict[str, str]:
    """Data source → a fresh database on the private server. Not dropped: a failed round may leave a branch
    prepared, whose locks a DROP DATABASE would wait for; the server goes with the module."""
    return {ds: server.create_database("cn_") for ds in DATA_SOURCES}


def crash_config(server: PrivateMariaDB, databases: dict[str, str]) -> dict[str, Any]:
    """The configuration over ``databases`` on ``server`` (module docstring)."""
    names = list(databases)
    config = {
        "dataSources": {ds: {"url": f"mysql://127.0.0.1:{server.port}/{db}", "username": "root", "password": ""}
                        for ds, db in databases.items()},  # fmt: skip
        "pool": {"maxSize": 8, "minIdle": 0, "acquireTimeoutMs": 5000},
        "tables": [
            {"logicTable": "t_src", "shardKey": "id", "algorithm": "MOD", "databases": names},
            {"logicTable": "t_dst", "shardKey": "grp", "algorithm": "slots", "slotCount": 1024,
             "shardCount": len(names), "tablePerShard": 2, "databases": names, "tableKey": "grp",
             "keyGenerator": {"column": "seq", "type": "snowflake"}},
        ],
        "defaultDataSource": names[0],
        "runtime": {"allowFullRoute": True, "allowDmlFullRoute": True},
        "xa": {"logDataSource": names[0], "timeoutMs": 30_000, "abandonAfterMs": 60_000, "maxConcurrent": 4},
    }
    return config


def load_source(config: dict[str, Any], rng: random.Random) -> dict[int, Row]:
    """``t_dst`` and ``t_src`` created through ddm-core, ``t_src`` filled: id → (grp, amount, label, qty, day)."""
    ids = rng.sample(range(1, 20 * SOURCE_ROWS), SOURCE_ROWS)
    source = {i: (rng.randrange(0, 97), *random_values(rng)) for i in ids}
    with Executor(load_config(config), load_schema=False) as ex:
        ex.execute(SRC_DDL).close()
        ex.execute(DST_DDL).close()
        rows = [(i, *row) for i, row in source.items()]
        for start in range(0, len(rows), 100):
            chunk = rows[start:start + 100]
            ex.execute("INSERT INTO t_src (id, grp, amount, label, qty, day) VALUES "
                       + ", ".join(["(%s, %s, %s, %s, %s, %s)"] * len(chunk)), [v for r in chunk for v in r]).close()
    return source


def check_round(ex: Any, server: PrivateMariaDB, databases: dict[str, str], journal: Journal,
                source: dict[int, Row], plan: Plan, title: str) -> str:
    """Recover what the killed child left, count the faults (all must be 0), check the servers are clean;
    the in-flight statement's outcome (``committed``, ``absent``; ``none`` when it was killed between two)."""
    history = History.read(journal.path)
    open_now = [k for k, st in history.statements.items() if st == "open"]
    assert len(open_now) <= 1, open_now
    in_flight = open_now[0] if open_now else None
    first = ex.recover_xa()  # the default abandon age: an undecided transaction is young, kept
    second = recover(xa_host(ex), abandon_after_ms=0)  # its coordinator is dead: roll it back
    assert recover(xa_host(ex), abandon_after_ms=0).summary().startswith(
        "0 branch(es) committed, 0 rolled back, 0 kept"), "a third recovery pass found work"
    assert not first.unreachable and not second.unreachable
    placement = {}
    for grp in range(97):
        (unit,) = ex.router.route("SELECT * FROM t_dst WHERE grp = %s", [grp]).units
        placement[grp] = (unit.data_source, dict(unit.tables)["t_dst"])
    faults = count_faults(read_tables(server, databases, "t_dst"), history, source, journal, placement)
    resolved = History.read(journal.path)
    outcome = "none" if in_flight is None else resolved.statements[in_flight]
    line = (f"{title}; statement {in_flight} {outcome}; recovery {first.summary()} / {second.summary()}; "
            f"{faults.line()}")  # fmt: skip
    print(line)
    assert faults.total() == 0, "\n".join([line, *faults.examples, *resolved.errors])
    plan.check_stop(outcome, first, second, line)
    committing = wait_for_commits_to_end(server)
    if committing:
        print(f"  (a commit was finishing on the server after recovery: {committing})")
    assert_nothing_left(server, ex)
    return outcome


@pytest.mark.parametrize("runner", RUNNERS)
def test_insert_select_is_atomic_under_sigkill(server: PrivateMariaDB, databases: dict[str, str], tmp_path: Path,
                                               runner: str) -> None:
    seed = int(os.environ.get("DDM_CRASH_SEED", random.randrange(2**32)))
    print(f"\n{runner}: seed {seed} (DDM_CRASH_SEED={seed} repeats the plans and the data)")
    rng = random.Random(seed)
    config = crash_config(server, databases)
    source = load_source(config, rng)
    assert {row_id: row for _, _, row_id, row in read_tables(server, databases, "t_src")} == source
    journal = Journal(tmp_path / "journal.log")
    make: Any = Executor if runner == "threads" else BlockingAsyncExecutor
    outcomes: Counter[str] = Counter()
    landings: Counter[str] = Counter()
    ahead = Child(tmp_path / "child_0.err")
    try:
        for n, plan in enumerate(plans(rng)):
            history = History.read(journal.path)
            spec = {"config": config, "runner": runner, "journal": str(journal.path),
                    "first": max(history.statements, default=0) + 1, "seq": max(history.ops, default=-1) + 1,
                    "arm_after": plan.arm_after, "stop": plan.stop, "seed": rng.randrange(2**32),
                    "grp_of": [(sid, row[0]) for sid, row in source.items()], "hot": history.hot(source)}  # fmt: skip
            child, ahead = ahead, Child(tmp_path / f"child_{n + 1}.err")
            where = child.run(spec, plan)
            landings[where] += 1
            wait_for_sessions_to_end(server, databases)
            with make(load_config(config), load_schema=False) as ex:
                title = f"round {n}: killed {plan} -> {where}"
                outcomes[check_round(ex, server, databases, journal, source, plan, title)] += 1
                if runner == "asyncio":
                    ex.settle()
                assert_no_leaks(ex)
    finally:
        ahead.close()
        journal.close()
    final = History.read(journal.path)
    done = [k for k, st in final.statements.items() if st == "done"]
    writes = Counter(op.kind for op in final.ops.values() if op.state in ("done", "applied"))
    print(f"{runner}: {len(done)} statements reported done; in flight at the kill: {dict(outcomes)}; killed "
          f"{dict(landings)}; writer operations applied: {dict(writes)}; failures: {final.errors}")  # fmt: skip
    # The rounds that stop at a step make both outcomes occur; the writer must have raced them.
    assert outcomes["committed"] >= 3 and outcomes["absent"] >= 3, outcomes
    assert all(writes[kind] > 0 for kind in WRITES), writes
