"""JSON Schemas of what each tool answers: the gateway's JSON (docs/gateway.md), an x402 price, or why it failed.

`OUTPUT_SCHEMAS` holds one schema per execution target, a ROUTES id or a public path, built from
`tools.ANSWERS` (by tool name) and, for the MCP server's own build_intent, which is not in
TOOL_DEFS, from the route it calls. Every schema is an object schema whose `anyOf` lists, in this
order: the gateway's answer, an x402 offer (only where the route can be priced), and the failure
facts. Strict clients validate `structuredContent` even on an error result, so each shape the
result can carry is here.
"""

from __future__ import annotations

from typing import Final

from .results import ERROR_CODE_PATTERN, FAILURE_SENTENCES
from .routes import ROUTES
from .schemas import TEXT, WHEN, Schema, obj
from .tools import ANSWERS, TOOL_DEFS, Exec

# What a failure's `kind` can be: a FAILURE_SENTENCES kind, or one decided before any gateway call.
FAILURE_KINDS: Final[tuple[str, ...]] = (
    *FAILURE_SENTENCES,
    "invalid_arguments",  # the arguments broke the inputSchema; nothing was sent
    "payment_refused",  # a carried x402 payment was refused; nothing was sent
    "settlement_failed",  # the gateway could not settle a carried payment; the answer is withheld
    "undescribed_answer",  # a 2xx read whole, in a shape no output schema describes (results.UNDESCRIBED_ANSWER)
)

_TYPED_DATA: Final = obj(
    {
        "domain": {"type": "object", "description": "The EIP-712 domain: name, version, chainId, verifyingContract."},
        "types": {"type": "object", "description": "The EIP-712 types: each a list of {name, type}."},
        "primaryType": TEXT,
        "message": {"type": "object"},
    },
    ("domain", "types", "primaryType", "message"),
    "EIP-712 typed data, unsigned: for the member to review and sign in their own wallet.",
)

# The answer of the one route no TOOL_DEFS tool executes: the MCP server's build_intent calls it.
BUILD_ROUTE: Final = "member.intents.build"
_INTENT: Final = obj(
    {
        "typedData": _TYPED_DATA,
        "expiresAt": WHEN,
        "submit": obj(
            {"relayPath": {"type": "string", "pattern": "^/", "description": "Where the signed intent is submitted."}},
            ("relayPath",),
        ),
    },
    ("typedData", "expiresAt", "submit"),
    "The unsigned transaction the gateway built. Nothing has happened on chain.",
)


def target_of(execution: Exec) -> str:
    """The execution target of a tool's `exec`: its route id or its public path ("" for a local tool)."""
    if execution["kind"] == "route":
        return execution["route"]
    return execution["path"] if execution["kind"] == "public" else ""


# The gateway's 2xx JSON, per execution target.
ANSWERS_BY_TARGET: Final[dict[str, Schema]] = {
    **{target_of(t["exec"]): ANSWERS[t["name"]] for t in TOOL_DEFS if t["exec"]["kind"] != "local"},
    BUILD_ROUTE: _INTENT,
}

# An x402 offer, as the server passes it on verbatim: only `accepts` is read from it.
OFFER: Final[Schema] = obj(
    {
        "x402Version": {
            "type": "integer",
            "description": "1 (the offer came in the 402 body) or 2 (the PAYMENT-REQUIRED header).",
        },
        "accepts": {"type": "array", "description": "The ways to pay: amount in atomic units, asset, network, payTo."},
        "error": {"type": "string", "description": "The gateway's reason for asking."},
    },
    ("accepts",),
    "On an error result only: the x402 price, verbatim as the gateway offered it. An x402 client can pay it.",
)
OFFER["title"] = "A price"

# What the server itself says about a failed call, as data beside its sentence.
FAILURE: Final[Schema] = obj(
    {
        "kind": {"type": "string", "enum": list(FAILURE_KINDS), "description": "Which failure sentence this is."},
        "status": {"type": "integer", "minimum": 100, "maximum": 599, "description": "The gateway's HTTP status."},
        "code": {"type": "string", "pattern": ERROR_CODE_PATTERN, "description": "The gateway's own error code."},
        "field": {
            "type": "string",
            "description": "undescribed_answer: where the answer left the contract's shape, e.g. markets[0].question.",
        },
        "expected": {
            "type": "string",
            "description": "undescribed_answer: what the contract expected there, e.g. must be a string.",
        },
    },
    ("kind",),
    "On an error result only: why the call failed. status and code are there when the gateway answered "
    "and wrote them. An UNKNOWN, never an empty result; for undescribed_answer, the gateway's own text "
    "follows the sentence in content.",
)
FAILURE["title"] = "Why the call failed"
FAILURE["additionalProperties"] = False


def _output_schema(target: str) -> Schema:
    answer = {**ANSWERS_BY_TARGET[target], "title": "The gateway's answer"}
    priced = target in ROUTES and ROUTES[target]["priced"]
    return {"type": "object", "anyOf": [answer, OFFER, FAILURE] if priced else [answer, FAILURE]}


# The outputSchema of a tool executing each target (a ROUTES id or a public path).
OUTPUT_SCHEMAS: Final[dict[str, Schema]] = {target: _output_schema(target) for target in ANSWERS_BY_TARGET}
