"""The Messages API's wire forms of a scripted reply: the whole message, its stream of
server-sent events, and the error body.

Shapes follow the API reference ("Streaming Messages", "Errors" at docs.anthropic.com).
It renders only; it never decides which reply a request gets.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from sandbx._exhaustive import unreachable
from sandbx.testing._script import (
    ApiError,
    ContentBlock,
    Reply,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)

# Small pieces, so that a client which treats one delta as a whole block is caught.
TEXT_PIECE_CHARACTERS = 16
JSON_PIECE_CHARACTERS = 12

JsonObject = dict[str, object]


def message_json(message: Reply, *, message_id: str, model: str) -> JsonObject:
    """The body of a non-streaming answer: the whole message at once."""
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [_whole_block(block) for block in message.content],
        "stop_reason": message.stop_reason.value,
        "stop_sequence": message.stop_sequence,
        "usage": {
            "input_tokens": message.usage.input_tokens,
            "output_tokens": message.usage.output_tokens,
        },
    }


def stream_events(message: Reply, *, message_id: str, model: str) -> list[JsonObject]:
    """Every event of the streamed message, ``message_start`` to ``message_stop``.

    The name of each event is its data's ``type``, as on the real stream.
    """
    events: list[JsonObject] = [_message_start(message, message_id=message_id, model=model)]
    if not message.content:
        events.append({"type": "ping"})
    for index, block in enumerate(message.content):
        events.append(
            {"type": "content_block_start", "index": index, "content_block": _opening(block)}
        )
        # The documented stream carries its ping right after the first block opens.
        if index == 0:
            events.append({"type": "ping"})
        events.extend(
            {"type": "content_block_delta", "index": index, "delta": delta}
            for delta in _deltas(block)
        )
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {
                "stop_reason": message.stop_reason.value,
                "stop_sequence": message.stop_sequence,
            },
            # Cumulative: the whole message's output tokens, not those since message_start.
            "usage": {"output_tokens": message.usage.output_tokens},
        }
    )
    events.append({"type": "message_stop"})
    return events


def error_body(error: ApiError, *, request_id: str) -> JsonObject:
    return {
        "type": "error",
        "error": {"type": error.error_type, "message": error.message},
        "request_id": request_id,
    }


def error_event(error: ApiError) -> JsonObject:
    return {"type": "error", "error": {"type": error.error_type, "message": error.message}}


def encode_event(event: JsonObject) -> bytes:
    """One server-sent event: ``event: NAME``, ``data: JSON`` and a blank line."""
    data = json.dumps(event, ensure_ascii=False, separators=(",", ":"))
    return f"event: {event['type']}\ndata: {data}\n\n".encode()


def encode_json(body: JsonObject) -> bytes:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


def _message_start(message: Reply, *, message_id: str, model: str) -> JsonObject:
    opening = message_json(message, message_id=message_id, model=model)
    opening["content"] = []
    opening["stop_reason"] = None
    opening["stop_sequence"] = None
    # The real stream opens with the prompt's input tokens and a token or so of output.
    opening["usage"] = {
        "input_tokens": message.usage.input_tokens,
        "output_tokens": min(1, message.usage.output_tokens),
    }
    return {"type": "message_start", "message": opening}


def _whole_block(block: ContentBlock) -> JsonObject:
    match block:
        case TextBlock():
            return {"type": "text", "text": block.text}
        case ToolUseBlock():
            return {
                "type": "tool_use",
                "id": _tool_use_id(block),
                "name": block.name,
                "input": block.tool_input,
            }
        case ThinkingBlock():
            return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        case _:
            raise unreachable(block)


def _opening(block: ContentBlock) -> JsonObject:
    match block:
        case TextBlock():
            return {"type": "text", "text": ""}
        case ToolUseBlock():
            return {"type": "tool_use", "id": _tool_use_id(block), "name": block.name, "input": {}}
        case ThinkingBlock():
            return {"type": "thinking", "thinking": "", "signature": ""}
        case _:
            raise unreachable(block)


def _deltas(block: ContentBlock) -> Iterator[JsonObject]:
    match block:
        case TextBlock():
            for piece in _pieces(block.text, TEXT_PIECE_CHARACTERS):
                yield {"type": "text_delta", "text": piece}
        case ToolUseBlock():
            # The real stream opens a tool's input with an empty partial_json; clients
            # must accumulate the pieces and parse once, at content_block_stop.
            yield {"type": "input_json_delta", "partial_json": ""}
            for piece in _pieces(json.dumps(block.tool_input), JSON_PIECE_CHARACTERS):
                yield {"type": "input_json_delta", "partial_json": piece}
        case ThinkingBlock():
            for piece in _pieces(block.thinking, TEXT_PIECE_CHARACTERS):
                yield {"type": "thinking_delta", "thinking": piece}
            yield {"type": "signature_delta", "signature": block.signature}
        case _:
            raise unreachable(block)


def _pieces(text: str, largest: int) -> list[str]:
    """``text`` in pieces of at most ``largest`` characters, at least two when it can be."""
    size = max(1, min(largest, len(text) // 2))
    return [text[start : start + size] for start in range(0, len(text), size)] or [""]


def _tool_use_id(block: ToolUseBlock) -> str:
    if block.tool_use_id is None:
        raise ValueError(f"tool_use block {block.name!r} was never given an id")
    return block.tool_use_id
