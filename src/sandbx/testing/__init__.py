"""Test equipment: a scripted Anthropic Messages API that speaks the real wire protocol on
loopback, so tests drive sandbx's model client without a network or a real model.

Nothing sandbx ships to users imports it; it imports nothing but the standard library.
"""

from sandbx.testing._exchange import RecordedRequest, load_recorded_requests
from sandbx.testing._script import (
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
    connection_cut,
    error_reply,
    reply,
    scripted_tool_use_id,
    stream_error,
    text_block,
    thinking_block,
    tool_use_block,
)
from sandbx.testing._script_json import load_script, parse_script, script_to_json
from sandbx.testing._server import ScriptedMessagesServer

__all__ = [
    "ApiError",
    "ConnectionCut",
    "ContentBlock",
    "ErrorReply",
    "RecordedRequest",
    "Reply",
    "ScriptEntry",
    "ScriptInvalid",
    "ScriptedMessagesServer",
    "StopReason",
    "StreamErrorReply",
    "TextBlock",
    "ThinkingBlock",
    "ToolUseBlock",
    "Usage",
    "api_error",
    "connection_cut",
    "error_reply",
    "load_recorded_requests",
    "load_script",
    "parse_script",
    "reply",
    "script_to_json",
    "scripted_tool_use_id",
    "stream_error",
    "text_block",
    "thinking_block",
    "tool_use_block",
]
