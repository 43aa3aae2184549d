"""One raw ``clone(2)``: a child born in the sandbox's new namespaces, as PID 1 of its own.

``os.fork`` followed by ``unshare`` cannot make the child PID 1 (a new pid
namespace takes effect for the next child only), so it would cost a second
fork per run. Calling the syscall directly with CLONE_NEW* flags does it in
one. The child skips CPython's after-fork bookkeeping and glibc's cached
thread id goes stale in it; both matter only to a process with other threads
or one that calls raise(3), so the caller must be single-threaded (checked
by ``ensure_single_threaded``) and the child only ever leaves through ``execve`` or ``os._exit``.
"""

from __future__ import annotations

import ctypes
import os

from sandbx.boundary._signals import SIGCHLD
from sandbx.boundary._syscalls import MACHINE, syscall_longs

# arch/x86/entry/syscalls/syscall_64.tbl; include/uapi/asm-generic/unistd.h
_SYS_CLONE = {"x86_64": 56, "aarch64": 220}
# include/uapi/linux/sched.h: the kernel stores a pidfd for the child at the
# third argument (parent_tid, on both architectures' argument orders).
_CLONE_PIDFD = 0x00001000


class ThreadedCaller(RuntimeError):
    """Forking a process with more than one thread is unsafe; use a spawner process."""


def ensure_single_threaded() -> None:
    # procfs gives a task directory a link count of 2 plus its number of threads
    # (proc_task_getattr): one stat(2) instead of reading the directory.
    threads = os.stat("/proc/self/task").st_nlink - 2
    if threads < 1:
        threads = len(os.listdir("/proc/self/task"))
    if threads != 1:
        msg = f"sandbx spawns only from a single-threaded process; this one has {threads}"
        raise ThreadedCaller(msg)


def clone_into(namespaces: int) -> tuple[int, int]:
    """Like ``os.fork``, with a pidfd: (0, -1) in the child, (pid, pidfd) in the caller.

    With a NULL stack the child runs on a copy of the caller's stack, as after
    fork; SIGCHLD makes it a child ``waitpid`` sees normally. The pidfd names
    this child for good, so a kill can never reach a recycled pid. The caller
    checks ``ensure_single_threaded`` first.
    """
    pidfd = ctypes.c_int(-1)
    pid = syscall_longs(
        _SYS_CLONE[MACHINE],
        namespaces | _CLONE_PIDFD | SIGCHLD,
        0,
        ctypes.addressof(pidfd),
        0,
        0,
    )
    if pid == 0:
        return 0, -1
    return pid, pidfd.value
