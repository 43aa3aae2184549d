"""Re-opening a vetted grant inside the sandbox, refusing one that moved since derivation.

The path is resolved with RESOLVE_NO_SYMLINKS (openat2(2)), so a symlink planted
anywhere along it is refused (``grant_redirected``), and the file found must be
the (device, inode) recorded at derivation (``grant_replaced``). Grants on the
sandbox's own /proc are checked by file system instead: they name a procfs
mounted after derivation. The C path and the ``open_how`` are built before the
fork, so the sandboxed child only makes the calls.
"""

from __future__ import annotations

import ctypes
import errno
import os

from sandbx.boundary._outcome import FailureReason, StageFailure
from sandbx.boundary._syscalls import (
    RESOLVE_NO_SYMLINKS,
    SYS_OPENAT2,
    OpenHow,
    c_buffer,
    syscall_longs,
)
from sandbx.policy import VettedGrant

_AT_FDCWD = -100
# One open_how serves every pinned open: O_PATH needs no access right of its own.
_HOW = OpenHow(flags=os.O_PATH | os.O_CLOEXEC, mode=0, resolve=RESOLVE_NO_SYMLINKS)
_HOW_ADDRESS = ctypes.addressof(_HOW)
_HOW_SIZE = ctypes.sizeof(_HOW)


class PinnedPath:
    """A path the policy vetted, and the file it must still name."""

    __slots__ = ("_c_path", "address", "device", "inode", "on_procfs", "path")

    def __init__(self, path: str, *, device: int, inode: int, on_procfs: bool = False) -> None:
        self.path = path
        self.device = device
        self.inode = inode
        self.on_procfs = on_procfs
        self._c_path, self.address = c_buffer(os.fsencode(path))

    @classmethod
    def of(cls, grant: VettedGrant) -> PinnedPath:
        return cls(grant.path, device=grant.device, inode=grant.inode, on_procfs=grant.on_procfs)

    def open(self) -> int:
        """An O_PATH descriptor on the very file the policy named; raises ``StageFailure``."""
        try:
            fd = syscall_longs(SYS_OPENAT2, _AT_FDCWD, self.address, _HOW_ADDRESS, _HOW_SIZE)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise StageFailure(
                    FailureReason.GRANT_REDIRECTED,
                    f"{self.path} now passes through a symlink; it did not at derivation",
                ) from exc
            raise StageFailure(
                FailureReason.GRANT_REPLACED,
                f"{self.path} can no longer be opened: {exc.strerror}",
            ) from exc
        status = os.fstat(fd)
        if self.on_procfs:
            matches = status.st_dev == os.stat("/proc").st_dev
        else:
            matches = status.st_ino == self.inode and status.st_dev == self.device
        if not matches:
            os.close(fd)
            raise StageFailure(
                FailureReason.GRANT_REPLACED,
                f"{self.path} is not the file it was when the policy was derived",
            )
        return fd
