"""Lay the run's own /etc/hosts, nsswitch.conf and resolv.conf over the host's, read-only.

For ``--allow-dns``: the files are written into a detached tmpfs (fsopen(2),
fsmount(2); never attached where the command could find it), then each is
bind-mounted read-only, no-exec, over its /etc path in the sandbox's private
mount namespace. The host's files are never opened for writing. A host that
forbids mounts in an unprivileged user namespace refuses the run.
"""

from __future__ import annotations

import errno
import os

from sandbx.boundary._mounts import (
    MOUNT_ATTR_NODEV,
    MOUNT_ATTR_NOEXEC,
    MOUNT_ATTR_NOSUID,
    MOUNT_ATTR_RDONLY,
    attach_clone,
    move_mount_to,
)
from sandbx.boundary._outcome import FailureReason, StageFailure
from sandbx.boundary._syscalls import syscall, umount
from sandbx.policy import ResolverFiles

# include/uapi/asm-generic/unistd.h: the same numbers on every architecture.
_SYS_FSOPEN = 430
_SYS_FSCONFIG = 431
_SYS_FSMOUNT = 432
# include/uapi/linux/mount.h, fcntl.h
_FSOPEN_CLOEXEC = 0x00000001
_FSCONFIG_CMD_CREATE = 6
_FSMOUNT_CLOEXEC = 0x00000001
_MNT_DETACH = 2
_AT_FDCWD = -100

_LAID_READ_ONLY = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV
_RESOLV_CONF = "/etc/resolv.conf"

_Placement = tuple[str, str, str]  # name in the scratch tmpfs, /etc target, content


def lay_resolver_files(files: ResolverFiles) -> tuple[str, ...]:
    """The /etc paths now showing the run's files; resolv.conf only where the host has one."""
    placements: list[_Placement] = [
        ("hosts", "/etc/hosts", files.hosts),
        ("nsswitch.conf", "/etc/nsswitch.conf", files.nsswitch),
    ]
    # resolv.conf may be a symlink (systemd-resolved's stub): the bind lands on
    # its target, inside this mount namespace alone.
    if os.path.exists(_RESOLV_CONF):
        placements.append(("resolv.conf", _RESOLV_CONF, files.resolv))
    scratch = _detached_tmpfs()
    try:
        _write_files(scratch, placements)
        try:
            _attach_each(scratch, "", placements)
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                raise
            _attach_through_a_borrowed_directory(scratch, placements)
    finally:
        os.close(scratch)
    return tuple(target for _name, target, _content in placements)


def _write_files(scratch: int, placements: list[_Placement]) -> None:
    for name, _target, content in placements:
        fd = os.open(
            name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o444, dir_fd=scratch
        )
        try:
            os.write(fd, content.encode("utf-8", "surrogateescape"))
        finally:
            os.close(fd)


def _attach_each(source_dir: int, prefix: str, placements: list[_Placement]) -> None:
    for name, target, _content in placements:
        attach_clone(
            source_dir,
            os.path.join(prefix, name) if prefix else name,
            target,
            set_flags=_LAID_READ_ONLY,
            follow_target_symlinks=target == _RESOLV_CONF,
        )


def _attach_through_a_borrowed_directory(scratch: int, placements: list[_Placement]) -> None:
    """Kernels before 6.15 clone only from a mount attached in this namespace: attach the
    scratch tmpfs over a directory for a moment, clone from it, then detach it again."""
    # In the private mount namespace: the host's /tmp is not touched.
    borrowed = next(path for path in ("/tmp", "/mnt", "/dev") if os.path.isdir(path))  # noqa: S108
    move_mount_to(scratch, borrowed)
    try:
        _attach_each(_AT_FDCWD, borrowed, placements)
    finally:
        umount(borrowed, _MNT_DETACH)


def _detached_tmpfs() -> int:
    try:
        context = syscall(_SYS_FSOPEN, b"tmpfs", _FSOPEN_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            raise StageFailure(
                FailureReason.UNSUPPORTED,
                "this host forbids mounts in an unprivileged user namespace, which --allow-dns "
                f"needs ({exc.strerror}); see `sandbx doctor`",
            ) from exc
        raise
    try:
        syscall(_SYS_FSCONFIG, context, _FSCONFIG_CMD_CREATE, 0, 0, 0)
        return syscall(
            _SYS_FSMOUNT, context, _FSMOUNT_CLOEXEC, MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSUID
        )
    finally:
        os.close(context)
