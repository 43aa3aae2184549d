"""Writing to a file descriptor whose reader may be gone, without raising.

sandbx writes its records and messages with ``os.write`` on raw descriptors:
no buffering layer to flush, nothing lost at ``os._exit``. When stderr is
closed, or its reader has left, there is nowhere else a line may go, so the
failure is reported as ``False`` rather than raised.
"""

from __future__ import annotations

import os


def write_all(fd: int, data: bytes) -> bool:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        except OSError:
            return False
        view = view[written:]
    return True


def write_text(fd: int, text: str) -> bool:
    return write_all(fd, text.encode("utf-8", "backslashreplace"))
