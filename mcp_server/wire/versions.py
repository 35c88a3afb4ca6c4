"""The MCP revisions spoken here, compared as members, never as strings."""

from __future__ import annotations

from typing import Final

# Handshake (`initialize`) revisions, oldest first.
LEGACY_VERSIONS: Final[tuple[str, ...]] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
LATEST_LEGACY: Final = "2025-11-25"
# Stateless revisions: version and client capabilities ride in every request's `_meta`.
MODERN_VERSIONS: Final[tuple[str, ...]] = ("2026-07-28",)
# Newest first, as `server/discover` and -32022 list them.
SUPPORTED_VERSIONS: Final[tuple[str, ...]] = MODERN_VERSIONS[::-1] + LEGACY_VERSIONS[::-1]
# Streamable HTTP: "If the server does not receive an MCP-Protocol-Version header ... the server
# SHOULD assume protocol version 2025-03-26."
HTTP_DEFAULT_VERSION: Final = "2025-03-26"
# The only revision whose JSON-RPC batches a server must accept.
BATCH_VERSION: Final = "2025-03-26"
# Tool.outputSchema and CallToolResult.structuredContent first exist in 2025-06-18.
STRUCTURED_OUTPUT_VERSIONS: Final[tuple[str, ...]] = (
    *LEGACY_VERSIONS[LEGACY_VERSIONS.index("2025-06-18") :],
    *MODERN_VERSIONS,
)

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
