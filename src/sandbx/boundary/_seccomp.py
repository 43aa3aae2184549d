"""The seccomp filter: which syscalls a sandboxed command may not make, and how it is told.

Denied calls fail with EPERM, except ``clone3``, which fails with ENOSYS so the C
library falls back to ``clone``, whose flags a classic BPF filter can read (it
cannot follow clone3's pointer). A syscall from a foreign architecture, or an
x32 number on x86_64, kills the process: its numbers would mean other calls.
Numbers are from the kernel's syscall tables, per architecture.
"""

from __future__ import annotations

import ctypes
import errno as errno_codes

from sandbx._value import value
from sandbx.boundary import _bpf
from sandbx.boundary._bpf import Instruction
from sandbx.boundary._syscall_numbers import SYSCALL_NUMBERS
from sandbx.boundary._syscalls import (
    CLONE_NEWCGROUP,
    CLONE_NEWIPC,
    CLONE_NEWNET,
    CLONE_NEWNS,
    CLONE_NEWPID,
    CLONE_NEWUSER,
    CLONE_NEWUTS,
    MACHINE,
    PR_SET_SECCOMP,
    prctl,
)
from sandbx.policy import NetworkKind

# include/uapi/linux/seccomp.h
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_KILL_PROCESS = 0x80000000
SECCOMP_RET_ERRNO = 0x00050000
SECCOMP_RET_ALLOW = 0x7FFF0000

# include/uapi/linux/audit.h: AUDIT_ARCH_* = EM_* | __AUDIT_ARCH_64BIT | __AUDIT_ARCH_LE
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# arch/x86/include/uapi/asm/unistd.h: x32 numbers carry this bit.
X32_SYSCALL_BIT = 0x40000000

# include/linux/socket.h, include/linux/net.h
AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
SOCK_STREAM = 1
SOCK_SEQPACKET = 5
SOCK_TYPE_MASK = 0xF
# include/uapi/linux/in.h, tcp.h, include/linux/socket.h
IPPROTO_TCP = 6
SOL_TCP = 6
TCP_ULP = 31
MSG_FASTOPEN = 0x20000000

# include/uapi/asm-generic/ioctls.h: push a byte into a terminal's input; the
# Linux console's multiplexer (whose subcode 2 pastes a selection).
TIOCSTI = 0x5412
TIOCLINUX = 0x541C

NAMESPACE_CLONE_FLAGS = (
    CLONE_NEWNS
    | CLONE_NEWCGROUP
    | CLONE_NEWUTS
    | CLONE_NEWIPC
    | CLONE_NEWUSER
    | CLONE_NEWPID
    | CLONE_NEWNET
)

# The calls refused outright: debugging other processes, reaching into their
# memory or descriptors, every way to mount or leave the mount tree, entering
# or making namespaces, kernel modules and kexec, eBPF, the kernel keyrings,
# perf, userfaultfd (a race amplifier), io_uring (a second syscall path that
# seccomp does not see), anonymous executable memory files, reboot and swap,
# and the kernel log (readable by anyone where kernel.dmesg_restrict=0).
DENIED_WITH_EPERM = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_open",
    "pidfd_getfd",
    "mount",
    "umount2",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "move_mount",
    "open_tree",
    "open_tree_attr",
    "mount_setattr",
    "pivot_root",
    "chroot",
    "setns",
    "unshare",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "bpf",
    "add_key",
    "request_key",
    "keyctl",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "memfd_create",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
)


def errno_action(code: int) -> int:
    return SECCOMP_RET_ERRNO | code


EPERM = errno_action(errno_codes.EPERM)
ENOSYS = errno_action(errno_codes.ENOSYS)


@value
class FilterOptions:
    allow_unix_sockets: bool = False
    network: NetworkKind = NetworkKind.DENIED
    # The confined worker of the file tools runs no program and opens no socket.
    file_worker: bool = False


# What the confined worker may not do beyond a command: run a program, make a
# process, open a socket of any kind.
WORKER_DENIED = ("execve", "execveat", "fork", "vfork", "clone", "socket", "socketpair")


def is_supported_machine(machine: str = MACHINE) -> bool:
    return machine in AUDIT_ARCH


def build_filter(options: FilterOptions, machine: str = MACHINE) -> list[Instruction]:
    numbers = SYSCALL_NUMBERS[machine]
    program: list[Instruction] = [
        _bpf.load(_bpf.OFFSET_ARCH),
        _bpf.jump_if_equal(AUDIT_ARCH[machine], if_true=1),
        _bpf.give(SECCOMP_RET_KILL_PROCESS),
        _bpf.load(_bpf.OFFSET_NR),
    ]
    if machine == "x86_64":
        program += [
            _bpf.jump_if_at_least(X32_SYSCALL_BIT, if_false=1),
            _bpf.give(SECCOMP_RET_KILL_PROCESS),
        ]
    # The first rule given for a number wins: the worker's refusals come before
    # the bodies that would allow some calls of the same syscall.
    rules: dict[int, list[Instruction]] = {}
    for name in DENIED_WITH_EPERM:
        rules.setdefault(numbers[name], [_bpf.give(EPERM)])
    if options.file_worker:
        for name in WORKER_DENIED:
            if name in numbers:  # aarch64 has no fork or vfork
                rules.setdefault(numbers[name], [_bpf.give(EPERM)])
    rules.setdefault(numbers["clone3"], [_bpf.give(ENOSYS)])
    rules.setdefault(numbers["clone"], _clone_without_namespaces())
    rules.setdefault(numbers["ioctl"], _ioctl_without_terminal_injection())
    if options.network is NetworkKind.PORTS:
        rules.setdefault(
            numbers["socket"], _tcp_sockets_only(allow_unix=options.allow_unix_sockets)
        )
        rules.setdefault(numbers["setsockopt"], _setsockopt_without_tcp_ulp())
        rules.setdefault(numbers["sendto"], _send_without_fastopen(flags_argument=3))
        rules.setdefault(numbers["sendmmsg"], _send_without_fastopen(flags_argument=3))
        rules.setdefault(numbers["sendmsg"], _send_without_fastopen(flags_argument=2))
    elif not options.allow_unix_sockets:
        rules.setdefault(numbers["socket"], _socket_without_unix())
    if not options.allow_unix_sockets:
        rules.setdefault(numbers["socketpair"], _socketpair_connected_unix_only())
    return program + _dispatch(sorted(rules.items()))


# A leaf of the dispatch tree compares at most this many numbers in a row.
_LEAF_SIZE = 3
# Classic BPF jump offsets are one byte.
_LONGEST_JUMP = 255


def _dispatch(rules: list[tuple[int, list[Instruction]]]) -> list[Instruction]:
    """A binary search on the syscall number (in A) over ``rules``, sorted by number;
    a number without a rule is allowed.

    Each rule's body ends in a RET, so A need not be restored after it. A search
    rather than a row of comparisons matters twice: a syscall the filter does not
    cache walks a few jumps, and the kernel, which emulates the filter for every
    syscall number when it is installed (to cache the plainly allowed ones),
    does it in a fraction of the time, on every spawn.
    """
    if len(rules) <= _LEAF_SIZE:
        program: list[Instruction] = []
        for number, body in rules:
            program += [_bpf.jump_if_equal(number, if_false=len(body)), *body]
        return [*program, _bpf.give(SECCOMP_RET_ALLOW)]
    middle = len(rules) // 2
    below = _dispatch(rules[:middle])
    above = _dispatch(rules[middle:])
    if len(below) > _LONGEST_JUMP:
        msg = f"the seccomp dispatch needs a jump of {len(below)} instructions"
        raise ValueError(msg)
    return [_bpf.jump_if_at_least(rules[middle][0], if_true=len(below)), *below, *above]


def _clone_without_namespaces() -> list[Instruction]:
    return [
        _bpf.load(_bpf.offset_of_arg_low_word(0)),
        _bpf.jump_if_any_bit(NAMESPACE_CLONE_FLAGS, if_false=1),
        _bpf.give(EPERM),
        _bpf.give(SECCOMP_RET_ALLOW),
    ]


def _ioctl_without_terminal_injection() -> list[Instruction]:
    # ioctl's request is an unsigned int: the kernel ignores the upper 32 bits,
    # so comparing the low word is exact and cannot be dodged by setting them.
    return [
        _bpf.load(_bpf.offset_of_arg_low_word(1)),
        _bpf.jump_if_equal(TIOCSTI, if_true=1),
        _bpf.jump_if_equal(TIOCLINUX, if_false=1),
        _bpf.give(EPERM),
        _bpf.give(SECCOMP_RET_ALLOW),
    ]


def _socket_without_unix() -> list[Instruction]:
    return [
        _bpf.load(_bpf.offset_of_arg_low_word(0)),
        _bpf.jump_if_equal(AF_UNIX, if_false=1),
        _bpf.give(EPERM),
        _bpf.give(SECCOMP_RET_ALLOW),
    ]


def _socketpair_connected_unix_only() -> list[Instruction]:
    # A connected pair cannot address anyone else; a datagram pair can sendto()
    # any pathname socket on the host, which Landlock below ABI 9 does not see.
    return [
        _bpf.load(_bpf.offset_of_arg_low_word(0)),
        _bpf.jump_if_equal(AF_UNIX, if_false=5),
        _bpf.load(_bpf.offset_of_arg_low_word(1)),
        _bpf.and_mask(SOCK_TYPE_MASK),
        _bpf.jump_if_equal(SOCK_STREAM, if_true=2),
        _bpf.jump_if_equal(SOCK_SEQPACKET, if_true=1),
        _bpf.give(EPERM),
        _bpf.give(SECCOMP_RET_ALLOW),
    ]


def _tcp_sockets_only(*, allow_unix: bool) -> list[Instruction]:
    """Under a port list, Landlock sees only TCP; every other socket is refused here.

    Allowed: AF_INET and AF_INET6 stream sockets whose protocol is 0 or TCP (not
    MPTCP, not SCTP), and AF_UNIX where granted. Refused: UDP and every other
    type, raw sockets, and every other family.
    """
    unix_action = SECCOMP_RET_ALLOW if allow_unix else EPERM
    return [
        _bpf.load(_bpf.offset_of_arg_low_word(0)),
        _bpf.jump_if_equal(AF_UNIX, if_false=1),
        _bpf.give(unix_action),
        _bpf.jump_if_equal(AF_INET, if_true=1),
        _bpf.jump_if_equal(AF_INET6, if_false=7),
        _bpf.load(_bpf.offset_of_arg_low_word(1)),
        _bpf.and_mask(SOCK_TYPE_MASK),
        _bpf.jump_if_equal(SOCK_STREAM, if_false=4),
        _bpf.load(_bpf.offset_of_arg_low_word(2)),
        _bpf.jump_if_equal(0, if_true=1),
        _bpf.jump_if_equal(IPPROTO_TCP, if_false=1),
        _bpf.give(SECCOMP_RET_ALLOW),
        _bpf.give(EPERM),
    ]


def _setsockopt_without_tcp_ulp() -> list[Instruction]:
    # TCP_ULP attaches an upper-layer protocol (kTLS) whose traffic Landlock
    # does not see; level and optname are ints, so the low words are exact.
    return [
        _bpf.load(_bpf.offset_of_arg_low_word(1)),
        _bpf.jump_if_equal(SOL_TCP, if_false=3),
        _bpf.load(_bpf.offset_of_arg_low_word(2)),
        _bpf.jump_if_equal(TCP_ULP, if_false=1),
        _bpf.give(EPERM),
        _bpf.give(SECCOMP_RET_ALLOW),
    ]


def _send_without_fastopen(*, flags_argument: int) -> list[Instruction]:
    # MSG_FASTOPEN connects as it sends, a path Landlock's connect hook did not
    # always cover; the flags are an int, so the low word is exact.
    return [
        _bpf.load(_bpf.offset_of_arg_low_word(flags_argument)),
        _bpf.jump_if_any_bit(MSG_FASTOPEN, if_false=1),
        _bpf.give(EPERM),
        _bpf.give(SECCOMP_RET_ALLOW),
    ]


class SockFprog(ctypes.Structure):
    """``struct sock_fprog``, include/uapi/linux/filter.h."""

    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


@value(kw_only=False)
class CompiledFilter:
    """A filter encoded ahead of the clone, so the child only hands it to the kernel."""

    code: bytes
    length: int


def compile_filter(options: FilterOptions) -> CompiledFilter:
    program = build_filter(options)
    return CompiledFilter(code=_bpf.encode(program), length=len(program))


class PreparedFilter:
    """A compiled filter in the C memory the kernel reads, built before the fork."""

    def __init__(self, compiled: CompiledFilter) -> None:
        self._code = ctypes.create_string_buffer(compiled.code, len(compiled.code))
        self._program = SockFprog(len=compiled.length, filter=ctypes.addressof(self._code))
        self._program_address = ctypes.addressof(self._program)

    def install(self) -> None:
        """Install on this process; no_new_privs must already be set (seccomp(2))."""
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, self._program_address)


def install(compiled: CompiledFilter) -> None:
    PreparedFilter(compiled).install()
