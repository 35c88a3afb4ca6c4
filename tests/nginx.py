"""A real nginx in front of test servers, in a temp dir, on a free port: a pooled proxy, or an operator's config.

nginx is Debian's `nginx-light`, installed by `make test` (tests/tools/apt.sh) when it is missing;
a missing nginx fails the test that needs it, loudly. It runs as one unprivileged-safe process
(`master_process off`, no user switch, no privileged port): its config, pid file, error log and
temp paths all live in its own temp dir, and `Nginx.close()` stops it, from a `finally`. Its access
log names the upstream that answered each request (`access_log()`), which is how a test knows a
restarted replica is back in rotation. `check()` is `nginx -t` on an http-level config, the way
an operator's file in /etc/nginx/conf.d/ is read; `check_in_conf_d()` reads it inside Debian's own
nginx.conf.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

START_TIMEOUT: Final = 30.0  # a bound, never a delay: a loaded machine (make test on every core) starts nginx slowly
ATTEMPTS: Final = 5  # a free port can be taken by someone else before nginx binds it: try again

# The main context around an http-level config: one process, no user switch, every path in `dir`.
MAIN: Final = """\
master_process off;
daemon off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log info;
events {{ worker_connections 1024; }}
http {{
    log_format upstreams '$msec $status $request_method $upstream_addr $upstream_status';
    access_log {dir}/access.log upstreams;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    include {http};
}}
"""

# The tests' own stock reverse proxy: pooled upstream keep-alive to the servers.
POOLED: Final = """\
upstream mcp {{
{servers}
    keepalive 32;{keepalive_timeout}
}}
server {{
    listen 127.0.0.1:{port};
    location / {{
        proxy_pass http://mcp;
        proxy_http_version 1.1;
        proxy_set_header Connection "";
        proxy_set_header Host localhost;
    }}
}}
"""


@dataclass(frozen=True)
class Logged:
    """One access-log line: when, what nginx answered, and each upstream tried with its status, in order."""

    at: float  # seconds since the epoch
    status: int
    method: str
    upstreams: tuple[str, ...]
    upstream_statuses: tuple[str, ...]


def parse_access_line(line: str) -> Logged | None:
    """`$msec $status $request_method $upstream_addr $upstream_status`; nginx joins retried upstreams with ", "."""
    words = line.split(" ", 3)
    if len(words) != 4:
        return None
    at, status, method, rest = words
    tokens = rest.split(" ")
    # "a, b 502, 200": the addresses end at the first token without a trailing comma.
    cut = next((i + 1 for i, token in enumerate(tokens) if not token.endswith(",")), len(tokens))
    addresses = tuple(t.rstrip(",") for t in tokens[:cut])
    statuses = tuple(t.rstrip(",") for t in tokens[cut:])
    if not status.isdigit() or len(addresses) != len(statuses):
        return None
    return Logged(float(at), int(status), method, addresses, statuses)


def nginx_binary() -> str:
    found = shutil.which("nginx") or ("/usr/sbin/nginx" if os.access("/usr/sbin/nginx", os.X_OK) else None)
    if found is None:
        raise AssertionError(
            "nginx is not installed: `make test` installs it (bash tests/tools/apt.sh nginx nginx-light)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def write_config(directory: Path, http: str) -> Path:
    """nginx.conf in `directory`: the main context (MAIN), with `http` as the http-level config, included."""
    (directory / "http.conf").write_text(http, encoding="utf-8")
    conf = directory / "nginx.conf"
    conf.write_text(MAIN.format(dir=directory, http=directory / "http.conf"), encoding="utf-8")
    return conf


def check(http: str) -> subprocess.CompletedProcess[str]:
    """`nginx -t` on `http` as the http-level config (what a file in /etc/nginx/conf.d/ is); its verdict on stderr.

    `nginx -t` binds every `listen` address to test it: give it free loopback ones."""
    binary = nginx_binary()
    with tempfile.TemporaryDirectory(prefix="fairwins-nginx-t-") as tmp:
        directory = Path(tmp)
        conf = write_config(directory, http)
        return subprocess.run(
            [binary, "-t", "-p", str(directory), "-c", str(conf), "-e", str(directory / "error.log")],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


def pooled(ports: Sequence[int], keepalive_timeout: str | None) -> Callable[[int], str]:
    """POOLED in front of the servers on 127.0.0.1:`ports`, for the port nginx listens on."""
    assert ports, "no upstream to proxy to"
    servers = "\n".join(f"    server 127.0.0.1:{p};" for p in ports)
    keepalive = f"\n    keepalive_timeout {keepalive_timeout};" if keepalive_timeout else ""
    return lambda port: POOLED.format(servers=servers, keepalive_timeout=keepalive, port=port)


DEBIAN_CONF: Final = Path("/etc/nginx/nginx.conf")
CONF_D: Final = "include /etc/nginx/conf.d/*.conf;"
SITES: Final = "include /etc/nginx/sites-enabled/*;"


def check_in_conf_d(http: str) -> subprocess.CompletedProcess[str]:
    """`nginx -t` on the machine's own /etc/nginx/nginx.conf (Debian's, from nginx-common) with `http` as
    the one file in its conf.d/, beside its stock http settings, as an operator drops it in. What it
    writes (logs, pid) moves to a temp dir, and its sites (the default one listens on port 80, which
    `nginx -t` binds) are left out, so it runs unprivileged."""
    binary = nginx_binary()
    stock = DEBIAN_CONF.read_text(encoding="utf-8")
    assert stock.count(CONF_D) == 1 and stock.count(SITES) == 1, f"{DEBIAN_CONF} is not Debian's stock nginx.conf"
    with tempfile.TemporaryDirectory(prefix="fairwins-nginx-conf-d-") as tmp:
        directory = Path(tmp)
        (directory / "fairwins-mcp.conf").write_text(http, encoding="utf-8")
        conf = stock.replace(CONF_D, f"include {directory}/fairwins-mcp.conf;").replace(SITES, "")
        conf = conf.replace("/var/log/nginx/", f"{directory}/").replace("/run/nginx.pid", f"{directory}/nginx.pid")
        (directory / "nginx.conf").write_text(conf, encoding="utf-8")
        return subprocess.run(
            [binary, "-t", "-c", str(directory / "nginx.conf"), "-e", str(directory / "error.log")],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


class Nginx:
    """nginx listening on 127.0.0.1 on a free port, until `close()`.

    By default it proxies to the servers on 127.0.0.1:`upstream` (one port, or several), keep-alive
    pooled (POOLED); `keepalive_timeout`: how long it keeps an idle upstream connection (nginx's
    default, 60 s, when None). `http` replaces that config: given the port to listen on, it returns
    the http-level config to run (an operator's, from the README).
    """

    def __init__(
        self,
        upstream: int | Sequence[int] = (),
        *,
        keepalive_timeout: str | None = None,
        http: Callable[[int], str] | None = None,
    ) -> None:
        if http is None:
            http = pooled([upstream] if isinstance(upstream, int) else list(upstream), keepalive_timeout)
        self.dir = Path(tempfile.mkdtemp(prefix="fairwins-nginx-"))
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        binary = nginx_binary()
        try:
            for _ in range(ATTEMPTS):
                self.port = _free_port()
                conf = write_config(self.dir, http(self.port))
                self.proc = subprocess.Popen(
                    [binary, "-p", str(self.dir), "-c", str(conf), "-e", str(self.dir / "error.log")],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
                if self._wait_listening():
                    return
                self._stop()
            raise AssertionError(f"nginx did not start in {ATTEMPTS} attempts:\n{self.error_log()}")
        except BaseException:
            self.close()
            raise

    def _wait_listening(self) -> bool:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return False  # most likely the port was taken meanwhile
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                return True
            except OSError:
                time.sleep(0.02)
        return False

    def error_log(self) -> str:
        stderr = b""
        if self.proc is not None and self.proc.stderr is not None and self.proc.poll() is not None:
            stderr = self.proc.stderr.read()
        try:
            log = (self.dir / "error.log").read_text(errors="replace")
        except OSError:
            log = ""
        return (stderr.decode(errors="replace") + log)[-3000:]

    def access_log(self) -> list[Logged]:
        try:
            text = (self.dir / "access.log").read_text(errors="replace")
        except OSError:
            return []
        return [entry for line in text.splitlines() if (entry := parse_access_line(line))]

    def _stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGQUIT)  # graceful: finish what is in flight, then exit
            try:
                proc.wait(START_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(START_TIMEOUT)
        if proc.stderr is not None:
            proc.stderr.close()

    def close(self) -> None:
        try:
            self._stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> Nginx:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
