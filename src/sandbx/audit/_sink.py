"""Where records go: stderr, one whole line per write, never stdout.

A single ``write`` per record keeps lines from interleaving when several sandbx
processes share one file opened with O_APPEND.
"""

from __future__ import annotations

from sandbx._fdio import write_text
from sandbx.audit._records import Record


class StderrSink:
    """Writes each record as it happens; ``hold`` keeps them back until ``release``.

    Under tui, records on a terminal stderr are held while the screen is up,
    so they do not land under it, and released after the transcript.
    """

    def __init__(self, fd: int = 2) -> None:
        self._fd = fd
        # Appending to a list is atomic under the GIL, and release runs after
        # the turn's thread has ended: no lock, and no threading import on
        # sandbox-run's start.
        self._held: list[str] | None = None

    def write(self, record: Record) -> None:
        line = record.render() + "\n"
        if self._held is not None:
            self._held.append(line)
            return
        # When stderr is closed or its reader is gone, a record cannot be kept
        # anywhere else without breaking the promise that it goes to stderr.
        write_text(self._fd, line)

    def hold(self) -> None:
        if self._held is None:
            self._held = []

    def release(self) -> None:
        held, self._held = self._held or [], None
        write_text(self._fd, "".join(held))
