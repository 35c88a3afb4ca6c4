"""The hosted door with real parts: a rolling restart behind a stock nginx, and a crowd at the server's defaults."""

from __future__ import annotations

from tests.balancer import (
    Gateway,
    Load,
    Replica,
    distinct_ports,
    drained_counts,
    pick_port,
    restart_in_turn,
    start_replica,
    summary,
    wait_for,
)
from tests.conftest import NGINX
from tests.nginx import Nginx

pytestmark = NGINX

REPLICAS = 3
# The middle replica runs as the image does, with worker processes: its drain is the supervisor's.
REPLICA_ARGS: tuple[tuple[str, ...], ...] = ((), ("--workers", "2"), ())
MEMBERS = 16
GATEWAY_DELAY = 0.05  # seconds: every call waits on the gateway, so a SIGTERM always finds calls in flight


def test_a_rolling_restart_behind_a_stock_nginx_fails_no_request() -> None:
    gateway = Gateway(GATEWAY_DELAY)
    replicas: list[Replica] = []
    try:
        ports = distinct_ports(REPLICAS)
        replicas = [start_replica(port, gateway.url, REPLICA_ARGS[i]) for i, port in enumerate(ports)]
        # A stock reverse proxy (keepalive 32, proxy_http_version 1.1, Connection "", nginx's default
        # proxy_next_upstream and passive health), its upstream keep-alive shorter than the server's
        # drain grace, as docs/hosting.md says to set it.
        with Nginx(ports, keepalive_timeout="5s") as lb:
            load = Load(lb.port, MEMBERS).start()
            try:
                wait_for(lambda: load.total >= 300, "the load to get going", 60)
                logs = restart_in_turn(replicas, REPLICA_ARGS, gateway.url, lb, lambda: load.total, until_loaded=3)
                settled = load.total
                wait_for(lambda: load.total >= settled + 300, "the load to go on after the last restart", 60)
            finally:
                load.stop()
            assert not load.failures, summary(load, nginx_errors=lb.error_log()[-3000:])
            for log in logs:
                # Each replica's drain was tested under load, not idle: its last stop met calls in flight.
                assert sum(drained_counts(log)) > 0, log[-3000:]
            print("\n".join(log[log.find("stopping:") :] for log in logs))
            served_by = {entry.upstreams[-1] for entry in lb.access_log()}
            assert served_by == {f"127.0.0.1:{port}" for port in ports}
    finally:
        for replica in replicas:
            replica.kill()
        gateway.kill()


CROWD = 256
CROWD_DELAY = 0.2  # seconds: a gateway answering in 200 ms
CALLS_EACH = 4


def test_the_server_at_its_defaults_holds_256_members_against_a_slow_gateway() -> None:
    gateway = Gateway(CROWD_DELAY)
    replica: Replica | None = None
    try:
        replica = start_replica(pick_port(), gateway.url)  # no setting changed: the defaults
        crowd = Load(replica.port, CROWD).start()
        try:
            # Every member has been answered at least once, so all of them are connected and calling.
            wait_for(lambda: crowd.members_heard == CROWD, "the crowd to gather", 120)
            one = Load(replica.port, 1).start()
            try:
                wait_for(lambda: one.total >= 1, "one more member's call to be answered in the crowd", 60)
            finally:
                one.stop()
            assert one.ok >= 1 and not one.failures, summary(one)
            wait_for(lambda: crowd.total >= CROWD * CALLS_EACH, "the crowd's calls", 180)
        finally:
            crowd.stop()
        assert not crowd.failures, summary(crowd)
    finally:
        if replica is not None:
            replica.kill()
        gateway.kill()
