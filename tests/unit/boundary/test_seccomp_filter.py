"""The seccomp filter's logic, syscall by syscall through the classic-BPF evaluator.

Both architectures' tables; tests/boundary/test_syscalls.py proves the kernel applies the rules.
"""

from __future__ import annotations

import errno
import itertools
import re
from pathlib import Path

import pytest

from sandbx.boundary import _bpf
from sandbx.boundary._bpf import Instruction, SeccompData
from sandbx.boundary._seccomp import (
    DENIED_WITH_EPERM,
    SYSCALL_NUMBERS,
    FilterOptions,
    build_filter,
)

MACHINES = ("x86_64", "aarch64")

# The expected values are spelt out from the kernel's headers, not taken from
# sandbx, so a wrong constant there cannot agree with itself here.
# include/uapi/linux/seccomp.h
ALLOW = 0x7FFF0000
KILL = 0x80000000
EPERM = 0x00050000 | errno.EPERM
ENOSYS = 0x00050000 | errno.ENOSYS

# Calls the filter has no rule for, numbered independently of sandbx's tables:
# arch/x86/entry/syscalls/syscall_64.tbl and include/uapi/asm-generic/unistd.h.
ORDINARY = {
    "x86_64": {"read": 0, "write": 1, "openat": 257, "execve": 59, "getpid": 39},
    "aarch64": {"read": 63, "write": 64, "openat": 56, "execve": 221, "getpid": 172},
}

# include/uapi/linux/audit.h
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
AUDIT_ARCH_I386 = 0x40000003
AUDIT_ARCH_ARM = 0x40000028
# arch/x86/include/uapi/asm/unistd.h
X32_SYSCALL_BIT = 0x40000000

# include/uapi/linux/sched.h and asm-generic/signal.h
SIGCHLD = 17
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
CLONE_VM = 0x100
CLONE_FS = 0x200
CLONE_FILES = 0x400
CLONE_SIGHAND = 0x800
CLONE_PIDFD = 0x1000
CLONE_VFORK = 0x4000
CLONE_THREAD = 0x10000
CLONE_SYSVSEM = 0x40000
CLONE_SETTLS = 0x80000
CLONE_PARENT_SETTID = 0x100000
CLONE_CHILD_CLEARTID = 0x200000
NAMESPACE_FLAGS = {
    "CLONE_NEWNS": CLONE_NEWNS,
    "CLONE_NEWCGROUP": CLONE_NEWCGROUP,
    "CLONE_NEWUTS": CLONE_NEWUTS,
    "CLONE_NEWIPC": CLONE_NEWIPC,
    "CLONE_NEWUSER": CLONE_NEWUSER,
    "CLONE_NEWPID": CLONE_NEWPID,
    "CLONE_NEWNET": CLONE_NEWNET,
}
# What fork(), pthread_create() and posix_spawn() pass to clone in glibc.
ORDINARY_CLONE_FLAGS = {
    "fork": SIGCHLD | CLONE_CHILD_CLEARTID,
    "thread": CLONE_VM
    | CLONE_FS
    | CLONE_FILES
    | CLONE_SIGHAND
    | CLONE_THREAD
    | CLONE_SYSVSEM
    | CLONE_SETTLS
    | CLONE_PARENT_SETTID
    | CLONE_CHILD_CLEARTID,
    "spawn": CLONE_VM | CLONE_VFORK | SIGCHLD,
    "pidfd": CLONE_PIDFD | SIGCHLD,
}

# include/linux/socket.h, include/linux/net.h
AF_UNIX = 1
AF_INET = 2
AF_INET6 = 10
AF_NETLINK = 16
SOCK_STREAM = 1
SOCK_DGRAM = 2
SOCK_RAW = 3
SOCK_RDM = 4
SOCK_SEQPACKET = 5
SOCK_NONBLOCK = 0o4000
SOCK_CLOEXEC = 0o2000000

# include/uapi/asm-generic/ioctls.h
TCGETS = 0x5401
TIOCSCTTY = 0x540E
TIOCSTI = 0x5412
FIONREAD = 0x541B
TIOCLINUX = 0x541C

# The kernel reads these arguments as 32-bit ints (clone's flags through
# lower_32_bits()), so a caller may set the upper half to anything.
UPPER_HALF = 0xFFFFFFFF_00000000

# include/uapi/linux/bpf_common.h: the classes the filter may use.
BPF_CLASS_MASK = 0x07
BPF_LD, BPF_ALU, BPF_JMP, BPF_RET = 0x00, 0x04, 0x05, 0x06
SECCOMP_DATA_SIZE = 64  # nr, arch, instruction_pointer, args[6]

KERNEL_HEADERS = {
    "x86_64": Path("/usr/include/x86_64-linux-gnu/asm/unistd_64.h"),
    "aarch64": Path("/usr/include/asm-generic/unistd.h"),
}


def decide(
    machine: str,
    nr: int,
    *args: int,
    options: FilterOptions | None = None,
    arch: int | None = None,
) -> int:
    program = build_filter(options or FilterOptions(), machine)
    data = SeccompData(nr=nr, arch=AUDIT_ARCH[machine] if arch is None else arch, args=args)
    return _bpf.evaluate(program, data)


def decide_call(machine: str, name: str, *args: int, options: FilterOptions | None = None) -> int:
    return decide(machine, SYSCALL_NUMBERS[machine][name], *args, options=options)


def every_filter() -> list[tuple[str, FilterOptions]]:
    return [
        (machine, FilterOptions(allow_unix_sockets=unix))
        for machine in MACHINES
        for unix in (False, True)
    ]


def filter_id(case: tuple[str, FilterOptions]) -> str:
    machine, options = case
    return f"{machine}-unix={options.allow_unix_sockets}"


# --- the refused calls -------------------------------------------------------


@pytest.mark.parametrize(("machine", "name"), list(itertools.product(MACHINES, DENIED_WITH_EPERM)))
def test_every_denied_call_is_refused_with_eperm(machine: str, name: str) -> None:
    assert decide_call(machine, name) == EPERM


@pytest.mark.parametrize(("machine", "name"), list(itertools.product(MACHINES, DENIED_WITH_EPERM)))
def test_denied_calls_stay_refused_when_unix_sockets_are_allowed(machine: str, name: str) -> None:
    options = FilterOptions(allow_unix_sockets=True)
    assert decide_call(machine, name, options=options) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_clone3_is_refused_with_enosys_so_libc_falls_back_to_clone(machine: str) -> None:
    assert decide_call(machine, "clone3") == ENOSYS


@pytest.mark.parametrize("machine", MACHINES)
def test_no_two_refused_calls_share_a_number(machine: str) -> None:
    numbers = [SYSCALL_NUMBERS[machine][name] for name in (*DENIED_WITH_EPERM, "clone3")]
    assert len(set(numbers)) == len(numbers)


# --- ordinary calls ----------------------------------------------------------


@pytest.mark.parametrize(
    ("machine", "name"),
    [(machine, name) for machine in MACHINES for name in ORDINARY[machine]],
)
def test_ordinary_calls_are_allowed(machine: str, name: str) -> None:
    assert decide(machine, ORDINARY[machine][name], 3, 0, 0) == ALLOW


@pytest.mark.parametrize("machine", MACHINES)
def test_ordinary_numbers_are_not_in_the_refused_tables(machine: str) -> None:
    refused = {SYSCALL_NUMBERS[machine][name] for name in DENIED_WITH_EPERM}
    assert refused.isdisjoint(ORDINARY[machine].values())


# --- clone -------------------------------------------------------------------


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    "flags", list(ORDINARY_CLONE_FLAGS.values()), ids=list(ORDINARY_CLONE_FLAGS)
)
def test_clone_without_namespace_flags_is_allowed(machine: str, flags: int) -> None:
    assert decide_call(machine, "clone", flags, 0, 0, 0, 0) == ALLOW


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("flag", list(NAMESPACE_FLAGS.values()), ids=list(NAMESPACE_FLAGS))
def test_clone_with_a_namespace_flag_is_refused_with_eperm(machine: str, flag: int) -> None:
    assert decide_call(machine, "clone", flag | SIGCHLD) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("flag", list(NAMESPACE_FLAGS.values()), ids=list(NAMESPACE_FLAGS))
def test_clone_hiding_a_namespace_flag_among_thread_flags_is_refused(
    machine: str, flag: int
) -> None:
    assert decide_call(machine, "clone", flag | ORDINARY_CLONE_FLAGS["thread"]) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_clone_with_its_upper_half_set_is_judged_by_the_lower_half(machine: str) -> None:
    # kernel/fork.c reads clone's flags through lower_32_bits().
    assert decide_call(machine, "clone", UPPER_HALF | CLONE_NEWUSER | SIGCHLD) == EPERM
    assert decide_call(machine, "clone", UPPER_HALF | SIGCHLD) == ALLOW


# --- architecture ------------------------------------------------------------


ARCHITECTURES = {"i386": AUDIT_ARCH_I386, "arm": AUDIT_ARCH_ARM, **AUDIT_ARCH, "zero": 0}


@pytest.mark.parametrize(
    ("machine", "arch"),
    [
        pytest.param(machine, arch, id=f"{machine}-{name}")
        for machine in MACHINES
        for name, arch in ARCHITECTURES.items()
        if name != machine
    ],
)
def test_a_syscall_from_a_foreign_architecture_kills_the_process(machine: str, arch: int) -> None:
    for nr in (*ORDINARY[machine].values(), SYSCALL_NUMBERS[machine]["mount"]):
        assert decide(machine, nr, arch=arch) == KILL


@pytest.mark.parametrize(
    "nr",
    [0, 39, 165, 272, 512, 0x3FFFFFFF],
    ids=["read", "getpid", "mount", "unshare", "x32-rt_sigaction", "highest"],
)
def test_an_x32_number_kills_the_process_on_x86_64(nr: int) -> None:
    assert decide("x86_64", nr | X32_SYSCALL_BIT) == KILL


# --- sockets -----------------------------------------------------------------


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("kind", [SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET | SOCK_CLOEXEC])
def test_socket_af_unix_is_refused_with_eperm(machine: str, kind: int) -> None:
    assert decide_call(machine, "socket", AF_UNIX, kind, 0) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_socket_af_unix_with_its_upper_half_set_is_still_refused(machine: str) -> None:
    assert decide_call(machine, "socket", UPPER_HALF | AF_UNIX, SOCK_STREAM, 0) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("kind", [SOCK_STREAM, SOCK_DGRAM])
def test_socket_af_unix_is_allowed_when_unix_sockets_are(machine: str, kind: int) -> None:
    options = FilterOptions(allow_unix_sockets=True)
    assert decide_call(machine, "socket", AF_UNIX, kind, 0, options=options) == ALLOW


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    "family", [AF_INET, AF_INET6, AF_NETLINK], ids=["AF_INET", "AF_INET6", "AF_NETLINK"]
)
def test_socket_of_other_families_is_allowed(machine: str, family: int) -> None:
    assert decide_call(machine, "socket", family, SOCK_STREAM, 0) == ALLOW


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    "kind",
    [
        SOCK_DGRAM,
        SOCK_DGRAM | SOCK_CLOEXEC,
        SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
        SOCK_RAW,  # af_unix.c turns SOCK_RAW into SOCK_DGRAM
        SOCK_RDM,
        UPPER_HALF | SOCK_DGRAM,
    ],
    ids=["dgram", "dgram-cloexec", "dgram-nonblock-cloexec", "raw", "rdm", "dgram-upper-half"],
)
def test_socketpair_af_unix_other_than_stream_or_seqpacket_is_refused(
    machine: str, kind: int
) -> None:
    assert decide_call(machine, "socketpair", AF_UNIX, kind, 0, 0) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    "kind",
    [
        SOCK_STREAM,
        SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
        SOCK_SEQPACKET,
        SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC,
    ],
    ids=["stream", "stream-flags", "seqpacket", "seqpacket-flags"],
)
def test_socketpair_af_unix_stream_and_seqpacket_are_allowed(machine: str, kind: int) -> None:
    assert decide_call(machine, "socketpair", AF_UNIX, kind, 0, 0) == ALLOW


@pytest.mark.parametrize("machine", MACHINES)
def test_socketpair_af_unix_dgram_is_allowed_when_unix_sockets_are(machine: str) -> None:
    options = FilterOptions(allow_unix_sockets=True)
    assert decide_call(machine, "socketpair", AF_UNIX, SOCK_DGRAM, 0, 0, options=options) == ALLOW


@pytest.mark.parametrize("machine", MACHINES)
def test_socketpair_of_another_family_is_left_to_the_kernel(machine: str) -> None:
    assert decide_call(machine, "socketpair", AF_INET, SOCK_DGRAM, 0, 0) == ALLOW


# --- ioctl -------------------------------------------------------------------


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    "code",
    [TIOCSTI, TIOCLINUX, UPPER_HALF | TIOCSTI, UPPER_HALF | TIOCLINUX, 0x80000000_00005412],
    ids=["TIOCSTI", "TIOCLINUX", "TIOCSTI-upper-half", "TIOCLINUX-upper-half", "TIOCSTI-bit63"],
)
def test_ioctl_terminal_injection_is_refused_with_eperm(machine: str, code: int) -> None:
    options = [FilterOptions(), FilterOptions(allow_unix_sockets=True)]
    for option in options:
        assert decide_call(machine, "ioctl", 0, code, 0, options=option) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    "code",
    [TCGETS, TIOCSCTTY, FIONREAD, UPPER_HALF | TCGETS, TIOCSTI + 0x10000],
    ids=["TCGETS", "TIOCSCTTY", "FIONREAD", "TCGETS-upper-half", "near-TIOCSTI"],
)
def test_other_ioctls_are_allowed(machine: str, code: int) -> None:
    assert decide_call(machine, "ioctl", 0, code, 0) == ALLOW


@pytest.mark.parametrize("machine", MACHINES)
def test_tiocsti_as_another_calls_argument_is_not_refused(machine: str) -> None:
    # The request is judged only for ioctl: read(0, 0x5412, ...) is an ordinary read.
    assert decide(machine, ORDINARY[machine]["read"], 0, TIOCSTI, 1) == ALLOW


# --- the program itself ------------------------------------------------------


@pytest.mark.parametrize("case", every_filter(), ids=filter_id)
def test_the_program_encodes_within_the_kernel_limits(case: tuple[str, FilterOptions]) -> None:
    program = build_filter(case[1], case[0])
    code = _bpf.encode(program)
    assert len(program) <= _bpf.MAX_INSTRUCTIONS
    assert len(code) == 8 * len(program)


@pytest.mark.parametrize("case", every_filter(), ids=filter_id)
def test_every_jump_lands_inside_the_program(case: tuple[str, FilterOptions]) -> None:
    program = build_filter(case[1], case[0])
    for index, instruction in enumerate(program):
        for target in _successors(program, index):
            assert index < target < len(program), f"{index}: {instruction} jumps to {target}"


@pytest.mark.parametrize("case", every_filter(), ids=filter_id)
def test_every_path_through_the_program_ends_in_a_ret(case: tuple[str, FilterOptions]) -> None:
    program = build_filter(case[1], case[0])
    # Classic BPF only jumps forward, so walking every reachable instruction
    # covers every path; none may fall off the end, and the last is a RET.
    assert program[-1].code == _bpf.RET_K
    reachable = {0}
    for index in range(len(program)):
        if index in reachable:
            successors = _successors(program, index)
            assert all(target < len(program) for target in successors), index
            reachable.update(successors)


@pytest.mark.parametrize("case", every_filter(), ids=filter_id)
def test_the_program_uses_only_known_actions_and_aligned_loads(
    case: tuple[str, FilterOptions],
) -> None:
    program = build_filter(case[1], case[0])
    for instruction in program:
        cls = instruction.code & BPF_CLASS_MASK
        assert cls in (BPF_LD, BPF_ALU, BPF_JMP, BPF_RET), instruction
        if instruction.code == _bpf.RET_K:
            assert instruction.k in (ALLOW, KILL, EPERM, ENOSYS), instruction
        if instruction.code == _bpf.LD_W_ABS:
            assert instruction.k % 4 == 0, instruction
            assert instruction.k < SECCOMP_DATA_SIZE, instruction


@pytest.mark.parametrize("machine", MACHINES)
def test_the_architecture_is_checked_before_anything_else(machine: str) -> None:
    program = build_filter(FilterOptions(), machine)
    assert program[0] == _bpf.load(_bpf.OFFSET_ARCH)
    assert program[1].code == _bpf.JMP_JEQ_K
    assert program[1].k == AUDIT_ARCH[machine]


def _successors(program: list[Instruction], index: int) -> set[int]:
    instruction = program[index]
    nxt = index + 1
    if instruction.code == _bpf.RET_K:
        return set()
    if instruction.code == _bpf.JMP_JA:
        return {nxt + instruction.k}
    if instruction.code & BPF_CLASS_MASK == BPF_JMP:
        return {nxt + instruction.jump_true, nxt + instruction.jump_false}
    return {nxt}


# --- the tables against the kernel's headers ----------------------------------


def _header_numbers(machine: str) -> dict[str, int]:
    header = KERNEL_HEADERS[machine]
    if not header.is_file():
        pytest.skip(f"{header} is not installed (linux-libc-dev)")
    found = re.findall(r"^#define __NR_(\w+)\s+(\d+)\s*$", header.read_text(), re.MULTILINE)
    return {name: int(number) for name, number in found}


@pytest.mark.parametrize("machine", MACHINES)
def test_the_syscall_table_agrees_with_the_kernel_header(machine: str) -> None:
    header = _header_numbers(machine)
    table = SYSCALL_NUMBERS[machine]
    disagreements = {
        name: (number, header[name])
        for name, number in table.items()
        if name in header and header[name] != number
    }
    assert disagreements == {}, "name: (sandbx, header)"


@pytest.mark.parametrize("machine", MACHINES)
def test_a_call_missing_from_the_header_is_newer_than_the_header(machine: str) -> None:
    # An old header lacks the newest calls (open_tree_attr came in Linux 6.15);
    # a misspelt name would be missing too, but with a number the header knows.
    header = _header_numbers(machine)
    newest = max(header.values())
    missing = {name: n for name, n in SYSCALL_NUMBERS[machine].items() if name not in header}
    assert all(number > newest for number in missing.values()), missing


@pytest.mark.parametrize("machine", MACHINES)
def test_this_files_ordinary_numbers_agree_with_the_kernel_header(machine: str) -> None:
    header = _header_numbers(machine)
    assert {name: header[name] for name in ORDINARY[machine]} == ORDINARY[machine]
