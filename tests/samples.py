"""Sample inputs shared by test modules: valid arguments for every tool that takes any."""

from __future__ import annotations

from typing import Any

# Arguments each tool accepts against the sandbox gateway (tools not named take none).
VALID_ARGUMENTS: dict[str, dict[str, Any]] = {
    "build_intent": {"intent": "create_wager", "chainId": 137, "params": {"stake": "1.00", "description": "d"}},
    "get_prediction_markets": {"chainId": 137, "q": "eth"},
    "get_token_news": {"chainId": 137, "asset": "ETH", "slug": "ethereum"},
    "get_wagers": {"chainId": 137},
}
