"""Prometheus metrics kept in memory, and their text exposition.

Counters, gauges and histograms. Everything is per process and thread-safe (one lock per family,
held for a dict update). The exposition is the Prometheus text format 0.0.4, rendered from
snapshots, so the figures of several processes can be summed into one answer. `ServerMetrics` is
the one table of what this server counts; every label value it takes comes from a fixed set (never
a member, a token, an argument).
"""

from __future__ import annotations

import asyncio
import bisect
import json
import math
import os
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Final, TypeVar

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
# Seconds, from a loopback stub (well under 1 ms) to the longest gateway deadline (300 s).
LATENCY_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

Labels = tuple[str, ...]


@dataclass(slots=True)
class Family:
    """One metric family as a plain value: what a scrape renders and sums."""

    name: str
    kind: str  # "counter", "gauge" or "histogram"
    help: str
    label_names: Labels
    samples: dict[Labels, float] = field(default_factory=dict)  # counters and gauges
    buckets: tuple[float, ...] = ()
    # histograms: per label set, (count in each bucket, not cumulative, +Inf last; sum)
    histograms: dict[Labels, tuple[list[int], float]] = field(default_factory=dict)
    summed: bool = True  # across processes: summed (counts, requests in flight), else the largest (build info)


class _Metric:
    kind = ""

    def __init__(self, name: str, help: str, label_names: Labels = ()) -> None:
        self.name, self.help, self.label_names = name, help, label_names
        self._lock = threading.Lock()
        self._values: dict[Labels, float] = {}

    def _check(self, labels: Labels) -> None:
        if len(labels) != len(self.label_names):
            raise ValueError(f"{self.name} takes labels {self.label_names}, not {labels}")

    def collect(self) -> Family:
        with self._lock:
            values = dict(self._values)
        return Family(self.name, self.kind, self.help, self.label_names, values)


class Counter(_Metric):
    kind = "counter"

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def init(self, *labels: str) -> None:
        """Show this label set at 0 at once, so rate() sees its first increase."""
        self._check(labels)
        with self._lock:
            self._values.setdefault(labels, 0.0)


class Gauge(_Metric):
    kind = "gauge"

    def __init__(self, name: str, help: str, label_names: Labels = (), *, summed: bool = True) -> None:
        super().__init__(name, help, label_names)
        self._function: Callable[[], float] | None = None
        self.summed = summed

    def set(self, value: float, *labels: str) -> None:
        with self._lock:
            self._values[labels] = value

    def set_function(self, function: Callable[[], float]) -> None:
        """Read the (unlabelled) value at scrape time: nothing to keep set."""
        self._function = function

    def collect(self) -> Family:
        family = super().collect()
        family.summed = self.summed
        if self._function is not None:
            family.samples[()] = float(self._function())
        return family


class Histogram(_Metric):
    kind = "histogram"

    def __init__(
        self, name: str, help: str, label_names: Labels = (), buckets: Sequence[float] = LATENCY_BUCKETS
    ) -> None:
        super().__init__(name, help, label_names)
        self.buckets = tuple(sorted(buckets))
        self._histograms: dict[Labels, tuple[list[int], list[float]]] = {}

    def observe(self, value: float, *labels: str) -> None:
        # A value equal to a bound belongs to that bucket ("le": less than or equal).
        index = bisect.bisect_left(self.buckets, value)
        with self._lock:
            entry = self._histograms.get(labels)
            if entry is None:
                entry = self._histograms[labels] = ([0] * (len(self.buckets) + 1), [0.0])
            entry[0][index] += 1
            entry[1][0] += value

    def collect(self) -> Family:
        with self._lock:
            histograms = {k: (list(counts), total[0]) for k, (counts, total) in self._histograms.items()}
        return Family(self.name, self.kind, self.help, self.label_names, buckets=self.buckets, histograms=histograms)


M = TypeVar("M", bound=_Metric)


class Registry:
    """The metrics of one process, rendered in the order they were made."""

    def __init__(self) -> None:
        self._metrics: list[_Metric] = []

    def _add(self, metric: M) -> M:
        if any(m.name == metric.name for m in self._metrics):
            raise ValueError(f"metric {metric.name} exists already")
        self._metrics.append(metric)
        return metric

    def counter(self, name: str, help: str, label_names: Labels = ()) -> Counter:
        return self._add(Counter(name, help, label_names))

    def gauge(self, name: str, help: str, label_names: Labels = (), *, summed: bool = True) -> Gauge:
        return self._add(Gauge(name, help, label_names, summed=summed))

    def histogram(
        self, name: str, help: str, label_names: Labels = (), buckets: Sequence[float] = LATENCY_BUCKETS
    ) -> Histogram:
        return self._add(Histogram(name, help, label_names, buckets))

    def collect(self) -> list[Family]:
        return [m.collect() for m in self._metrics]

    def render(self) -> str:
        return render([self.collect()])


# ---- the text exposition format ------------------------------------------------------------------


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_value(text: str) -> str:
    return _escape_help(text).replace('"', '\\"')


def _number(value: float) -> str:
    value = float(value)  # a gauge may have been set to an int
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    if math.isnan(value):
        return "NaN"
    return str(int(value)) if value.is_integer() and abs(value) < 2**53 else repr(value)


def _labels(names: Labels, values: Labels, extra: str = "") -> str:
    pairs = [f'{n}="{_escape_value(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        pairs.append(extra)
    return "{" + ",".join(pairs) + "}" if pairs else ""


def merge(snapshots: Iterable[list[Family]]) -> list[Family]:
    """Several processes' families summed: counters, gauges and histograms."""
    merged: dict[str, Family] = {}
    for families in snapshots:
        for family in families:
            into = merged.get(family.name)
            if into is None:
                into = merged[family.name] = replace(family, samples={}, histograms={})
            if into.kind != family.kind or into.buckets != family.buckets:
                raise ValueError(f"metric {family.name} differs between snapshots")
            for labels, value in family.samples.items():
                seen = into.samples.get(labels)
                if seen is None:
                    into.samples[labels] = value
                else:
                    into.samples[labels] = seen + value if into.summed else max(seen, value)
            for labels, (counts, total) in family.histograms.items():
                have = into.histograms.get(labels)
                if have is None:
                    into.histograms[labels] = (list(counts), total)
                else:
                    into.histograms[labels] = ([a + b for a, b in zip(have[0], counts, strict=True)], have[1] + total)
    return list(merged.values())


def dump(families: list[Family]) -> str:
    """A snapshot as JSON text: what a worker leaves for the others to read."""
    return json.dumps(
        [
            {
                "name": f.name,
                "kind": f.kind,
                "help": f.help,
                "labels": list(f.label_names),
                "buckets": list(f.buckets),
                "summed": f.summed,
                "samples": [[list(k), v] for k, v in f.samples.items()],
                "histograms": [[list(k), counts, total] for k, (counts, total) in f.histograms.items()],
            }
            for f in families
        ],
        separators=(",", ":"),
    )


def load(text: str) -> list[Family]:
    """dump's text back as families; ValueError when it is not dump's."""
    try:
        return [
            Family(
                str(f["name"]),
                str(f["kind"]),
                str(f["help"]),
                tuple(f["labels"]),
                {tuple(k): float(v) for k, v in f["samples"]},
                tuple(float(b) for b in f["buckets"]),
                {tuple(k): ([int(c) for c in counts], float(total)) for k, counts, total in f["histograms"]},
                bool(f["summed"]),
            )
            for f in json.loads(text)
        ]
    except (KeyError, TypeError) as exc:
        raise ValueError(f"not a metrics snapshot: {exc}") from None


def render(snapshots: Iterable[list[Family]]) -> str:
    """The summed snapshots as Prometheus text (format 0.0.4), newline-ended."""
    lines: list[str] = []
    for family in merge(snapshots):
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        if family.kind != "histogram":
            for labels, value in sorted(family.samples.items()):
                lines.append(f"{family.name}{_labels(family.label_names, labels)} {_number(value)}")
            continue
        for labels, (counts, total) in sorted(family.histograms.items()):
            running = 0
            for bound, count in zip((*family.buckets, math.inf), counts, strict=True):
                running += count
                le = f'le="{_number(bound)}"' if not math.isinf(bound) else 'le="+Inf"'
                lines.append(f"{family.name}_bucket{_labels(family.label_names, labels, le)} {running}")
            lines.append(f"{family.name}_sum{_labels(family.label_names, labels)} {_number(total)}")
            lines.append(f"{family.name}_count{_labels(family.label_names, labels)} {running}")
    return "\n".join(lines) + "\n"


# ---- what this server counts ---------------------------------------------------------------------

# Label values come from fixed sets only (these, and records.METHODS, NOTIFICATIONS,
# GATEWAY_CAUSES and FAILURE_KINDS); anything else is counted under "other".
REQUEST_OUTCOMES: Final = ("result", "tool_error", "error", "cancelled")
REFUSAL_REASONS: Final = ("busy", "gate", "size", "timeout", "malformed", "draining", "sign_in")
PAYMENT_OUTCOMES: Final = ("accepted", "rejected", "failed", "unknown", "not_sent", "refused")
STATUS_CLASSES: Final = ("1xx", "2xx", "3xx", "4xx", "5xx")


PUBLISH_EVERY: Final = 1.0  # seconds between a worker's snapshots: how stale another worker's figures can be


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # alive, and another user's
    return True


def _read_shared(directory: str) -> list[list[Family]]:
    """Every worker's last snapshot.

    A worker that is gone keeps its counts (the totals never go back when it is replaced) but not
    its gauges (it has nothing in flight any more).
    """
    snapshots: list[list[Family]] = []
    try:
        names = os.listdir(directory)
    except OSError:
        return snapshots
    for name in names:
        stem, _, ext = name.partition(".")
        if ext != "json" or not stem.isdigit():
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as fh:
                families = load(fh.read())
        except (OSError, ValueError):
            continue
        if not _alive(int(stem)):
            families = [f for f in families if f.kind != "gauge"]
        snapshots.append(families)
    return snapshots


def bounded(value: str | None, allowed: frozenset[str] | tuple[str, ...], other: str = "other") -> str:
    return value if value is not None and value in allowed else other


# An HTTP refusal's error code (the `error` of its JSON body) → the reason it is counted under.
REFUSALS: Final = {
    "busy": "busy",
    "too_many_connections": "busy",  # a client address over its own share (429)
    "too_many_unfinished_requests": "busy",
    "shutting_down": "draining",
    "request_timeout": "timeout",
    "too_large": "size",
    "headers_too_large": "size",
    "body_too_large": "size",
    "bad_request": "malformed",
    "bad_header": "malformed",
    "bad_framing": "malformed",
    "duplicate_header": "malformed",
    "bad_content_length": "malformed",
    "length_required": "malformed",
    "bad_request_target": "malformed",
    "missing_host": "malformed",
    "http_version_not_supported": "malformed",
    # OAuth mode (docs/authorization.md): a call that needs the member without a token, a token
    # refused, a token without the call's scopes; the authorization server's keys out of reach.
    "sign_in_required": "sign_in",
    "invalid_token": "sign_in",
    "insufficient_scope": "sign_in",
    "authorization_server_unreachable": "busy",
}


def refusal_reason(status: int, error: str | None) -> str | None:
    """Why an HTTP request that never reached MCP was refused, or None."""
    if status < 400:
        return None
    if error in REFUSALS:
        return REFUSALS[error]
    if status == 408:
        return "timeout"
    if status in (413, 414, 431):
        return "size"
    if status in (429, 503):
        return "busy"
    # Host, Origin, method, path, media types, Authorization's form, an unsupported protocol version.
    return "gate"


class ServerMetrics:
    """Every metric the server exports (docs/hosting.md says what each means)."""

    def __init__(self, tools: Iterable[str] = (), version: str = "") -> None:
        self.registry = r = Registry()
        self.tools = frozenset(tools)
        self.build_info = r.gauge(
            "fairwins_mcp_build_info", "The running server's version (always 1)", ("version",), summed=False
        )
        self.build_info.set(1, version)
        self.requests = r.counter(
            "fairwins_mcp_requests_total",
            "MCP requests answered, by method and outcome (result, tool_error, error, cancelled)",
            ("method", "outcome"),
        )
        self.notifications = r.counter(
            "fairwins_mcp_notifications_total", "MCP notifications received, by method", ("method",)
        )
        self.tool_calls = r.counter(
            "fairwins_mcp_tool_calls_total",
            "tools/call requests by tool and outcome (result, a failure kind, error or cancelled)",
            ("tool", "outcome"),
        )
        self.request_seconds = r.histogram(
            "fairwins_mcp_request_duration_seconds",
            "Time from reading an MCP request to its answer, by method",
            ("method",),
        )
        self.gateway_seconds = r.histogram(
            "fairwins_mcp_gateway_request_duration_seconds", "Time of each upstream call to the FairWins gateway"
        )
        self.gateway_responses = r.counter(
            "fairwins_mcp_gateway_responses_total", "Gateway answers by HTTP status class", ("class",)
        )
        self.gateway_failures = r.counter(
            "fairwins_mcp_gateway_failures_total", "Upstream calls that got no answer, by cause", ("cause",)
        )
        self.gateway_retries = r.counter(
            "fairwins_mcp_gateway_retries_total", "Upstream calls repeated after a reset, 429, 502, 503 or 504"
        )
        self.in_flight = r.gauge("fairwins_mcp_requests_in_flight", "HTTP requests being handled now")
        self.refusals = r.counter(
            "fairwins_mcp_http_refusals_total",
            "HTTP requests refused before reaching MCP: busy, gate, size, timeout, malformed, draining",
            ("reason",),
        )
        self.payments = r.counter(
            "fairwins_mcp_payments_total",
            "x402 payments carried for a call, by outcome (counts only, never an amount or a payer)",
            ("outcome",),
        )
        self.initializations = r.counter(
            "fairwins_mcp_initialize_total", "initialize requests by the protocol revision agreed", ("revision",)
        )
        self.gateway_retries.init()
        for reason in REFUSAL_REASONS:
            self.refusals.init(reason)
        for outcome in PAYMENT_OUTCOMES:
            self.payments.init(outcome)
        for status_class in STATUS_CLASSES:
            self.gateway_responses.init(status_class)
        for tool in sorted(self.tools):
            self.tool_calls.init(tool, "result")

        self.shared: str | None = None

    # ---- several worker processes, one answer -------------------------------------------------

    def share(self, directory: str) -> None:
        """Publish this process's figures with all workers', in `directory`.

        Scrapes are then answered with every worker's figures there, summed. The figures are
        written now, at each scrape, every PUBLISH_EVERY seconds once `publish_on` has a loop, and
        at exit.
        """
        self.shared = directory
        self.publish()

    def publish(self) -> None:
        if self.shared is None:
            return
        path = os.path.join(self.shared, f"{os.getpid()}.json")
        partial = f"{path}.{threading.get_ident()}.partial"
        try:
            with open(partial, "w", encoding="utf-8") as fh:
                fh.write(dump(self.registry.collect()))
            os.replace(partial, path)  # readers see the old snapshot or the new one, never half of one
        except OSError:
            pass  # the directory went away (the supervisor is stopping): the next scrape says so

    def publish_on(self, loop: asyncio.AbstractEventLoop) -> Callable[[], None]:
        """Publish every PUBLISH_EVERY seconds on `loop`; returns what stops it."""
        handle: asyncio.TimerHandle | None = None

        def tick() -> None:
            nonlocal handle
            self.publish()
            handle = loop.call_later(PUBLISH_EVERY, tick)

        def stop() -> None:
            if handle is not None:
                handle.cancel()

        if self.shared is not None:
            handle = loop.call_later(PUBLISH_EVERY, tick)
        return stop

    def render(self) -> str:
        if self.shared is None:
            return self.registry.render()
        self.publish()
        return render(_read_shared(self.shared))
