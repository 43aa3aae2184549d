"""The JSON form of a script: what ``python -m sandbx.testing --script FILE`` reads.

It refuses any entry it could not follow exactly as written (an unknown key, a wrong
type, a stop reason the API does not have) rather than guess what was meant.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from sandbx._exhaustive import unreachable
from sandbx.testing._script import (
    STATUS_OF_ERROR_TYPE,
    ApiError,
    ConnectionCut,
    ContentBlock,
    ErrorReply,
    Reply,
    ScriptEntry,
    ScriptInvalid,
    StopReason,
    StreamErrorReply,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
    Usage,
    api_error,
    default_interrupted_reply,
    reply,
    text_block,
    thinking_block,
    tool_use_block,
)

_REPLY_KEYS = {"content", "stop_reason", "stop_sequence", "usage"}


def load_script(path: str) -> tuple[ScriptEntry, ...]:
    """The script in the JSON file at ``path``: a list of entries."""
    with open(path, encoding="utf-8") as script_file:
        try:
            raw = json.load(script_file)
        except json.JSONDecodeError as exc:
            raise ScriptInvalid(f"{path} is not JSON: {exc}") from exc
    return parse_script(raw)


def parse_script(raw: object) -> tuple[ScriptEntry, ...]:
    if not isinstance(raw, list):
        raise ScriptInvalid("a script is a JSON list of entries")
    return tuple(parse_entry(entry, index) for index, entry in enumerate(raw))


def parse_entry(raw: object, index: int = 0) -> ScriptEntry:
    where = f"script entry {index}"
    entry = _object(raw, where)
    if "cut_after" in entry:
        allowed = {"cut_after", *_REPLY_KEYS}
        _refuse_unknown_keys(entry, allowed, where)
        return ConnectionCut(
            after_events=_count(entry["cut_after"], f"{where}: cut_after"),
            interrupting=_interrupted_reply(entry, where),
        )
    if "stream_error_after" in entry:
        allowed = {"stream_error_after", "error", *_REPLY_KEYS}
        _refuse_unknown_keys(entry, allowed, where)
        return StreamErrorReply(
            after_events=_count(entry["stream_error_after"], f"{where}: stream_error_after"),
            error=_parse_error(entry.get("error", {"status": 529}), where),
            interrupting=_interrupted_reply(entry, where),
        )
    if "error" in entry:
        _refuse_unknown_keys(entry, {"error", "retry_after"}, where)
        retry_after = entry.get("retry_after")
        return ErrorReply(
            error=_parse_error(entry["error"], where),
            retry_after=None
            if retry_after is None
            else _count(retry_after, f"{where}: retry_after"),
        )
    if "content" in entry:
        _refuse_unknown_keys(entry, _REPLY_KEYS, where)
        return _parse_reply(entry, where)
    raise ScriptInvalid(
        f"{where} has none of content, error, stream_error_after or cut_after: {sorted(entry)}"
    )


def _interrupted_reply(entry: Mapping[str, object], where: str) -> Reply:
    if "content" in entry:
        return _parse_reply(entry, where)
    return default_interrupted_reply()


def _parse_reply(entry: Mapping[str, object], where: str) -> Reply:
    raw_content = entry["content"]
    if not isinstance(raw_content, list):
        raise ScriptInvalid(f"{where}: content is a list of blocks")
    content = tuple(
        _parse_block(block, f"{where}: content {position}")
        for position, block in enumerate(raw_content)
    )
    stop_reason = entry.get("stop_reason")
    if stop_reason is not None and stop_reason not in {reason.value for reason in StopReason}:
        known = ", ".join(reason.value for reason in StopReason)
        raise ScriptInvalid(f"{where}: stop_reason {stop_reason!r} is not one of {known}")
    stop_sequence = entry.get("stop_sequence")
    if stop_sequence is not None and not isinstance(stop_sequence, str):
        raise ScriptInvalid(f"{where}: stop_sequence is a string")
    usage = None if entry.get("usage") is None else _parse_usage(entry["usage"], where)
    return reply(
        *content,
        stop_reason=None if stop_reason is None else StopReason(stop_reason),
        usage=usage,
        stop_sequence=stop_sequence,
    )


def _parse_block(raw: object, where: str) -> ContentBlock:
    block = _object(raw, where)
    match block.get("type"):
        case "text":
            _refuse_unknown_keys(block, {"type", "text"}, where)
            return text_block(_string(block.get("text"), f"{where}: text"))
        case "tool_use":
            _refuse_unknown_keys(block, {"type", "name", "input", "id"}, where)
            tool_input = _object(block.get("input", {}), f"{where}: input")
            raw_id = block.get("id")
            return tool_use_block(
                _string(block.get("name"), f"{where}: name"),
                tool_input,
                tool_use_id=None if raw_id is None else _string(raw_id, f"{where}: id"),
            )
        case "thinking":
            _refuse_unknown_keys(block, {"type", "thinking", "signature"}, where)
            return thinking_block(
                _string(block.get("thinking"), f"{where}: thinking"),
                _string(block.get("signature"), f"{where}: signature"),
            )
        case other:
            raise ScriptInvalid(f"{where}: type {other!r} is not text, tool_use or thinking")


def _parse_usage(raw: object, where: str) -> Usage:
    usage = _object(raw, f"{where}: usage")
    _refuse_unknown_keys(usage, {"input_tokens", "output_tokens"}, f"{where}: usage")
    return Usage(
        input_tokens=_count(usage.get("input_tokens", 1), f"{where}: usage.input_tokens"),
        output_tokens=_count(usage.get("output_tokens", 1), f"{where}: usage.output_tokens"),
    )


def _parse_error(raw: object, where: str) -> ApiError:
    error = _object(raw, f"{where}: error")
    _refuse_unknown_keys(error, {"status", "type", "message"}, f"{where}: error")
    raw_type = error.get("type")
    error_type = None if raw_type is None else _string(raw_type, f"{where}: error.type")
    raw_status = error.get("status")
    if raw_status is None:
        if error_type not in STATUS_OF_ERROR_TYPE:
            raise ScriptInvalid(f"{where}: error needs a status or a known type")
        status = STATUS_OF_ERROR_TYPE[error_type]
    else:
        status = _count(raw_status, f"{where}: error.status")
    if not 400 <= status <= 599:
        raise ScriptInvalid(f"{where}: error.status {status} is not an HTTP error status")
    raw_message = error.get("message")
    message = None if raw_message is None else _string(raw_message, f"{where}: error.message")
    return api_error(status, error_type=error_type, message=message)


def _object(raw: object, where: str) -> dict[str, object]:
    if not isinstance(raw, dict) or not all(isinstance(key, str) for key in raw):
        raise ScriptInvalid(f"{where} is not a JSON object")
    return raw


def _string(raw: object, where: str) -> str:
    if not isinstance(raw, str):
        raise ScriptInvalid(f"{where} is not a string")
    return raw


def _count(raw: object, where: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        raise ScriptInvalid(f"{where} is not a whole number of zero or more")
    return raw


def _refuse_unknown_keys(entry: Mapping[str, object], allowed: set[str], where: str) -> None:
    unknown = sorted(set(entry) - allowed)
    if unknown:
        raise ScriptInvalid(f"{where} has unknown keys {unknown}; allowed: {sorted(allowed)}")


def script_to_json(script: Iterable[ScriptEntry]) -> list[dict[str, object]]:
    """The JSON form of ``script``, which ``parse_script`` reads back unchanged."""
    return [_entry_to_json(entry) for entry in script]


def _entry_to_json(entry: ScriptEntry) -> dict[str, object]:
    match entry:
        case Reply():
            return _reply_to_json(entry)
        case ErrorReply():
            as_json: dict[str, object] = {"error": _error_to_json(entry.error)}
            if entry.retry_after is not None:
                as_json["retry_after"] = entry.retry_after
            return as_json
        case StreamErrorReply():
            return {
                "stream_error_after": entry.after_events,
                "error": _error_to_json(entry.error),
                **_reply_to_json(entry.interrupting),
            }
        case ConnectionCut():
            return {"cut_after": entry.after_events, **_reply_to_json(entry.interrupting)}
        case _:
            raise unreachable(entry)


def _reply_to_json(message: Reply) -> dict[str, object]:
    as_json: dict[str, object] = {
        "content": [_block_to_json(block) for block in message.content],
        "stop_reason": message.stop_reason.value,
        "usage": {
            "input_tokens": message.usage.input_tokens,
            "output_tokens": message.usage.output_tokens,
        },
    }
    if message.stop_sequence is not None:
        as_json["stop_sequence"] = message.stop_sequence
    return as_json


def _block_to_json(block: ContentBlock) -> dict[str, object]:
    match block:
        case TextBlock():
            return {"type": "text", "text": block.text}
        case ToolUseBlock():
            as_json: dict[str, object] = {
                "type": "tool_use",
                "name": block.name,
                "input": block.tool_input,
            }
            if block.tool_use_id is not None:
                as_json["id"] = block.tool_use_id
            return as_json
        case ThinkingBlock():
            return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
        case _:
            raise unreachable(block)


def _error_to_json(error: ApiError) -> dict[str, object]:
    return {"status": error.status, "type": error.error_type, "message": error.message}
