"""Files only their owner may touch: 0700 directories, 0600 files, written atomically or appended.

Shared by the credential store and the session store. A file or directory
that someone else owns, or that anyone but the owner could reach, is refused
with the ``chmod`` that would fix it; nothing here ever loosens a mode.
"""

from __future__ import annotations

import os
import stat

PRIVATE_DIRECTORY_MODE = 0o700
PRIVATE_FILE_MODE = 0o600


class NotPrivate(Exception):
    """A path is reachable by others, owned by someone else, or not what it should be."""

    def __init__(self, path: str, why: str, fix: str) -> None:
        super().__init__(f"{path} {why}")
        self.path = path
        self.why = why
        self.fix = fix


def ensure_private_directory(path: str) -> None:
    """Create ``path`` (and parents) at 0700 if missing; refuse one that is not private."""
    os.makedirs(path, mode=PRIVATE_DIRECTORY_MODE, exist_ok=True)
    check_private(path, directory=True)


def check_private(path: str, *, directory: bool) -> os.stat_result:
    status = os.lstat(path)
    kind_ok = stat.S_ISDIR(status.st_mode) if directory else stat.S_ISREG(status.st_mode)
    if not kind_ok:
        what = "a directory" if directory else "a regular file"
        raise NotPrivate(path, f"is not {what} (a symlink is refused)", f"remove {path}")
    if status.st_uid != os.geteuid():
        raise NotPrivate(path, f"belongs to uid {status.st_uid}, not to you", f"remove {path}")
    if status.st_mode & 0o077:
        wanted = PRIVATE_DIRECTORY_MODE if directory else PRIVATE_FILE_MODE
        mode = stat.S_IMODE(status.st_mode)
        raise NotPrivate(
            path, f"is reachable by others (mode {mode:04o})", f"chmod {wanted:o} {path}"
        )
    return status


def write_atomically(path: str, data: bytes) -> None:
    """Replace ``path`` whole: a crash leaves the old file or the new one, never half of either."""
    directory = os.path.dirname(path)
    temporary = f"{path}.{os.getpid()}.tmp"
    fd = os.open(
        temporary,
        os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
        PRIVATE_FILE_MODE,
    )
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(temporary)
        raise
    os.close(fd)
    os.replace(temporary, path)
    sync_directory(directory)


def sync_directory(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
