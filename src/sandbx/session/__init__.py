"""The session store: JSONL transcripts that survive a crash, and refuse what cannot be trusted."""

from sandbx.session._transcript import (
    FORMAT_VERSION,
    SessionFile,
    SessionRefused,
    Transcript,
    TurnRecord,
    list_sessions,
    merged_messages,
    message_blocks,
    new_session_id,
    open_transcript,
    parse_transcript,
    read_transcript,
    vet_session_id,
)

__all__ = [
    "FORMAT_VERSION",
    "SessionFile",
    "SessionRefused",
    "Transcript",
    "TurnRecord",
    "list_sessions",
    "merged_messages",
    "message_blocks",
    "new_session_id",
    "open_transcript",
    "parse_transcript",
    "read_transcript",
    "vet_session_id",
]
