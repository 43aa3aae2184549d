"""Raw kernel calls through ctypes: the only place sandbx talks to libc directly.

Each wrapper raises ``OSError`` with the kernel's errno; callers translate it.
Syscall numbers differ by architecture and come from the kernel's
``arch/*/entry/syscalls`` tables (x86_64) and ``include/uapi/asm-generic/unistd.h``
(aarch64). Integer arguments are passed as explicit C types: ctypes would
otherwise truncate them to ``int``.
"""

from __future__ import annotations

import ctypes
import os
import sys

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.restype = ctypes.c_int
_libc.prctl.argtypes = [ctypes.c_int, *[ctypes.c_ulong] * 4]
_libc.unshare.argtypes = [ctypes.c_int]
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]

MACHINE = os.uname().machine

# Numbers shared by every architecture sandbx runs on (the unified table, 5.1+).
SYS_CLOSE_RANGE = 436
SYS_OPENAT2 = 437
SYS_LANDLOCK_CREATE_RULESET = 444
SYS_LANDLOCK_ADD_RULE = 445
SYS_LANDLOCK_RESTRICT_SELF = 446

_SYS_SECCOMP = {"x86_64": 317, "aarch64": 277}
_SYS_CAPSET = {"x86_64": 126, "aarch64": 91}

# include/uapi/linux/prctl.h
PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_SECUREBITS = 28
PR_SET_NO_NEW_PRIVS = 38
PR_GET_NO_NEW_PRIVS = 39
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4
PR_SET_SECCOMP = 22
PR_GET_SECCOMP = 21

# include/uapi/linux/sched.h
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000

# include/uapi/linux/mount.h
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REC = 0x4000
MS_PRIVATE = 1 << 18

# include/uapi/linux/openat2.h
RESOLVE_NO_SYMLINKS = 0x04
RESOLVE_NO_MAGICLINKS = 0x02

# include/uapi/linux/close_range.h
CLOSE_RANGE_CLOEXEC = 1 << 2


# The same syscall(3) with every argument a C long, for the spawn's hot path:
# its callers pass integers and the addresses of buffers prepared before the
# fork, so a call builds no argument objects (each object the child touches
# costs it a copy-on-write page fault). glibc's syscall(3) is variadic, but on
# x86_64 and aarch64 variadic integer arguments travel in the same registers as
# fixed ones, and it only moves them into place, so a fixed prototype reaches
# it intact.
_syscall_longs = ctypes.CFUNCTYPE(ctypes.c_long, *[ctypes.c_long] * 7, use_errno=True)(
    ("syscall", _libc)
)


def _checked(result: int) -> int:
    if result == -1:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
    return result


def syscall(number: int, *args: int | bytes | ctypes.c_void_p) -> int:
    """Call ``number``; a ``bytes`` argument is passed as a NUL-terminated ``char *``
    that ctypes keeps alive for the duration of the call."""
    converted = [ctypes.c_long(arg) if isinstance(arg, int) else arg for arg in args]
    return _checked(int(_libc.syscall(ctypes.c_long(number), *converted)))


def syscall_longs(number: int, *args: int) -> int:
    """Like ``syscall``, for at most six integer arguments (pointers as addresses)."""
    return _checked(_syscall_longs(number, *args, *_ZEROS[len(args) :]))


_ZEROS = (0,) * 6


def c_buffer(data: bytes) -> tuple[ctypes.Array[ctypes.c_char], int]:
    """A NUL-terminated C copy of ``data`` and its address; keep the buffer alive while in use."""
    buffer = ctypes.create_string_buffer(data)
    return buffer, ctypes.addressof(buffer)


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return _checked(_libc.prctl(option, arg2, arg3, arg4, arg5))


def prctl_errno(option: int, arg2: int = 0) -> int:
    """prctl(2) that reports failure as its errno (0 for success) instead of raising."""
    if _libc.prctl(option, arg2, 0, 0, 0) == -1:
        return ctypes.get_errno()
    return 0


def unshare(flags: int) -> None:
    _checked(_libc.unshare(flags))


def mount(source: str | None, target: str, fstype: str | None, flags: int) -> None:
    _checked(
        _libc.mount(
            None if source is None else os.fsencode(source),
            os.fsencode(target),
            None if fstype is None else os.fsencode(fstype),
            flags,
            None,
        )
    )


def umount(target: str, flags: int) -> None:
    _checked(_libc.umount2(os.fsencode(target), flags))


def seccomp_syscall_number() -> int:
    return _arch_number(_SYS_SECCOMP)


def capset_syscall_number() -> int:
    return _arch_number(_SYS_CAPSET)


def _arch_number(table: dict[str, int]) -> int:
    try:
        return table[MACHINE]
    except KeyError:
        raise OSError(38, f"sandbx has no syscall table for {MACHINE}") from None


class OpenHow(ctypes.Structure):
    """``struct open_how``, include/uapi/linux/openat2.h."""

    _fields_ = (
        ("flags", ctypes.c_uint64),
        ("mode", ctypes.c_uint64),
        ("resolve", ctypes.c_uint64),
    )


def close_descriptors_but(kept: tuple[int, ...]) -> None:
    """Close every descriptor above 2 except ``kept``, a range at a time (close_range(2))."""
    low = 3
    for fd in sorted(fd for fd in kept if fd >= low):
        if fd > low:
            syscall_longs(SYS_CLOSE_RANGE, low, fd - 1, 0)
        low = fd + 1
    syscall_longs(SYS_CLOSE_RANGE, low, 0xFFFFFFFF, 0)


def close_range_cloexec(first: int) -> None:
    syscall_longs(SYS_CLOSE_RANGE, first, 0xFFFFFFFF, CLOSE_RANGE_CLOEXEC)


# include/uapi/linux/signalfd.h: the flags are O_CLOEXEC and O_NONBLOCK.
_SFD_CLOEXEC = os.O_CLOEXEC
_SFD_NONBLOCK = os.O_NONBLOCK
# struct signalfd_siginfo is 128 bytes; ssi_signo, a u32, comes first.
_SIGNALFD_SIGINFO_SIZE = 128
_libc.signalfd.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]


_libc.sigprocmask.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
_libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
_libc.signal.restype = ctypes.c_void_p
SIG_BLOCK = 0
SIG_SETMASK = 2


class SignalSet:
    """A C ``sigset_t`` (glibc's is 1024 bits; signal n is bit n - 1).

    The spawn path changes masks through these rather than ``signal.pthread_sigmask``,
    which turns each old mask into a set of enum members: Python objects touched
    while a copy-on-write child is alive.
    """

    __slots__ = ("_words", "address")

    def __init__(self, signals: frozenset[int] = frozenset()) -> None:
        self._words = (ctypes.c_ulong * (1024 // (8 * ctypes.sizeof(ctypes.c_ulong))))()
        for number in signals:
            self._words[0] |= 1 << (number - 1)
        self.address = ctypes.addressof(self._words)


def set_signal_mask(how: int, signals: SignalSet, previous: SignalSet | None = None) -> None:
    """sigprocmask(2) on the calling thread, the only one: the caller is single-threaded."""
    _checked(
        _libc.sigprocmask(how, signals.address, None if previous is None else previous.address)
    )


def set_disposition(signal_number: int, *, ignored: bool) -> None:
    """SIG_IGN or SIG_DFL, for a child about to exec (Python's own handler table is not
    updated). Setting SIG_IGN also discards the signal if it is pending (signal(7))."""
    if _libc.signal(signal_number, _SIG_IGN if ignored else _SIG_DFL) == _SIG_ERR:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


_SIG_DFL = 0
_SIG_IGN = 1
_SIG_ERR = ctypes.c_void_p(-1).value


def open_signalfd(signals: SignalSet) -> int:
    """A non-blocking descriptor that reads ``signals`` while they are blocked."""
    return _checked(_libc.signalfd(-1, signals.address, _SFD_CLOEXEC | _SFD_NONBLOCK))


def read_signal(signal_fd: int) -> int:
    """The number of the next signal waiting on ``signal_fd``, or 0 when none is."""
    try:
        info = os.read(signal_fd, _SIGNALFD_SIGINFO_SIZE)
    except BlockingIOError:
        return 0
    return int.from_bytes(info[:4], sys.byteorder)
