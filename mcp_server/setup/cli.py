"""The command line: the stdio or HTTP server, `check` or `install`.

argv + environment → Config → the server. `main(argv) -> int`.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mcp_server import __version__
from mcp_server.ops import logs, signals
from mcp_server.setup.config import Config, ConfigError, from_env, parse_args

if TYPE_CHECKING:
    import socket

    from mcp_server.core.protocol import Dispatcher

log = logging.getLogger("fairwins_mcp")


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else list(argv)
    if words[:1] == ["install"]:
        from mcp_server.setup import install  # deferred: serving never loads the installer

        return install.main(words[1:])
    args = parse_args(words)
    try:
        config = from_env(os.environ, args)
    except ConfigError as exc:
        sys.stderr.write(f"fairwins-mcp: {exc}\n")
        return 2
    if args.command == "check":
        return _check(config)
    refusal = _refusal(config)
    if refusal is not None:
        sys.stderr.write(f"fairwins-mcp: {refusal}\n")
        return 2
    if config.http_port is None:
        # Held back until stdio.run has its handlers in place (it answers what was read, then
        # exits 0), so that a stop during start-up is no KeyboardInterrupt traceback.
        signals.block()
    logs.configure(config.log_level, config.log_format, config.trace_project)
    if config.http_workers is not None:
        logs.mark_pid()  # several processes share this stderr: each JSON record names its own
    if config.api_token:
        logs.register_secret(config.api_token)
    from mcp_server.setup.server import build_dispatcher  # after logging, so snapshot problems are reported there

    dispatcher = build_dispatcher(config)
    _announce(config)
    if config.http_port is not None:
        return _serve_http(config, dispatcher)
    from mcp_server.transports import stdio  # deferred: the stdio path never loads the HTTP server code

    return stdio.serve(dispatcher, bearer=config.api_token, workers=config.workers)


def _check(config: Config) -> int:
    """`fairwins-mcp check`: the doctor's report, logging as serving has it."""
    from mcp_server.setup import doctor  # deferred, like the transports: serving never loads it

    logs.configure(config.log_level, config.log_format, config.trace_project)
    if config.api_token:
        logs.register_secret(config.api_token)
    return doctor.run(config, sys.stdout)


def _refusal(config: Config) -> str | None:
    """Why this configuration must not start serving, or None."""
    if config.http_port is not None and config.api_token and not config.allow_shared_token:
        return (
            "refusing to start: FAIRWINS_API_TOKEN is set and --http would let every caller "
            "that can reach the port act as that member; unset it (callers send their own "
            "Authorization: Bearer header) or pass --allow-shared-token if one shared identity is intended."
        )
    if config.http_workers is not None:
        from mcp_server.ops.workers import unsupported

        return unsupported()
    return None


def _announce(config: Config) -> None:
    """Logs what this server talks to, and each option that weakens a guard."""
    log.info(
        "fairwins-mcp %s; gateway %s; token %s",
        __version__,
        config.api_url or "not configured (FAIRWINS_API_URL is not set)",
        logs.redact(config.api_token),
    )
    if config.oauth is not None:
        log.info(
            "OAuth mode: tokens for %s from %s; where to sign in: %s",
            config.oauth.resource,
            config.oauth.issuer,
            config.oauth.metadata_url,
        )
    if config.both_doors:
        log.warning(
            "--accept-fw1-tokens: a member's fw1. token is forwarded unchecked beside the access tokens "
            "(a token not issued for this server: docs/authorization.md)"
        )
    if config.send_token_in_clear and (config.api_url or "").lower().startswith("http://"):
        log.warning("--send-token-in-clear: member tokens and payments go to %s unencrypted", config.api_url)


def _serve_http(config: Config, dispatcher: Dispatcher) -> int:
    """Serve Streamable HTTP, alone or as a workers' supervisor; the exit code."""
    import shutil
    import tempfile

    from mcp_server.ops import heap, listener, workers
    from mcp_server.transports.http.admission import SLOT_WAIT
    from mcp_server.transports.http.drain import Timings
    from mcp_server.transports.http.server import METRICS_DRAIN_LIMIT, announce_metrics, serve

    try:
        sock = listener.listen(config.host, config.http_port or 0)
    except OSError as exc:
        sys.stderr.write(f"fairwins-mcp: cannot listen on {config.host}:{config.http_port}: {exc}\n")
        return 1
    # Bound here, before any fork, like the MCP socket: every worker accepts scrapes from the one queue.
    metrics_sock: socket.socket | None = None
    if config.metrics_address is not None:
        host, port = config.metrics_address
        try:
            metrics_sock = listener.listen(host, port)
        except OSError as exc:
            sock.close()
            shown = f"[{host}]" if ":" in host else host
            sys.stderr.write(f"fairwins-mcp: cannot listen on {shown}:{port} for --metrics: {exc}\n")
            return 1
    # The request limit covers the gateway deadline, a wait for a slot, and writing the answer.
    grace = config.timeout + SLOT_WAIT + 5
    timings = Timings(config.idle_timeout, config.drain_idle, config.prestop_delay, grace)

    # With workers, each publishes its figures here, so that whichever one a scrape reaches answers for all.
    metrics_dir = (
        tempfile.mkdtemp(prefix="fairwins-mcp-metrics-") if config.metrics and config.http_workers is not None else None
    )

    def run(inherited: socket.socket, lifeline: workers.Lifeline | None) -> int:
        # In each worker after its fork (or in the one process): a crowd's waiting calls must not
        # make every call's share of the garbage collector grow with the crowd (ops/heap.py).
        heap.settle()
        door = None
        if config.oauth is not None:
            from mcp_server.transports.http.door import Door  # OAuth mode alone loads the token checks

            oauth = config.oauth
            scopes = dispatcher.member_scopes()
            door = Door(
                oauth.resource,
                oauth.metadata_url,
                oauth.issuer,
                scopes,
                timeout=config.timeout,
                member_tokens=config.both_doors,
            )
        try:
            return serve(
                dispatcher,
                host=config.host,
                port=config.http_port or 0,
                allowed_origins=config.allowed_origins,
                env_bearer=config.api_token,
                max_concurrency=config.max_concurrency,
                max_body=config.max_body_bytes,
                grace=grace,
                max_peer_connections=config.max_peer_connections,
                max_peer_heads=config.max_peer_heads,
                listener=inherited,
                lifeline=lifeline,
                timings=timings,
                metrics_on_mcp_port=config.metrics_on_mcp_port,
                metrics_listener=metrics_sock,
                metrics_dir=metrics_dir,
                door=door,
            )
        finally:
            logs.flush()  # a worker leaves by os._exit: no atexit writes what is still queued

    if config.http_workers is None:
        return run(sock, None)
    from mcp_server.ops import cpus

    count = config.http_workers or cpus.available()
    host, port = sock.getsockname()[:2]
    url = f"http://{f'[{host}]' if ':' in host else host}:{port}/mcp"
    log.info(
        "fairwins-mcp listening on %s (health: %s) with %d worker%s%s",
        url,
        url.replace("/mcp", "/healthz"),
        count,
        "" if count == 1 else "s",
        " (auto: the CPUs this process may use)" if not config.http_workers else "",
    )
    announce_metrics(sock.getsockname(), metrics_sock, config.metrics_on_mcp_port, summed=True)
    logs.write_in_place()  # the supervisor forks, so it runs no thread: not even a log writer
    try:
        others = () if metrics_sock is None else (metrics_sock,)
        stop_timeout = timings.total + 5 + (METRICS_DRAIN_LIMIT if others else 0)
        return workers.supervise(sock, count, run, stop_timeout=stop_timeout, others=others)
    finally:
        if metrics_dir is not None:
            shutil.rmtree(metrics_dir, ignore_errors=True)
