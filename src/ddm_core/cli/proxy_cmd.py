"""``ddm proxy``: serve a configuration over the MySQL protocol (docs/proxy.md)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from typing import Any

import click

from ddm_core.cli.app import cli, config_option, load, needs_extra
from ddm_core.metadata.reload import ConfigHolder

__all__ = ["proxy", "LOOP_CHOICES"]

#: ``--loop``: the choices of ``ddm_core.proxy.eventloop.LOOPS``, spelled here because the proxy
#: package (mysql-mimic) is imported only once the command runs, and ``--help`` must work without it.
LOOP_CHOICES = ("auto", "uvloop", "asyncio")

#: Set in the processes ``--processes N`` starts: listen with SO_REUSEPORT on the given port.
_CHILD_ENV = "DDM_PROXY_CHILD"


@cli.command()
@config_option()
@click.option("--port", "-P", type=click.IntRange(0, 65535), default=3307, show_default=True,
              help="TCP port to listen on (0: any free port, printed on start).")
@click.option("--host", "-H", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--processes", type=click.IntRange(1, 64), default=1, show_default=True,
              help="Proxy processes sharing the port (SO_REUSEPORT), each with its own pools.")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info",
              show_default=True, help="Log level of the proxy's messages (stderr).")
@click.option("--reload-interval", type=click.FloatRange(0), default=1.0, show_default=True,
              help="Seconds between looks at CONFIG for a new version (hot reload, docs/proxy.md#reloading; "
                   "0: never).")  # fmt: skip
@click.option("--loop", "loop_name", type=click.Choice(LOOP_CHOICES), default="auto", show_default=True,
              help="Event loop: uvloop (in C; auto picks it when installed) or asyncio's own.")
@needs_extra("proxy")
def proxy(config_path: str, port: int, host: str, processes: int, log_level: str, reload_interval: float,
          loop_name: str) -> None:  # fmt: skip
    """Serve CONFIG's logic tables to any MySQL client (users from its proxy: section).

    \b
      ddm proxy -c orders.yaml --port 3307
      mysql -h 127.0.0.1 -P 3307 -u app -p

    SIGTERM stops accepting, lets running statements finish (proxy.shutdownGraceMs),
    ends the sessions and returns every backend connection.
    """
    from ddm_core.proxy import ProxyServer
    from ddm_core.proxy.eventloop import chosen
    from ddm_core.proxy.eventloop import run as run_loop

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # mimic logs every refused statement at ERROR with its text; the proxy reports errors to clients.
    logging.getLogger("mysql_mimic").setLevel(logging.CRITICAL)
    config = load(config_path, check_env=True)
    loop = chosen(loop_name)
    if processes > 1:
        sys.exit(_run_processes(config_path, host, port, processes, log_level, reload_interval, loop))

    async def run() -> None:
        # The executor and the proxy section follow the file's versions (ConfigHolder, as the library does).
        holder = ConfigHolder(config_path, check_env=True) if reload_interval else None
        server = ProxyServer(holder or config, host=host, port=port, reuse_port=os.environ.get(_CHILD_ENV) == "1")
        await server.start()
        click.echo(f"ddm proxy listening on {host}:{server.port} (event loop: {loop})", err=True)
        if holder is not None:
            holder.watch(reload_interval)
        try:
            await server.serve_until_signalled()
        finally:
            if holder is not None:
                holder.stop()

    run_loop(run(), loop)


def _run_processes(config_path: str, host: str, port: int, processes: int, log_level: str,
                   reload_interval: float, loop: str) -> int:  # fmt: skip
    """Start ``processes`` proxies on one port, pass SIGTERM / SIGINT on, return the worst exit status."""
    holder: socket.socket | None = None
    if port == 0:
        # Pick the port once for every process; the bound (not listening) socket keeps it ours.
        holder = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((host, 0))
        port = int(holder.getsockname()[1])
    argv = [sys.executable, "-m", "ddm_core.cli", "proxy", "-c", config_path, "--host", host, "--port", str(port),
            "--log-level", log_level, "--reload-interval", str(reload_interval), "--loop", loop]  # fmt: skip
    children = [subprocess.Popen(argv, env={**os.environ, _CHILD_ENV: "1"}) for _ in range(processes)]

    def forward(signum: int, _frame: Any) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    try:
        return max(child.wait() for child in children)
    finally:
        if holder is not None:
            holder.close()
