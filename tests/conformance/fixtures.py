"""The conformance suite's fixtures as a Catalog: tools, resources, a template and prompts with the suite's fixed names.

Test-only. The shipped server never composes this catalog; `tests/conformance/server.py` serves
it through the real dispatcher and HTTP transport. Names and expected answers: FIXTURES.md §3.
Binary payloads (a 1×1 PNG, a short WAV) are generated here from the standard library.
"""

from __future__ import annotations

import io
import json
import re
import struct
import wave
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from mcp_server.core.catalog import (
    Catalog,
    audio_content,
    blob_contents,
    embedded_resource,
    image_content,
    text_content,
    text_contents,
)
from mcp_server.core.context import RequestContext
from mcp_server.wire.jsonrpc import INVALID_PARAMS, JSONObject, McpError

# ---- payloads -------------------------------------------------------------------------------


def png_1x1() -> bytes:
    """A valid 1×1 RGB PNG (one red pixel): signature, IHDR, IDAT, IEND, each chunk CRC-checked."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)  # width, height, bit depth 8, colour type RGB
    scanline = b"\x00" + bytes((255, 0, 0))  # filter type 0, then the pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(scanline)) + chunk(b"IEND", b"")


def wav_silence(frames: int = 8, rate: int = 8000) -> bytes:
    """A valid mono 16-bit PCM WAV of `frames` silent samples."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"\x00\x00" * frames)
    return buffer.getvalue()


PNG: Final = png_1x1()
WAV: Final = wav_silence()

SIMPLE_TEXT: Final = "This is a simple text response for testing."
EMBEDDED_TEXT: Final = "This is an embedded resource content."
ERROR_TEXT: Final = "This tool intentionally returns an error for testing"
LOGGING_MESSAGES: Final = ("Tool execution started", "Tool processing data", "Tool execution completed")
STATIC_TEXT: Final = "This is the content of the static text resource."
TEMPLATE: Final = "test://template/{id}/data"
NO_ARGUMENTS: Final[JSONObject] = {"type": "object", "properties": {}, "additionalProperties": False}

JSON_SCHEMA_2020_12: Final[JSONObject] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}

# ---- the shapes (catalog.py's protocols) -----------------------------------------------------

ToolFunction = Callable[[JSONObject, RequestContext], JSONObject]


@dataclass(slots=True)
class FixtureTool:
    """A tool whose answer is computed locally: no gateway, no credential."""

    name: str
    description: str
    run: ToolFunction
    input_schema: JSONObject = field(default_factory=lambda: dict(NO_ARGUMENTS))

    def definition(self) -> JSONObject:
        return {"name": self.name, "description": self.description, "inputSchema": self.input_schema}

    def call(self, arguments: JSONObject, ctx: RequestContext) -> JSONObject:
        return self.run(arguments, ctx)


@dataclass(slots=True)
class StaticResource:
    uri: str
    name: str
    description: str
    contents: JSONObject
    ttl_ms: int = 60_000
    cache_scope: str = "public"

    def definition(self) -> JSONObject:
        return {
            "uri": self.uri,
            "name": self.name,
            "description": self.description,
            "mimeType": self.contents["mimeType"],
        }

    def read(self, ctx: RequestContext) -> list[JSONObject]:
        return [dict(self.contents)]


class DataTemplate:
    """`test://template/{id}/data`: any single-segment id reads as a small JSON document echoing it."""

    ttl_ms = 60_000
    cache_scope = "public"
    _pattern: Final = re.compile(r"test://template/([^/?#]+)/data")

    def definition(self) -> JSONObject:
        return {
            "uriTemplate": TEMPLATE,
            "name": "template-data",
            "description": "A resource template: the data for one id.",
            "mimeType": "application/json",
        }

    def read(self, uri: str, ctx: RequestContext) -> list[JSONObject] | None:
        match = self._pattern.fullmatch(uri)
        if match is None:
            return None
        item = match.group(1)
        body = {"id": item, "templateTest": True, "data": f"Data for ID: {item}"}
        return [text_contents(uri, "application/json", json.dumps(body, separators=(",", ":")))]

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]:
        return [v for v in ("123", "456") if argument == "id" and v.startswith(value)]


PromptFunction = Callable[[dict[str, str]], list[JSONObject]]


@dataclass(slots=True)
class FixturePrompt:
    name: str
    description: str
    render: PromptFunction
    required: tuple[str, ...] = ()

    def definition(self) -> JSONObject:
        arguments = [{"name": a, "description": f"The {a} argument.", "required": True} for a in self.required]
        return {"name": self.name, "description": self.description, "arguments": arguments}

    def get(self, arguments: dict[str, str], ctx: RequestContext) -> JSONObject:
        missing = [a for a in self.required if a not in arguments]
        if missing:
            raise McpError(INVALID_PARAMS, f"Invalid params: {self.name} needs {', '.join(missing)}")
        return {"description": self.description, "messages": self.render(arguments)}

    def complete(self, argument: str, value: str, ctx: RequestContext) -> list[str]:
        return []


# ---- tools ------------------------------------------------------------------------------------


def _simple_text(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    return {"content": [text_content(SIMPLE_TEXT)]}


def _image(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    return {"content": [image_content(PNG, "image/png")]}


def _audio(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    return {"content": [audio_content(WAV, "audio/wav")]}


def _embedded(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    resource = text_contents("test://embedded-resource", "text/plain", EMBEDDED_TEXT)
    return {"content": [embedded_resource(resource)]}


def _mixed(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    data = json.dumps({"test": "data", "value": 123}, separators=(",", ":"))
    return {
        "content": [
            text_content("Multiple content types test:"),
            image_content(PNG, "image/png"),
            embedded_resource(text_contents("test://mixed-content-resource", "application/json", data)),
        ]
    }


def _error(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    return {"content": [text_content(ERROR_TEXT)], "isError": True}


def _progress(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    for value in (0, 50, 100):
        ctx.report_progress(value, 100, f"Step {value // 50 + 1} of 3")
    return {"content": [text_content("Progress tool completed")]}


def _with_logging(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    for message in LOGGING_MESSAGES:
        ctx.log("info", message, logger="conformance")
    return {"content": [text_content("Tool with logging executed successfully")]}


def _missing_capability(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    ctx.require_capability("sampling")
    return {"content": [text_content("Success")]}


def _streaming_elicitation(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    # The server never sends requests to the client (no elicitation/create): it just answers.
    return {"content": [text_content("Streaming complete")]}


def _logging_evaluated(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    ctx.log("info", "Logging evaluated", logger="conformance")  # sent only if the request set a log level
    return {"content": [text_content("Logging evaluated")]}


def _schema_2020_12(arguments: JSONObject, ctx: RequestContext) -> JSONObject:
    return {"content": [text_content(f"Received: {json.dumps(arguments, sort_keys=True)}")]}


def fixture_tools() -> list[FixtureTool]:
    return [
        FixtureTool("test_simple_text", "Returns a simple text response.", _simple_text),
        FixtureTool("test_image_content", "Returns a PNG image.", _image),
        FixtureTool("test_audio_content", "Returns a WAV audio clip.", _audio),
        FixtureTool("test_embedded_resource", "Returns an embedded text resource.", _embedded),
        FixtureTool("test_multiple_content_types", "Returns text, an image and an embedded resource.", _mixed),
        FixtureTool("test_error_handling", "Always fails, as a tool error (isError).", _error),
        FixtureTool("test_tool_with_progress", "Reports progress 0, 50 and 100 of 100.", _progress),
        FixtureTool("test_tool_with_logging", "Sends three info log messages while it runs.", _with_logging),
        FixtureTool("test_missing_capability", "Needs the client's sampling capability.", _missing_capability),
        FixtureTool(
            "test_streaming_elicitation", "Answers without asking the client anything.", _streaming_elicitation
        ),
        FixtureTool("test_logging_tool", "Logs only when the request asks for a log level.", _logging_evaluated),
        FixtureTool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features",
            _schema_2020_12,
            input_schema=JSON_SCHEMA_2020_12,
        ),
    ]


# ---- resources and prompts -------------------------------------------------------------------


def fixture_resources() -> list[StaticResource]:
    # test://static-text first: the 2026 `caching` scenario reads whatever is listed first.
    return [
        StaticResource(
            "test://static-text",
            "static-text",
            "A static text resource.",
            text_contents("test://static-text", "text/plain", STATIC_TEXT),
        ),
        StaticResource(
            "test://static-binary",
            "static-binary",
            "A static binary resource (a PNG).",
            blob_contents("test://static-binary", "image/png", PNG),
        ),
    ]


def _user(content: JSONObject) -> JSONObject:
    return {"role": "user", "content": content}


def fixture_prompts() -> list[FixturePrompt]:
    return [
        FixturePrompt(
            "test_simple_prompt",
            "A prompt without arguments.",
            lambda args: [_user(text_content("This is a simple prompt for testing."))],
        ),
        FixturePrompt(
            "test_prompt_with_arguments",
            "A prompt with two required arguments.",
            lambda args: [_user(text_content(f"Prompt with arguments: arg1='{args['arg1']}', arg2='{args['arg2']}'"))],
            required=("arg1", "arg2"),
        ),
        FixturePrompt(
            "test_prompt_with_embedded_resource",
            "A prompt that embeds the resource it is given.",
            lambda args: [
                _user(
                    embedded_resource(
                        text_contents(args["resourceUri"], "text/plain", "Embedded resource content for testing.")
                    )
                ),
                _user(text_content("Please process the embedded resource above.")),
            ],
            required=("resourceUri",),
        ),
        FixturePrompt(
            "test_prompt_with_image",
            "A prompt that carries an image.",
            lambda args: [
                _user(image_content(PNG, "image/png")),
                _user(text_content("Please analyze the image above.")),
            ],
        ),
    ]


def fixture_catalog() -> Catalog:
    return Catalog(
        tools=fixture_tools(),
        resources=fixture_resources(),
        templates=[DataTemplate()],
        prompts=fixture_prompts(),
        instructions="Conformance fixtures for the official MCP suite (test-only; never part of the shipped server).",
    )
