"""``ddm metrics serve``: a ``/metrics`` endpoint for a configuration's pools, replicas and breakers.

An application exposes its own traffic with ``ddm_core.metrics.install`` and
``ddm_core.metrics.serve``; this command is the sidecar form: its own executor
(replica lag monitor on), so replica lag, breaker state and pool figures of a
configuration can be scraped without touching the application
(docs/observability.md#ddm-metrics-serve).
"""

from __future__ import annotations

import signal
import threading
from types import FrameType

import click

from ddm_core.cli.app import cli, config_option, load, needs_extra
from ddm_core.execute.executor import Executor

__all__ = ["metrics_group"]


@cli.group("metrics")
def metrics_group() -> None:
    """Prometheus metrics (needs the 'metrics' extra: pip install 'ddm-core[metrics]')."""


@metrics_group.command("serve")
@config_option()
@click.option("--port", type=click.IntRange(1, 65535), required=True, help="Port of the /metrics endpoint.")
@click.option("--addr", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--warm-up/--no-warm-up", default=True, show_default=True,
              help="Open every endpoint's minIdle connections at start, so pools report from the first scrape.")
@needs_extra("metrics")
def serve_cmd(config_path: str, port: int, addr: str, warm_up: bool) -> None:
    """Serve http://ADDR:PORT/metrics until stopped (SIGTERM / Ctrl-C)."""
    from ddm_core import metrics

    config = load(config_path, check_env=True)
    stopped = threading.Event()

    def stop(signum: int, frame: FrameType | None) -> None:
        stopped.set()

    with Executor(config, load_schema=False) as executor:
        installed = metrics.install(executor=executor)
        if warm_up:
            executor.warm_up()
        server = metrics.serve(installed, port=port, addr=addr)
        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        click.echo(f"metrics: http://{addr}:{port}/metrics", err=True)
        try:
            stopped.wait()
        finally:
            server.shutdown()
            installed.uninstall()
