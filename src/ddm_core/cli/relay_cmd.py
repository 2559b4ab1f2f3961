"""``ddm relay``: the outbox relay as a process, and ``ddm relay dead-letters`` to list and requeue."""

from __future__ import annotations

import datetime
import logging
import signal
from types import FrameType
from typing import Any

import click

from ddm_core.cli.app import cli, config_option, load, render_table
from ddm_core.execute.executor import Executor
from ddm_core.outbox import Relay, RelaySettings, dead_letters, requeue, sink_from_spec

__all__ = ["relay", "dead_letters_cmd"]

_DEFAULTS = RelaySettings()


@cli.group(invoke_without_command=True)
@config_option(required=False)
@click.option("--sink", metavar="SPEC",
              help="redis://host:port/db[?prefix=P&maxlen=N] (XADD to stream P<topic>) or stdout.")
@click.option("--data-source", "data_sources", multiple=True, metavar="NAME",
              help="Relay only this data source's outbox (repeatable; default: every data source).")
@click.option("--batch-size", type=int, default=_DEFAULTS.batch_size, show_default=True,
              help="Messages claimed per data source per transaction.")
@click.option("--retry-after", type=float, default=_DEFAULTS.retry_after, show_default=True,
              help="Seconds before a failed delivery is tried again.")
@click.option("--max-attempts", type=int, default=_DEFAULTS.max_attempts, show_default=True,
              help="Failed deliveries after which a message is dead-lettered.")
@click.option("--purge-after-days", type=float, default=_DEFAULTS.purge_after / 86_400, show_default=True,
              help="Days a sent message is kept before it is purged.")
@click.option("--poll-interval", type=float, default=_DEFAULTS.poll_interval, show_default=True,
              help="Seconds to wait after a pass that found nothing.")
@click.option("--once", is_flag=True, help="Run one pass and exit (prints what it did).")
@click.pass_context
def relay(
    ctx: click.Context,
    config_path: str | None,
    sink: str | None,
    data_sources: tuple[str, ...],
    batch_size: int,
    retry_after: float,
    max_attempts: int,
    purge_after_days: float,
    poll_interval: float,
    once: bool,
) -> None:
    """Deliver the outbox messages of every data source to a sink, until stopped (SIGTERM / Ctrl-C).

    Several relays may run at once (rows are claimed with FOR UPDATE SKIP LOCKED). A relay killed
    at any point loses nothing: unconfirmed messages are delivered again (at least once).
    """
    if ctx.invoked_subcommand is not None:
        return
    if config_path is None or sink is None:
        raise click.UsageError("ddm relay needs --config and --sink (or a subcommand: dead-letters)")
    settings = RelaySettings(
        batch_size=batch_size,
        retry_after=retry_after,
        max_attempts=max_attempts,
        purge_after=purge_after_days * 86_400,
        poll_interval=poll_interval,
    )
    config = load(config_path, check_env=True)
    target = sink_from_spec(sink)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s relay %(levelname)s %(message)s")
    with Executor(config, load_schema=False) as executor:
        worker = Relay(executor, target, settings=settings, data_sources=data_sources or None)
        if once:
            done = worker.run_once()
            click.echo(f"claimed {done.claimed}, delivered {done.delivered}, failed {done.failed}, "
                       f"dead {done.dead}, purged {done.purged}")
            return

        def stop(signum: int, frame: FrameType | None) -> None:
            worker.stop(timeout=0)

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        click.echo(f"relay: {', '.join(worker.data_sources)} -> {sink}", err=True)
        worker.run_forever()
        t = worker.totals
        click.echo(f"relay stopped: delivered {t.delivered}, failed {t.failed}, dead {t.dead}, purged {t.purged}",
                   err=True)


@relay.command("dead-letters")
@config_option()
@click.option("--data-source", "data_sources", multiple=True, metavar="NAME", help="Only this data source.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True,
              help="At most this many per data source.")
@click.option("--requeue", "requeue_ids", multiple=True, metavar="MESSAGE_ID",
              help="Make this dead message pending again (repeatable).")
@click.option("--requeue-all", is_flag=True, help="Make every dead message pending again.")
def dead_letters_cmd(
    config_path: str, data_sources: tuple[str, ...], limit: int, requeue_ids: tuple[str, ...], requeue_all: bool
) -> None:
    """List the messages that failed their last allowed delivery, or requeue them."""
    if requeue_ids and requeue_all:
        raise click.UsageError("--requeue MESSAGE_ID and --requeue-all exclude each other")
    config = load(config_path, check_env=True)
    sources = list(data_sources) or None
    with Executor(config, load_schema=False) as executor:
        if requeue_ids or requeue_all:
            n = requeue(executor, None if requeue_all else list(requeue_ids), data_sources=sources)
            click.echo(f"requeued {n} message{'s' if n != 1 else ''}")
            return
        letters = dead_letters(executor, data_sources=sources, limit=limit)
    if not letters:
        click.echo("no dead letters")
        return
    rows: list[list[str]] = [
        [d.data_source, d.message_id, d.topic, d.key or "", str(d.attempts), _when(d.created_ms),
         (d.last_error or "")[:80]]
        for d in letters
    ]
    for line in render_table(["data source", "message id", "topic", "key", "attempts", "created", "last error"],
                             rows, right=[4]):
        click.echo(line)


def _when(ms: Any) -> str:
    return datetime.datetime.fromtimestamp(int(ms) / 1000, datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
