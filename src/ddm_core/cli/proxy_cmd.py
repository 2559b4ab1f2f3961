"""``ddm proxy``: serve a configuration over the MySQL protocol (docs/proxy.md)."""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
from typing import Any, Callable

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
@config_option(required=False)
@click.option("--follow", "follow_url", metavar="URL",
              help="Follow a configuration center instead of a file: redis://host:6379/0 (with --prefix) or "
                   "etcd://host:2379/ddm/config (docs/configuration.md); every version published there is taken "
                   "and the proxy registers itself as an instance (ddm instances).")  # fmt: skip
@click.option("--prefix", help="With a redis:// --follow: the key prefix of its versions (default ddm:config).")
@click.option("--group", help="With --follow: the rollout group this proxy takes its versions from.")
@click.option("--snapshot", type=click.Path(dir_okay=False),
              help="With --follow: a local file keeping the last version taken, served when the center cannot be "
                   "reached at start.")  # fmt: skip
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
def proxy(config_path: str | None, follow_url: str | None, prefix: str | None, group: str | None,
          snapshot: str | None, port: int, host: str, processes: int, log_level: str, reload_interval: float,
          loop_name: str) -> None:  # fmt: skip
    """Serve CONFIG's logic tables to any MySQL client (users from its proxy: section).

    \b
      ddm proxy -c orders.yaml --port 3307
      ddm proxy --follow etcd://127.0.0.1:2379/ddm/config --port 3307
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
    source_args = _source_args(config_path, follow_url, prefix, group, snapshot)
    loop = chosen(loop_name)
    if processes > 1:
        sys.exit(_run_processes(source_args, host, port, processes, log_level, reload_interval, loop))
    holder, stop_following = _open(config_path, follow_url, prefix, group, snapshot, reload_interval)

    async def run() -> None:
        server = ProxyServer(holder, host=host, port=port, reuse_port=os.environ.get(_CHILD_ENV) == "1")
        await server.start()
        click.echo(f"ddm proxy listening on {host}:{server.port} (event loop: {loop})", err=True)
        if isinstance(holder, ConfigHolder) and stop_following is None:
            holder.watch(reload_interval)  # a file: looked at every reload interval
        try:
            await server.serve_until_signalled()
        finally:
            if stop_following is not None:
                stop_following()
            elif isinstance(holder, ConfigHolder):
                holder.stop()

    run_loop(run(), loop)


def _source_args(config_path: str | None, follow_url: str | None, prefix: str | None, group: str | None,
                 snapshot: str | None) -> list[str]:  # fmt: skip
    """The arguments naming the configuration (checked: a file or a center, the center's options only with one)."""
    if (config_path is None) == (follow_url is None):
        raise click.UsageError("give the configuration as a file (-c / $DDM_CONFIG) or a center to follow "
                               "(--follow URL), one of the two")  # fmt: skip
    if follow_url is None:
        given = [name for name, value in (("--prefix", prefix), ("--group", group), ("--snapshot", snapshot)) if value]
        if given:
            raise click.UsageError(f"{', '.join(given)} belong(s) to --follow, not to a configuration file")
        return ["-c", str(config_path)]
    args = ["--follow", follow_url]
    for name, value in (("--prefix", prefix), ("--group", group), ("--snapshot", snapshot)):
        if value is not None:
            args += [name, value]
    return args


def _open(config_path: str | None, follow_url: str | None, prefix: str | None, group: str | None,
          snapshot: str | None, reload_interval: float) -> tuple[Any, Callable[[], None] | None]:  # fmt: skip
    """What the server serves: a holder following the center (and how to stop it), a holder of the file's
    versions (hot reload), or the file's configuration once (``--reload-interval 0``)."""
    if follow_url is None:
        assert config_path is not None
        config = load(config_path, check_env=True)  # a bad file is refused here, with its problems listed
        return (ConfigHolder(config_path, check_env=True) if reload_interval else config), None
    from ddm_core.config_center import open_config

    options = {name: value for name, value in (("prefix", prefix), ("group", group), ("snapshot", snapshot))
               if value is not None}  # fmt: skip
    return open_config(follow_url, options)


def _run_processes(source_args: list[str], host: str, port: int, processes: int, log_level: str,
                   reload_interval: float, loop: str) -> int:  # fmt: skip
    """Start ``processes`` proxies on one port, pass SIGTERM / SIGINT on, return the worst exit status."""
    holder: socket.socket | None = None
    if port == 0:
        # Pick the port once for every process; the bound (not listening) socket keeps it ours.
        holder = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        holder.bind((host, 0))
        port = int(holder.getsockname()[1])
    argv = [sys.executable, "-m", "ddm_core.cli", "proxy", *source_args, "--host", host, "--port", str(port),
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
