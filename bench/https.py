"""Our server over stdio against the stub served over TLS: the first call's handshake, then kept-alive calls.

The stub serves https:// with the test certificate (tests/tls/); the server trusts it through
SSL_CERT_FILE, a file with this machine's CA certificates and the test CA.
"""

from __future__ import annotations

import ssl
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from bench.cold_start import measure_cold_starts
from bench.runner import BenchError, Deadline
from bench.stdio import measure_stdio
from bench.stub_gateway import CA_FILE as TLS_CA_FILE


def tls_trust_file() -> str:
    """A CA file with this machine's CA certificates and the test CA: the stub is trusted, and
    loading the file costs what loading a member's system CAs costs (most of a first https call)."""
    system = ssl.get_default_verify_paths().cafile
    with tempfile.NamedTemporaryFile("w", prefix="bench-cas-", suffix=".pem", delete=False) as out:
        if system:
            out.write(Path(system).read_text(encoding="ascii", errors="replace") + "\n")
        out.write(TLS_CA_FILE.read_text(encoding="ascii"))
    return out.name


def measure_https(
    cmd: Sequence[str], env: dict[str, str], calls: int, warmup: int, cold_runs: int, deadline: Deadline
) -> dict[str, Any]:
    """Our server over stdio against the stub served over TLS: the first call (ssl loaded, a
    handshake) after cold starts, then tools/call on the kept-alive TLS connection."""
    cold: dict[str, Any] = {}
    errors: list[str] = []
    measure_cold_starts([("ours (https)", list(cmd), cold)], env, cold_runs, deadline, errors)
    if errors:
        raise BenchError("; ".join(errors))
    stdio = measure_stdio("ours (https)", cmd, env, calls, warmup, deadline)
    return {
        "https_cold_first_call_ms": cold["cold_first_call_ms"],
        "https_cold_first_call_ms_all": [
            f - i for i, f in zip(cold["cold_init_ms_all"], cold["cold_first_result_ms_all"], strict=True)
        ],
        "https_stdio_call_p50_ms": stdio["stdio_call_p50_ms"],
        "https_stdio_call_p99_ms": stdio["stdio_call_p99_ms"],
        "https_cpu_per_call_ms": stdio["cpu_per_call_ms"],
        "https_stdio_call": stdio["stdio_call"],
    }
