"""One raw ``clone(2)``: a child born in the sandbox's new namespaces, as PID 1 of its own.

``os.fork`` followed by ``unshare`` cannot make the child PID 1 (a new pid
namespace takes effect for the next child only), so it would cost a second
fork per run. Calling the syscall directly with CLONE_NEW* flags does it in
one. The child skips CPython's after-fork bookkeeping and glibc's cached
thread id goes stale in it; both matter only to a process with other threads
or one that calls raise(3), so the caller must be single-threaded (checked
here) and the child only ever leaves through ``execve`` or ``os._exit``.
"""

from __future__ import annotations

import os
import signal

from sandbx.boundary._syscalls import MACHINE, syscall

# arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}


class ThreadedCaller(RuntimeError):
    """Forking a process with more than one thread is unsafe; use a spawner process."""


def clone_into(namespaces: int) -> int:
    """Like ``os.fork``: 0 in the child, the child's pid in the caller.

    With a NULL stack the child runs on a copy of the caller's stack, as after
    fork; SIGCHLD makes it a child ``waitpid`` and pidfd_open(2) see normally.
    """
    threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        msg = f"sandbx spawns only from a single-threaded process; this one has {threads}"
        raise ThreadedCaller(msg)
    return syscall(_SYS_CLONE[MACHINE], namespaces | signal.SIGCHLD, 0, 0, 0, 0)
