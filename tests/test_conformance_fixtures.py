"""The conformance fixtures through the real dispatcher and HTTP transport, answering as FIXTURES.md §3 says.

The official suite runs in `make conformance`; these tests pin the same answers in plain pytest,
in both eras, so a regression shows here first. And the shipped server lists none of them.
"""

from __future__ import annotations

import base64
import io
import json
import queue
import re
import signal
import struct
import subprocess
import sys
import threading
import wave
import zlib
from collections.abc import Iterator
from typing import Any

import pytest

from mcp_server.core.protocol import Dispatcher
from mcp_server.setup.server import build_catalog
from mcp_server.upstream.gateway import Gateway
from tests.conformance.fixtures import (
    EMBEDDED_TEXT,
    ERROR_TEXT,
    JSON_SCHEMA_2020_12,
    LOGGING_MESSAGES,
    PNG,
    SIMPLE_TEXT,
    STATIC_TEXT,
    WAV,
    fixture_catalog,
)
from tests.conftest import ROOT, SIGNAL_STOP, server_env
from tests.mcp_http import LegacyClient, ModernClient, modern_meta, post, serving

FIXTURE_TOOLS = {
    "test_simple_text",
    "test_image_content",
    "test_audio_content",
    "test_embedded_resource",
    "test_multiple_content_types",
    "test_error_handling",
    "test_tool_with_progress",
    "test_tool_with_logging",
    "test_missing_capability",
    "test_streaming_elicitation",
    "test_logging_tool",
    "json_schema_2020_12_tool",
}
FIXTURE_PROMPTS = {
    "test_simple_prompt",
    "test_prompt_with_arguments",
    "test_prompt_with_embedded_resource",
    "test_prompt_with_image",
}
TOOL_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
WAIT = 10.0


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    with serving(Dispatcher(fixture_catalog())) as server:
        yield server.url


@pytest.fixture(params=["modern", "legacy"])
def client(request: pytest.FixtureRequest, url: str) -> ModernClient | LegacyClient:
    """The same checks at both wires the suite scores (2026-07-28, and 2025-11-25 after a handshake)."""
    if request.param == "modern":
        return ModernClient(url, capabilities={"sampling": {}, "elicitation": {}, "roots": {"listChanged": True}})
    legacy = LegacyClient(url)
    legacy.initialize()
    return legacy


def call(client: ModernClient | LegacyClient, name: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name}
    if arguments is not None:
        params["arguments"] = arguments
    answer = client.request("tools/call", params)
    assert answer.status == 200, answer.body
    return answer.result


def png_pixels(data: bytes) -> tuple[int, int, bytes]:
    """(width, height, decompressed IDAT) of a PNG, checking the signature and every chunk's CRC."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, chunks = 8, {}
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        (crc,) = struct.unpack(">I", data[pos + 8 + length : pos + 12 + length])
        assert zlib.crc32(kind + body) == crc, kind
        chunks[kind] = body
        pos += 12 + length
    assert list(chunks)[-1] == b"IEND"
    width, height = struct.unpack(">II", chunks[b"IHDR"][:8])
    return width, height, zlib.decompress(chunks[b"IDAT"])


# ---- tools ---------------------------------------------------------------------------------------


def test_tools_list_holds_every_fixture_with_description_and_object_schema(client: ModernClient | LegacyClient) -> None:
    tools = client.request("tools/list").result["tools"]
    assert {t["name"] for t in tools} == FIXTURE_TOOLS
    for tool in tools:
        assert TOOL_NAME.match(tool["name"]) and tool["description"]
        assert tool["inputSchema"]["type"] == "object"


def test_simple_text_answers_without_an_arguments_key(client: ModernClient | LegacyClient) -> None:
    assert call(client, "test_simple_text")["content"] == [{"type": "text", "text": SIMPLE_TEXT}]


def test_image_content_is_a_real_base64_png(client: ModernClient | LegacyClient) -> None:
    (block,) = call(client, "test_image_content", {})["content"]
    assert block["type"] == "image" and block["mimeType"] == "image/png"
    data = base64.b64decode(block["data"], validate=True)
    assert data == PNG
    assert png_pixels(data) == (1, 1, b"\x00\xff\x00\x00")


def test_audio_content_is_a_real_base64_wav(client: ModernClient | LegacyClient) -> None:
    (block,) = call(client, "test_audio_content", {})["content"]
    assert block["type"] == "audio" and block["mimeType"] == "audio/wav"
    data = base64.b64decode(block["data"], validate=True)
    assert data == WAV
    with wave.open(io.BytesIO(data)) as clip:
        assert (clip.getnchannels(), clip.getsampwidth(), clip.getnframes()) == (1, 2, 8)


def test_embedded_resource_carries_uri_mime_type_and_text(client: ModernClient | LegacyClient) -> None:
    (block,) = call(client, "test_embedded_resource", {})["content"]
    assert block == {
        "type": "resource",
        "resource": {"uri": "test://embedded-resource", "mimeType": "text/plain", "text": EMBEDDED_TEXT},
    }


def test_multiple_content_types_are_text_image_and_resource(client: ModernClient | LegacyClient) -> None:
    content = call(client, "test_multiple_content_types", {})["content"]
    assert [b["type"] for b in content] == ["text", "image", "resource"]
    resource = content[2]["resource"]
    assert resource["uri"] == "test://mixed-content-resource" and resource["mimeType"] == "application/json"
    assert json.loads(resource["text"]) == {"test": "data", "value": 123}


def test_error_handling_is_a_tool_error_not_a_protocol_error(client: ModernClient | LegacyClient) -> None:
    result = call(client, "test_error_handling", {})
    assert result["isError"] is True
    assert result["content"][0]["text"] == ERROR_TEXT


def test_json_schema_2020_12_tool_keeps_its_schema_verbatim(client: ModernClient | LegacyClient) -> None:
    tools = client.request("tools/list").result["tools"]
    schema = next(t for t in tools if t["name"] == "json_schema_2020_12_tool")["inputSchema"]
    assert schema == JSON_SCHEMA_2020_12


# ---- progress and logs over SSE ---------------------------------------------------------------------


def test_modern_progress_streams_three_notifications_before_the_response(url: str) -> None:
    meta = modern_meta(progressToken="progress-test-1")
    answer = ModernClient(url).request("tools/call", {"name": "test_tool_with_progress", "arguments": {}}, meta=meta)
    assert answer.status == 200 and answer.content_type == "text/event-stream"
    *notes, last = answer.messages
    assert "result" in last and last["result"]["resultType"] == "complete"
    assert [n["method"] for n in notes] == ["notifications/progress"] * 3
    assert [n["params"]["progressToken"] for n in notes] == ["progress-test-1"] * 3
    assert [(n["params"]["progress"], n["params"]["total"]) for n in notes] == [(0, 100), (50, 100), (100, 100)]


def test_legacy_progress_echoes_an_integer_token(url: str) -> None:
    client = LegacyClient(url)
    client.initialize()
    answer = client.request(
        "tools/call", {"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": 42}}
    )
    assert answer.content_type == "text/event-stream"
    progress = [n["params"] for n in answer.notifications if n["method"] == "notifications/progress"]
    assert [p["progressToken"] for p in progress] == [42, 42, 42]
    assert [p["progress"] for p in progress] == [0, 50, 100]
    assert "result" in answer.messages[-1]


def test_without_a_progress_token_the_answer_is_plain_json(url: str) -> None:
    answer = ModernClient(url).request("tools/call", {"name": "test_tool_with_progress", "arguments": {}})
    assert answer.content_type == "application/json" and answer.notifications == []


def test_legacy_logging_tool_streams_three_info_messages(url: str) -> None:
    client = LegacyClient(url)
    client.initialize()
    assert client.request("logging/setLevel", {"level": "debug"}).result == {}
    answer = client.request("tools/call", {"name": "test_tool_with_logging", "arguments": {}})
    assert answer.content_type == "text/event-stream"
    messages = [n["params"] for n in answer.notifications]
    assert [(m["level"], m["data"]) for m in messages] == [("info", text) for text in LOGGING_MESSAGES]
    assert answer.messages[-1]["result"]["content"][0]["text"] == "Tool with logging executed successfully"


def test_a_client_that_only_accepts_json_gets_the_answer_without_notifications(url: str) -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "test_tool_with_logging", "arguments": {}},
    }
    answer = post(url, body, {"Accept": "application/json", "MCP-Protocol-Version": "2025-11-25"})
    assert answer.content_type == "application/json"
    assert answer.result["content"][0]["text"] == "Tool with logging executed successfully"


# ---- client capabilities ----------------------------------------------------------------------------


def test_missing_client_capability_is_32021_with_400_and_the_required_capabilities(url: str) -> None:
    answer = ModernClient(url, capabilities={}).request(
        "tools/call", {"name": "test_missing_capability", "arguments": {}}
    )
    assert answer.status == 400 and answer.content_type == "application/json"  # not a stream: no notification came
    error = answer.error
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    assert answer.response["id"] == 1


def test_declared_capability_lets_the_call_through(url: str) -> None:
    client = ModernClient(url, capabilities={"sampling": {}})
    result = client.request("tools/call", {"name": "test_missing_capability", "arguments": {}}).result
    assert result["content"][0]["text"] == "Success"


def test_streaming_elicitation_sends_no_request_to_the_client(url: str) -> None:
    client = ModernClient(url, capabilities={"elicitation": {}})
    answer = client.request("tools/call", {"name": "test_streaming_elicitation", "arguments": {}})
    assert all("method" not in m or m["method"].startswith("notifications/") for m in answer.messages)
    assert answer.result["content"][0]["text"] == "Streaming complete"


def test_logging_tool_sends_no_log_message_without_a_log_level(url: str) -> None:
    answer = ModernClient(url).request("tools/call", {"name": "test_logging_tool", "arguments": {}})
    assert [m for m in answer.messages if m.get("method") == "notifications/message"] == []
    assert b"\n" not in answer.body.strip()  # one compact line: the suite's raw probes parse line by line


# ---- resources ------------------------------------------------------------------------------------


def test_resources_list_starts_with_a_readable_text_resource(client: ModernClient | LegacyClient) -> None:
    resources = client.request("resources/list").result["resources"]
    assert [r["uri"] for r in resources] == ["test://static-text", "test://static-binary"]
    assert all(r["name"] and r["description"] for r in resources)


def test_static_text_resource(client: ModernClient | LegacyClient) -> None:
    (contents,) = client.request("resources/read", {"uri": "test://static-text"}).result["contents"]
    assert contents == {"uri": "test://static-text", "mimeType": "text/plain", "text": STATIC_TEXT}


def test_static_binary_resource_is_a_base64_png_blob(client: ModernClient | LegacyClient) -> None:
    (contents,) = client.request("resources/read", {"uri": "test://static-binary"}).result["contents"]
    assert contents["mimeType"] == "image/png"
    assert base64.b64decode(contents["blob"], validate=True) == PNG


def test_template_is_listed_and_reads_echo_the_id(client: ModernClient | LegacyClient) -> None:
    templates = client.request("resources/templates/list").result["resourceTemplates"]
    assert [t["uriTemplate"] for t in templates] == ["test://template/{id}/data"]
    (contents,) = client.request("resources/read", {"uri": "test://template/123/data"}).result["contents"]
    assert contents["uri"] == "test://template/123/data"
    assert json.loads(contents["text"]) == {"id": "123", "templateTest": True, "data": "Data for ID: 123"}


# ---- prompts and completion -------------------------------------------------------------------------


def test_prompts_list_holds_every_fixture_with_a_description(client: ModernClient | LegacyClient) -> None:
    prompts = client.request("prompts/list").result["prompts"]
    assert {p["name"] for p in prompts} == FIXTURE_PROMPTS
    assert all(p["description"] for p in prompts)


def test_simple_prompt(client: ModernClient | LegacyClient) -> None:
    messages = client.request("prompts/get", {"name": "test_simple_prompt"}).result["messages"]
    assert messages == [{"role": "user", "content": {"type": "text", "text": "This is a simple prompt for testing."}}]


def test_prompt_with_arguments_uses_them(client: ModernClient | LegacyClient) -> None:
    params = {"name": "test_prompt_with_arguments", "arguments": {"arg1": "testValue1", "arg2": "testValue2"}}
    (message,) = client.request("prompts/get", params).result["messages"]
    assert message["content"]["text"] == "Prompt with arguments: arg1='testValue1', arg2='testValue2'"


def test_prompt_with_a_missing_argument_is_invalid_params(client: ModernClient | LegacyClient) -> None:
    answer = client.request("prompts/get", {"name": "test_prompt_with_arguments", "arguments": {"arg1": "x"}})
    assert answer.error["code"] == -32602


def test_prompt_with_embedded_resource_embeds_the_given_uri(client: ModernClient | LegacyClient) -> None:
    params = {"name": "test_prompt_with_embedded_resource", "arguments": {"resourceUri": "test://example-resource"}}
    first, second = client.request("prompts/get", params).result["messages"]
    assert first["content"]["type"] == "resource" and first["content"]["resource"]["uri"] == "test://example-resource"
    assert second["content"]["type"] == "text"


def test_prompt_with_image_carries_a_png(client: ModernClient | LegacyClient) -> None:
    first, _ = client.request("prompts/get", {"name": "test_prompt_with_image"}).result["messages"]
    assert first["content"]["type"] == "image" and first["content"]["mimeType"] == "image/png"
    assert base64.b64decode(first["content"]["data"]) == PNG


def test_completion_for_a_prompt_argument_is_an_empty_list(client: ModernClient | LegacyClient) -> None:
    params = {
        "ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
        "argument": {"name": "arg1", "value": "test"},
    }
    completion = client.request("completion/complete", params).result["completion"]
    assert completion == {"values": [], "total": 0, "hasMore": False}


# ---- the shipped server stays clean; the fixture server starts and stops ------------------------------


def test_shipped_server_lists_no_fixture() -> None:
    with serving(Dispatcher(build_catalog(Gateway(None)))) as server:
        client = ModernClient(server.url)
        tools = [t["name"] for t in client.request("tools/list").result["tools"]]
        resources = [r["uri"] for r in client.request("resources/list").result["resources"]]
        prompts = [p["name"] for p in client.request("prompts/list").result["prompts"]]
    assert tools and not [n for n in tools if n.startswith("test_") or n in FIXTURE_TOOLS]
    assert not [u for u in resources if u.startswith("test://")]
    assert not [n for n in prompts if n.startswith("test_")]


@SIGNAL_STOP
def test_fixture_server_prints_its_url_serves_and_stops_on_sigterm() -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.conformance.server", "--port", "0"],
        cwd=ROOT,
        env=server_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    lines: queue.Queue[bytes] = queue.Queue()
    assert proc.stdout is not None
    reader = threading.Thread(target=lambda: lines.put(proc.stdout.readline() if proc.stdout else b""), daemon=True)
    reader.start()
    try:
        line = lines.get(timeout=WAIT).decode()
        match = re.fullmatch(r"conformance fixture server on (http://127\.0\.0\.1:\d+/mcp)\n", line)
        assert match, line
        answer = ModernClient(match.group(1)).request("server/discover")
        assert answer.status == 200 and answer.result["resultType"] == "complete"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(WAIT)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
