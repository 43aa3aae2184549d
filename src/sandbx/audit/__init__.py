"""The audit trail: the closed set of records, their exact format, and their sink (stderr).

It records what the boundary was asked to do and how each run ended; it never
records a command's output or an environment value.
"""

from sandbx.audit._file_records import file_access
from sandbx.audit._records import (
    FILTER_WORD,
    MARKER,
    NO_SESSION,
    NOT_A_RECORD,
    Record,
    RecordKind,
    cut_args,
    quote,
    unforgeable,
)
from sandbx.audit._run_records import degraded, ended, spawned, unresolved_names
from sandbx.audit._sink import StderrSink
from sandbx.audit._spawn_id import next_spawn_id

__all__ = [
    "FILTER_WORD",
    "MARKER",
    "NOT_A_RECORD",
    "NO_SESSION",
    "Record",
    "RecordKind",
    "StderrSink",
    "cut_args",
    "degraded",
    "ended",
    "file_access",
    "next_spawn_id",
    "quote",
    "spawned",
    "unforgeable",
    "unresolved_names",
]
