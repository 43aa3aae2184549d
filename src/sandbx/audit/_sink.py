"""Where records go: stderr, one whole line per write, never stdout.

A single ``write`` per record keeps lines from interleaving when several sandbx
processes share one file opened with O_APPEND.
"""

from __future__ import annotations

from sandbx._fdio import write_text
from sandbx.audit._records import Record


class StderrSink:
    def __init__(self, fd: int = 2) -> None:
        self._fd = fd

    def write(self, record: Record) -> None:
        # When stderr is closed or its reader is gone, a record cannot be kept
        # anywhere else without breaking the promise that it goes to stderr.
        write_text(self._fd, record.render() + "\n")
