"""What the turn loop exchanges with a model, independent of any SDK.

Messages and content blocks are plain JSON-shaped dicts, the Messages API's own
shapes, so a transcript can be stored and replayed as it was sent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sandbx._value import value

Block = dict[str, object]
Message = dict[str, object]


@value
class ModelRequest:
    model: str
    max_tokens: int
    system: str
    messages: tuple[Message, ...]
    tools: tuple[dict[str, object], ...]
    tool_choice: dict[str, object] | None = None
    thinking: dict[str, object] | None = None


@value
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@value
class ModelReply:
    """The assistant message of one round, as the API would store it, and why it stopped."""

    content: tuple[Block, ...]
    stop_reason: str
    usage: Usage

    def tool_uses(self) -> tuple[Block, ...]:
        return tuple(block for block in self.content if block.get("type") == "tool_use")

    def as_message(self) -> Message:
        return {"role": "assistant", "content": list(self.content)}


@value(kw_only=False)
class TextDelta:
    text: str


@value(kw_only=False)
class ThinkingDelta:
    text: str


@value(kw_only=False)
class Retrying:
    """A transient failure; the request is sent again after ``delay_seconds``."""

    what: str
    delay_seconds: float


StreamEvent = TextDelta | ThinkingDelta | Retrying


class ProviderError(Exception):
    """The model could not be asked, even after the retries the failure deserved."""


class Provider(Protocol):
    def stream(self, request: ModelRequest, on_event: Callable[[StreamEvent], None]) -> ModelReply:
        """Send one request and stream its reply; raises ``ProviderError``."""
        ...
