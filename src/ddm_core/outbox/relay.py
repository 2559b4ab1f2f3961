"""The relay: claims due messages per data source, hands them to a sink, records the outcome.

One pass (:meth:`Relay.run_once`), per data source, in one local transaction:

1. ``SELECT ... WHERE state = 'pending' AND next_attempt_ms <= now ORDER BY
   next_attempt_ms, seq LIMIT batch FOR UPDATE SKIP LOCKED`` — the rows are
   locked until the transaction ends, and another relay skips them;
2. deliver them (:func:`~ddm_core.outbox.sinks.deliver_batch`);
3. mark the delivered ones ``sent``; a failed one gets one more attempt and
   ``next_attempt_ms = now + retry_after``, or ``dead`` on its last allowed
   attempt; commit.

A relay that dies anywhere in between leaves nothing half done in the
database: its transaction rolls back and the rows are claimed again, so a
message the sink already took may be delivered twice (at least once; the
consumer removes repeats with :func:`~ddm_core.outbox.consume_once`). Sent
rows older than ``purge_after`` are deleted in batches every ``purge_every``
seconds. Numbers and reasons: docs/outbox.md.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from ddm_core.dialects import Dialect, dialect_for
from ddm_core.errors import OutboxError
from ddm_core.execute.executor import Executor
from ddm_core.outbox.locking import lock_clause
from ddm_core.outbox.message import Message, MessageState
from ddm_core.outbox.schema import MESSAGE_TABLE
from ddm_core.outbox.settings import RelaySettings
from ddm_core.outbox.sinks import Sink, deliver_batch
from ddm_core.route.text.sql_hint import on_data_source

__all__ = ["Relay", "RelayPass", "Clock"]

log = logging.getLogger("ddm_core.outbox")

#: Seconds since the epoch, like ``time.time`` (injectable for tests).
Clock = Callable[[], float]

_CLAIM = (
    f"SELECT seq, message_id, topic, msg_key, payload, attempts, created_ms FROM {MESSAGE_TABLE} "
    "WHERE state = 'pending' AND next_attempt_ms <= %s ORDER BY next_attempt_ms, seq LIMIT %s"
)
_FAILED = (
    f"UPDATE {MESSAGE_TABLE} SET attempts = %s, state = %s, next_attempt_ms = %s, last_error = %s "
    "WHERE seq = %s AND state = 'pending'"
)
_PURGE_WITH_LIMIT = f"DELETE FROM {MESSAGE_TABLE} WHERE state = 'sent' AND sent_ms < %s LIMIT %s"
# Without DELETE ... LIMIT (Dialect.deletes_with_limit); MySQL has no LIMIT in an IN subquery.
_PURGE_BY_SUBQUERY = (
    f"DELETE FROM {MESSAGE_TABLE} WHERE seq IN (SELECT seq FROM {MESSAGE_TABLE} "
    "WHERE state = 'sent' AND sent_ms < %s LIMIT %s)"
)
_PURGE_ROUNDS = 10  # purge statements per data source per purge: delivery is never held up for long
_ERROR_TEXT = 1000  # VARCHAR(1000) last_error


@dataclass(slots=True)
class RelayPass:
    """What one pass (or, summed, a relay's life so far) did."""

    claimed: int = 0
    delivered: int = 0
    failed: int = 0  # failures that will be retried
    dead: int = 0  # failures that were the last allowed attempt
    purged: int = 0

    def add(self, other: RelayPass) -> None:
        for f in dataclasses.fields(self):
            setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class Relay:
    """Delivers the outbox of every data source of ``executor`` to ``sink``.

    Args:
        executor: The executor whose data sources hold ``ddm_outbox`` tables.
        sink: A callable taking a :class:`Message` (see :mod:`ddm_core.outbox.sinks`).
        settings: Batch size, retry delay, attempts, purge figures (defaults:
            30 s, 16 attempts, 7 days); keyword overrides (``retry_after=5``) are
            applied on top.
        data_sources: Only these data sources (default: all of the configuration).
        clock: Seconds since the epoch, for due times, sent times and purging.

    Use :meth:`run_once` for one pass, or :meth:`start` / :meth:`stop` for a
    background thread (also a context manager). Several relays, in threads or
    processes, may serve the same tables.
    """

    def __init__(
        self,
        executor: Executor,
        sink: Sink,
        *,
        settings: RelaySettings | None = None,
        data_sources: Sequence[str] | None = None,
        clock: Clock | None = None,
        **overrides: Any,
    ) -> None:
        base = settings or RelaySettings()
        self.settings = dataclasses.replace(base, **overrides) if overrides else base
        self.executor = executor
        self.sink = sink
        known = list(executor.config.data_sources)
        chosen = list(data_sources) if data_sources is not None else known
        unknown = [ds for ds in chosen if ds not in executor.config.data_sources]
        if unknown or not chosen:
            raise OutboxError(
                f"relay data sources {unknown or chosen} are not configured (configured: {', '.join(known)})",
                data_source=unknown[0] if unknown else None,
            )
        self.data_sources = tuple(chosen)
        self._clock = clock or time.time
        self._locks: dict[str, str] = {}
        self._last_purge: float | None = None
        self.totals = RelayPass()
        self.errors = 0  # passes that failed (logged) in the background loop
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- one pass -------------------------------------------------------------------------

    def run_once(self) -> RelayPass:
        """Claim, deliver and record one batch per data source; purge when due.

        Raises:
            ExecutionError / DataSourceUnavailableError: a data source failed
                (the batch's transaction rolled back; its messages stay pending).
        """
        now = self._now_ms()
        done = RelayPass()
        for ds in self.data_sources:
            done.add(self._relay_batch(ds, now))
        every_ms = self.settings.purge_every * 1000
        if self._last_purge is None or now - self._last_purge >= every_ms:
            self._last_purge = now
            done.purged += self.purge(now)
        self.totals.add(done)
        return done

    def _relay_batch(self, ds: str, now: int) -> RelayPass:
        s = self.settings
        claim = on_data_source(ds, _CLAIM + self._lock_clause(ds))
        done = RelayPass()
        with self.executor.transaction() as tx:
            with tx.execute(claim, (now, s.batch_size)) as result:
                rows = result.fetchall()
            if not rows:
                return done
            messages = [
                Message(str(mid), str(topic), None if key is None else str(key), bytes(payload), ds, int(attempts),
                        int(created))
                for _, mid, topic, key, payload, attempts, created in rows
            ]
            outcomes = deliver_batch(self.sink, messages)
            sent = [int(row[0]) for row, err in zip(rows, outcomes) if err is None]
            done.claimed = len(rows)
            done.delivered = len(sent)
            if sent:
                # Padded to batch_size: one statement text (one cached plan) per data source.
                padded = sent + [sent[-1]] * (s.batch_size - len(sent))
                marks = ", ".join(["%s"] * s.batch_size)
                sql = (
                    f"UPDATE {MESSAGE_TABLE} SET state = 'sent', sent_ms = %s "
                    f"WHERE state = 'pending' AND seq IN ({marks})"
                )
                tx.execute(on_data_source(ds, sql), (now, *padded)).close()
            for row, message, err in zip(rows, messages, outcomes):
                if err is None:
                    continue
                attempts = message.attempts + 1
                dead = attempts >= s.max_attempts
                state = MessageState.DEAD if dead else MessageState.PENDING
                text = f"{type(err).__name__}: {err}"[:_ERROR_TEXT]
                retry_at = now + int(s.retry_after * 1000)
                tx.execute(on_data_source(ds, _FAILED), (attempts, state.value, retry_at, text, int(row[0]))).close()
                if dead:
                    done.dead += 1
                    log.error("message %s on %s is dead after %d failed deliveries: %s", message.message_id, ds,
                              attempts, text)
                else:
                    done.failed += 1
        return done

    def purge(self, now_ms: int | None = None) -> int:
        """Delete sent messages older than ``purge_after``, ``purge_batch`` rows per statement."""
        now = self._now_ms() if now_ms is None else now_ms
        cutoff = now - int(self.settings.purge_after * 1000)
        batch = self.settings.purge_batch
        total = 0
        for ds in self.data_sources:
            sql = on_data_source(ds, _PURGE_WITH_LIMIT if self._dialect(ds).deletes_with_limit else _PURGE_BY_SUBQUERY)
            for _ in range(_PURGE_ROUNDS):
                with self.executor.execute(sql, (cutoff, batch)) as result:
                    deleted = max(result.rowcount, 0)
                total += deleted
                if deleted < batch:
                    break
        return total

    # -- background thread ---------------------------------------------------------------------

    def start(self) -> Relay:
        """Run passes in a daemon thread until :meth:`stop`."""
        if self._thread is not None and self._thread.is_alive():
            raise OutboxError("the relay is already running")
        self._stop.clear()
        self._thread = threading.Thread(target=self.run_forever, name="ddm-relay", daemon=True)
        self._thread.start()
        return self

    def run_forever(self) -> None:
        """Run passes in this thread until :meth:`stop` (from another thread or a signal handler)."""
        while not self._stop.is_set():
            try:
                done = self.run_once()
            except Exception as exc:  # a data source down: log, wait, try again — never die
                self.errors += 1
                log.warning("relay pass failed: %s", exc)
                done = None
            if done is None or done.claimed == 0:
                self._stop.wait(self.settings.poll_interval)

    def stop(self, timeout: float | None = 10.0) -> None:
        """Ask the loop to stop after its current pass and wait for the thread."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    def __enter__(self) -> Relay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- helpers -----------------------------------------------------------------------------

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _dialect(self, ds: str) -> Dialect:
        return dialect_for(self.executor.config.data_sources[ds].primary.dialect)

    def _lock_clause(self, ds: str) -> str:
        clause = self._locks.get(ds)
        if clause is None:
            dialect = self._dialect(ds)
            version = None
            if dialect.locks_rows:  # the release decides whether SKIP LOCKED is there
                with self.executor.execute(on_data_source(ds, "SELECT VERSION()")) as result:
                    row = result.fetchone()
                version = None if row is None else str(row[0])
            clause = self._locks[ds] = lock_clause(dialect.name, version)
            log.info("relay on %s (%s): claims with%s", ds, version or dialect.name, clause or " no lock clause")
        return clause

    def __repr__(self) -> str:
        return f"<Relay data_sources={list(self.data_sources)} totals={self.totals}>"
