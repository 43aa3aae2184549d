"""Re-opening a vetted grant inside the sandbox, refusing one that moved since derivation.

The path is resolved with RESOLVE_NO_SYMLINKS (openat2(2)), so a symlink planted
anywhere along it is refused (``grant_redirected``), and the file found must be
the (device, inode) recorded at derivation (``grant_replaced``). Grants on the
sandbox's own /proc are checked by file system instead: they name a procfs
mounted after derivation.
"""

from __future__ import annotations

import errno
import os

from sandbx.boundary._outcome import FailureReason, StageFailure
from sandbx.boundary._syscalls import RESOLVE_NO_SYMLINKS, openat2


def open_pinned(path: str, *, device: int, inode: int, on_procfs: bool = False) -> int:
    """An O_PATH descriptor on the very file the policy named; raises ``StageFailure``."""
    try:
        fd = openat2(path, os.O_PATH | os.O_CLOEXEC, RESOLVE_NO_SYMLINKS)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise StageFailure(
                FailureReason.GRANT_REDIRECTED,
                f"{path} now passes through a symlink; it did not at derivation",
            ) from exc
        raise StageFailure(
            FailureReason.GRANT_REPLACED, f"{path} can no longer be opened: {exc.strerror}"
        ) from exc
    status = os.fstat(fd)
    if on_procfs:
        matches = status.st_dev == os.stat("/proc").st_dev
    else:
        matches = (status.st_dev, status.st_ino) == (device, inode)
    if not matches:
        os.close(fd)
        raise StageFailure(
            FailureReason.GRANT_REPLACED,
            f"{path} is not the file it was when the policy was derived",
        )
    return fd
