"""The signal numbers the spawn path needs, without the ``signal`` module.

``import signal`` builds three enum classes, and with ``enum`` costs every CLI
start about 4 ms; the spawn path needs a handful of numbers and one kill.
x86_64 and aarch64 share these numbers (include/uapi/asm-generic/signal.h,
arch/x86/include/uapi/asm/signal.h); a unit test holds them to ``signal``'s.
"""

from __future__ import annotations

from sandbx.boundary._syscalls import syscall_longs

SIGHUP = 1
SIGINT = 2
SIGQUIT = 3
SIGKILL = 9
SIGPIPE = 13
SIGTERM = 15
SIGCHLD = 17
SIGXFSZ = 25

NAMES = {
    SIGHUP: "SIGHUP",
    SIGINT: "SIGINT",
    SIGQUIT: "SIGQUIT",
    SIGKILL: "SIGKILL",
    SIGPIPE: "SIGPIPE",
    SIGTERM: "SIGTERM",
    SIGCHLD: "SIGCHLD",
    SIGXFSZ: "SIGXFSZ",
}

# The unified syscall table (5.1+), the same number on every architecture.
_SYS_PIDFD_SEND_SIGNAL = 424


def name_of(number: int) -> str:
    return NAMES.get(number, f"signal {number}")


def pidfd_kill(pidfd: int) -> None:
    """SIGKILL the process ``pidfd`` names; raises ProcessLookupError once it is gone."""
    syscall_longs(_SYS_PIDFD_SEND_SIGNAL, pidfd, SIGKILL, 0, 0)
