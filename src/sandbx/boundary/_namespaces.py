"""The namespaces a sandbox lives in, and the mounts and links set up inside them.

Stage 1 enters new user, mount, pid, net and ipc namespaces in one ``unshare``,
maps the caller's uid and gid one to one, and keeps mounts from propagating
back to the host. Stage 2, PID 1 of the new pid namespace, mounts the /proc
that shows only its own processes (a procfs mount takes the pid namespace of
whoever mounts it).
"""

from __future__ import annotations

import ctypes
import os
import struct

from sandbx.boundary._syscalls import (
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    MS_NODEV,
    MS_NOEXEC,
    MS_NOSUID,
    MS_PRIVATE,
    MS_REC,
    mount,
    unshare,
)

SANDBOX_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC


_libc = ctypes.CDLL(None, use_errno=True)
_libc.ioctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p]

# include/uapi/linux/sockios.h and if.h
_SIOCGIFFLAGS = 0x8913
_SIOCSIFFLAGS = 0x8914
_IFF_UP = 0x1
_AF_INET = 2
_SOCK_DGRAM = 2
_IFREQ = struct.Struct("16sH22x")


def enter_user_namespace(flags: int) -> None:
    """Raises ``PermissionError`` (or ENOSPC) where unprivileged user namespaces are off."""
    unshare(flags)


def map_caller(uid: int, gid: int) -> None:
    # user_namespaces(7): an unprivileged process may write a gid_map only
    # after denying setgroups, and may map exactly its own ids.
    _write_proc_self("setgroups", "deny")
    _write_proc_self("uid_map", f"{uid} {uid} 1\n")
    _write_proc_self("gid_map", f"{gid} {gid} 1\n")


def keep_mounts_private() -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def mount_own_proc() -> None:
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)


def bring_loopback_up() -> None:
    sock = _libc.socket(_AF_INET, _SOCK_DGRAM, 0)
    if sock < 0:
        raise OSError(ctypes.get_errno(), "socket for the loopback link")
    try:
        request = ctypes.create_string_buffer(_IFREQ.pack(b"lo", 0), _IFREQ.size)
        _ioctl(sock, _SIOCGIFFLAGS, request)
        _name, flags = _IFREQ.unpack(request.raw)
        ctypes.memmove(request, _IFREQ.pack(b"lo", flags | _IFF_UP), _IFREQ.size)
        _ioctl(sock, _SIOCSIFFLAGS, request)
    finally:
        os.close(sock)


def _ioctl(fd: int, request: int, buffer: ctypes.Array[ctypes.c_char]) -> None:
    if _libc.ioctl(fd, request, ctypes.addressof(buffer)) < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def _write_proc_self(name: str, content: str) -> None:
    fd = os.open(f"/proc/self/{name}", os.O_WRONLY | os.O_CLOEXEC)
    try:
        os.write(fd, content.encode())
    finally:
        os.close(fd)
