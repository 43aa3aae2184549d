"""What a scripted Messages server answers: one script entry per valid request, in order.

It owns the kinds of entry (a message, an HTTP error, an error mid-stream, a cut
connection) and the helpers that build them in Python. It refuses an error status the
API has no type for; the JSON form lives in ``_script_json``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping

from sandbx._enum import Enum
from sandbx._exhaustive import unreachable
from sandbx._value import value


class ScriptInvalid(ValueError):
    """A script entry that cannot be followed as written; the message says where and why."""


class StopReason(Enum):
    """Why the model stopped: ``stop_reason`` of the Messages API."""

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    TOOL_USE = "tool_use"
    PAUSE_TURN = "pause_turn"
    REFUSAL = "refusal"


# The Messages API's documented error types and the HTTP status each comes with.
ERROR_TYPE_OF_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
STATUS_OF_ERROR_TYPE = {error_type: status for status, error_type in ERROR_TYPE_OF_STATUS.items()}


@value
class TextBlock:
    text: str


@value
class ToolUseBlock:
    name: str
    tool_input: dict[str, object]
    # None until the server gives it an id from its place in the script.
    tool_use_id: str | None = None


@value
class ThinkingBlock:
    thinking: str
    signature: str


ContentBlock = TextBlock | ToolUseBlock | ThinkingBlock


@value
class Usage:
    input_tokens: int
    output_tokens: int


@value
class Reply:
    """A whole assistant message, streamed or not as the request asks."""

    content: tuple[ContentBlock, ...]
    stop_reason: StopReason
    usage: Usage
    stop_sequence: str | None = None


@value
class ApiError:
    status: int
    error_type: str
    message: str


@value
class ErrorReply:
    """An HTTP error instead of a message, with ``retry-after`` when ``retry_after`` is set."""

    error: ApiError
    retry_after: int | None = None


@value
class StreamErrorReply:
    """The first ``after_events`` events of ``interrupting``, then ``event: error``."""

    after_events: int
    error: ApiError
    interrupting: Reply


@value
class ConnectionCut:
    """The first ``after_events`` events of ``interrupting``, then the socket closes."""

    after_events: int
    interrupting: Reply


ScriptEntry = Reply | ErrorReply | StreamErrorReply | ConnectionCut


# --- building a script in Python ------------------------------------------------------


def text_block(text: str) -> TextBlock:
    return TextBlock(text=text)


def tool_use_block(
    name: str, tool_input: Mapping[str, object] | None = None, *, tool_use_id: str | None = None
) -> ToolUseBlock:
    # A JSON round trip copies the input and proves it can go on the wire.
    copied: dict[str, object] = json.loads(json.dumps(dict(tool_input or {})))
    return ToolUseBlock(name=name, tool_input=copied, tool_use_id=tool_use_id)


def thinking_block(thinking: str, signature: str) -> ThinkingBlock:
    return ThinkingBlock(thinking=thinking, signature=signature)


def reply(
    *content: ContentBlock,
    stop_reason: StopReason | str | None = None,
    usage: Usage | None = None,
    stop_sequence: str | None = None,
) -> Reply:
    """A message; it stops for ``tool_use`` when it has a tool_use block, else ``end_turn``."""
    if stop_reason is None:
        wants_tool = any(isinstance(block, ToolUseBlock) for block in content)
        stop_reason = StopReason.TOOL_USE if wants_tool else StopReason.END_TURN
    return Reply(
        content=content,
        stop_reason=StopReason(stop_reason),
        usage=usage or estimated_usage(content),
        stop_sequence=stop_sequence,
    )


def api_error(
    status: int, *, error_type: str | None = None, message: str | None = None
) -> ApiError:
    """An error of ``status``, typed as the API types that status unless ``error_type`` says."""
    known_type = ERROR_TYPE_OF_STATUS.get(status)
    chosen_type = error_type or known_type
    if chosen_type is None:
        raise ScriptInvalid(f"status {status} has no error type of its own; give error_type")
    return ApiError(
        status=status,
        error_type=chosen_type,
        message=message or f"scripted {chosen_type}",
    )


def error_reply(
    status: int,
    *,
    error_type: str | None = None,
    message: str | None = None,
    retry_after: int | None = None,
) -> ErrorReply:
    error = api_error(status, error_type=error_type, message=message)
    return ErrorReply(error=error, retry_after=retry_after)


def stream_error(
    after_events: int,
    *,
    status: int = 529,
    error_type: str | None = None,
    message: str | None = None,
    interrupting: Reply | None = None,
) -> StreamErrorReply:
    """A 200 stream that breaks off with ``event: error`` (by default ``overloaded_error``)."""
    return StreamErrorReply(
        after_events=after_events,
        error=api_error(status, error_type=error_type, message=message),
        interrupting=interrupting or default_interrupted_reply(),
    )


def connection_cut(after_events: int, *, interrupting: Reply | None = None) -> ConnectionCut:
    return ConnectionCut(
        after_events=after_events, interrupting=interrupting or default_interrupted_reply()
    )


def estimated_usage(content: Iterable[ContentBlock]) -> Usage:
    """About four characters a token, the API documentation's own rule of thumb."""
    characters = 0
    for block in content:
        match block:
            case TextBlock():
                characters += len(block.text)
            case ToolUseBlock():
                characters += len(block.name) + len(json.dumps(block.tool_input))
            case ThinkingBlock():
                characters += len(block.thinking)
            case _:
                raise unreachable(block)
    return Usage(input_tokens=1, output_tokens=max(1, math.ceil(characters / 4)))


def default_interrupted_reply() -> Reply:
    return reply(text_block("This reply was interrupted before it could finish."))


def with_tool_use_ids(script: Iterable[ScriptEntry]) -> tuple[ScriptEntry, ...]:
    """The script with an id, from its place, on every tool_use block that has none.

    Ids derive from positions rather than chance, so a test can name the id of the
    third entry's first block before any request was made.
    """
    return tuple(_entry_with_tool_use_ids(entry, index) for index, entry in enumerate(script))


def scripted_tool_use_id(entry_index: int, block_index: int) -> str:
    return f"toolu_01scripted{entry_index:04d}{block_index:03d}"


def _entry_with_tool_use_ids(entry: ScriptEntry, entry_index: int) -> ScriptEntry:
    match entry:
        case Reply():
            return _reply_with_tool_use_ids(entry, entry_index)
        case ErrorReply():
            return entry
        case StreamErrorReply():
            interrupting = _reply_with_tool_use_ids(entry.interrupting, entry_index)
            return StreamErrorReply(
                after_events=entry.after_events, error=entry.error, interrupting=interrupting
            )
        case ConnectionCut():
            interrupting = _reply_with_tool_use_ids(entry.interrupting, entry_index)
            return ConnectionCut(after_events=entry.after_events, interrupting=interrupting)
        case _:
            raise unreachable(entry)


def _reply_with_tool_use_ids(message: Reply, entry_index: int) -> Reply:
    content = tuple(
        ToolUseBlock(
            name=block.name,
            tool_input=block.tool_input,
            tool_use_id=scripted_tool_use_id(entry_index, block_index),
        )
        if isinstance(block, ToolUseBlock) and block.tool_use_id is None
        else block
        for block_index, block in enumerate(message.content)
    )
    return Reply(
        content=content,
        stop_reason=message.stop_reason,
        usage=message.usage,
        stop_sequence=message.stop_sequence,
    )
