"""The namespaces a sandbox lives in, and the mounts and links set up inside them.

The child is cloned into new user, mount, pid, net and ipc namespaces at once
(``_clone.py``); as PID 1 of them it maps the caller's uid and gid one to one,
keeps mounts from propagating back to the host, and mounts the /proc that
shows only its own processes (a procfs mount takes the pid namespace of
whoever mounts it). The network namespace is left as the kernel makes it: a
loopback link that is down, since Landlock denies TCP there anyway and bringing
it up costs the spawn half a millisecond.
"""

from __future__ import annotations

import os

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
)

SANDBOX_NAMESPACES = CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWNET | CLONE_NEWIPC


def map_caller(uid: int, gid: int) -> None:
    write_id_maps(id_map_writes(uid, gid))


def write_id_maps(writes: tuple[tuple[bytes, bytes], ...]) -> None:
    for name, content in writes:
        fd = os.open(name, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.write(fd, content)
        finally:
            os.close(fd)


def id_map_writes(uid: int, gid: int) -> tuple[tuple[bytes, bytes], ...]:
    """The writes that map the caller one to one, in the order the kernel needs them.

    user_namespaces(7): an unprivileged process may write a gid_map only after
    denying setgroups, and may map exactly its own ids.
    """
    return (
        (b"/proc/self/setgroups", b"deny"),
        (b"/proc/self/uid_map", f"{uid} {uid} 1\n".encode()),
        (b"/proc/self/gid_map", f"{gid} {gid} 1\n".encode()),
    )


def keep_mounts_private() -> None:
    mount(None, "/", None, MS_REC | MS_PRIVATE)


def mount_own_proc() -> None:
    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC)
