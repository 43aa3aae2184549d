"""The Anthropic Messages API through the official SDK: one streamed request per round.

Retries what is transient (429, 5xx, 529 overloaded, a dropped connection, a
stream cut before ``message_stop``) with backoff, honouring ``retry-after``;
everything else becomes one ``ProviderError`` line. Redirects are never
followed. The SDK's own retries are off, so every attempt is visible here.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from typing import Any

import anthropic

# The SDK reads its stream through an httpx client (httpx2 in SDK 2.x); an error
# while reading a stream it already returned is the client's, not the SDK's.
try:
    from httpx2 import TransportError
except ImportError:  # pragma: no cover - SDKs built on httpx
    from httpx import TransportError  # type: ignore[no-redef,import-not-found]

from sandbx.providers._endpoint import Endpoint
from sandbx.providers._model import (
    Block,
    ModelReply,
    ModelRequest,
    ProviderError,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    Usage,
)

RETRIES = 4
_TRANSIENT_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504, 529})
_TRANSIENT_TYPES = frozenset({"overloaded_error", "rate_limit_error", "api_error", "timeout_error"})
_LONGEST_WAIT_SECONDS = 60.0


class _StreamCut(Exception):
    """The stream ended before ``message_stop``."""


class AnthropicProvider:
    def __init__(self, endpoint: Endpoint, *, backoff_seconds: float = 1.0) -> None:
        self._client = anthropic.Anthropic(
            api_key=endpoint.api_key,
            base_url=endpoint.base_url,
            max_retries=0,
            http_client=anthropic.DefaultHttpxClient(follow_redirects=False),
        )
        self._backoff_seconds = backoff_seconds

    def stream(self, request: ModelRequest, on_event: Callable[[StreamEvent], None]) -> ModelReply:
        attempt = 0
        while True:
            try:
                return self._once(request, on_event)
            except anthropic.APIStatusError as exc:
                kind = _error_type(exc.body)
                transient = exc.status_code in _TRANSIENT_STATUS or kind in _TRANSIENT_TYPES
                if not transient or attempt >= RETRIES:
                    raise ProviderError(_describe(exc.status_code, kind, exc.body)) from exc
                delay = _retry_after(exc)
                if delay is None:
                    delay = self._backoff(attempt)
                on_event(Retrying(f"{exc.status_code} {kind or 'error'}", delay))
            except (anthropic.APIConnectionError, TransportError, _StreamCut) as exc:
                if attempt >= RETRIES:
                    raise ProviderError(f"the model's API could not be reached: {exc}") from exc
                delay = self._backoff(attempt)
                on_event(Retrying(f"connection: {exc}", delay))
            time.sleep(delay)
            attempt += 1

    def _backoff(self, attempt: int) -> float:
        base = min(_LONGEST_WAIT_SECONDS, self._backoff_seconds * float(2**attempt))
        jitter = 0.75 + random.random() / 2  # noqa: S311 - spreads retries, guards no secret
        return base * jitter

    def _once(self, request: ModelRequest, on_event: Callable[[StreamEvent], None]) -> ModelReply:
        arguments: dict[str, Any] = {
            "model": request.model,
            "max_tokens": request.max_tokens,
            "messages": list(request.messages),
            "tools": list(request.tools),
        }
        if request.tool_choice is not None:
            arguments["tool_choice"] = request.tool_choice
        if request.thinking is not None:
            arguments["thinking"] = request.thinking
        if request.system:
            arguments["system"] = request.system
        assembler = _Assembler(on_event)
        with self._client.messages.create(**arguments, stream=True) as events:
            for event in events:
                assembler.take(event)
        return assembler.reply()


class _Assembler:
    """Builds the assistant message from stream events, passing text and thinking on."""

    def __init__(self, on_event: Callable[[StreamEvent], None]) -> None:
        self._on_event = on_event
        self._blocks: list[Block] = []
        self._partial_json: dict[int, str] = {}
        self._stop_reason = ""
        self._usage = Usage()
        self._finished = False

    def take(self, event: Any) -> None:
        match event.type:
            case "message_start":
                self._usage = Usage(input_tokens=event.message.usage.input_tokens)
            case "content_block_start":
                self._blocks.append(_block_start(event.content_block.model_dump()))
            case "content_block_delta":
                _apply_delta(
                    self._blocks, self._partial_json, event.index, event.delta, self._on_event
                )
            case "content_block_stop":
                if event.index in self._partial_json:
                    self._blocks[event.index]["input"] = _parse_input(
                        self._partial_json[event.index]
                    )
            case "message_delta":
                self._stop_reason = event.delta.stop_reason or ""
                self._usage = Usage(
                    input_tokens=self._usage.input_tokens, output_tokens=event.usage.output_tokens
                )
            case "message_stop":
                self._finished = True

    def reply(self) -> ModelReply:
        if not self._finished:
            msg = "the stream ended before message_stop"
            raise _StreamCut(msg)
        return ModelReply(
            content=tuple(self._blocks), stop_reason=self._stop_reason, usage=self._usage
        )


def _block_start(raw: dict[str, object]) -> Block:
    block = {key: value for key, value in raw.items() if value is not None}
    if block.get("type") == "tool_use":
        block["input"] = {}
    return block


def _apply_delta(
    blocks: list[Block],
    partial_json: dict[int, str],
    index: int,
    delta: object,
    on_event: Callable[[StreamEvent], None],
) -> None:
    kind = getattr(delta, "type", "")
    block = blocks[index]
    if kind == "text_delta":
        text = str(getattr(delta, "text", ""))
        block["text"] = str(block.get("text", "")) + text
        on_event(TextDelta(text))
    elif kind == "input_json_delta":
        partial_json[index] = partial_json.get(index, "") + str(getattr(delta, "partial_json", ""))
    elif kind == "thinking_delta":
        text = str(getattr(delta, "thinking", ""))
        block["thinking"] = str(block.get("thinking", "")) + text
        on_event(ThinkingDelta(text))
    elif kind == "signature_delta":
        block["signature"] = str(block.get("signature", "")) + str(getattr(delta, "signature", ""))


def _parse_input(text: str) -> object:
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        # The model sent arguments that are not JSON; the tool refuses them and
        # tells the model, rather than the turn failing.
        return {"__unparsed__": text}


def _error_type(body: object) -> str:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return str(error.get("type", ""))
    return ""


def _describe(status: int, kind: str, body: object) -> str:
    message = ""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = str(body["error"].get("message", ""))
    return f"the model's API answered {status} {kind or 'error'}: {message or 'no message'}"


def _retry_after(exc: anthropic.APIStatusError) -> float | None:
    value = exc.response.headers.get("retry-after") if exc.response is not None else None
    try:
        return min(_LONGEST_WAIT_SECONDS, max(0.0, float(value))) if value else None
    except ValueError:
        return None
