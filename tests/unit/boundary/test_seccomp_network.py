"""The socket rules of the seccomp filter under each network stance, checked with the evaluator."""

import errno

import pytest

from sandbx.boundary._bpf import SeccompData, evaluate
from sandbx.boundary._seccomp import (
    AUDIT_ARCH,
    SECCOMP_RET_ALLOW,
    SECCOMP_RET_ERRNO,
    FilterOptions,
    build_filter,
)
from sandbx.boundary._syscall_numbers import SYSCALL_NUMBERS
from sandbx.policy import NetworkKind

EPERM = SECCOMP_RET_ERRNO | errno.EPERM
MACHINES = ("x86_64", "aarch64")
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40
SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET = 1, 2, 3, 5
SOCK_NONBLOCK, SOCK_CLOEXEC = 0o4000, 0o2000000
IPPROTO_TCP, IPPROTO_SCTP, IPPROTO_MPTCP = 6, 132, 262
MSG_FASTOPEN, MSG_NOSIGNAL = 0x20000000, 0x4000


def action(machine: str, options: FilterOptions, call: str, *args: int) -> int:
    program = build_filter(options, machine)
    data = SeccompData(nr=SYSCALL_NUMBERS[machine][call], arch=AUDIT_ARCH[machine], args=args)
    return evaluate(program, data)


PORTS = FilterOptions(network=NetworkKind.PORTS)
ANY = FilterOptions(network=NetworkKind.ANY)


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize("family", [AF_INET, AF_INET6])
@pytest.mark.parametrize("protocol", [0, IPPROTO_TCP])
@pytest.mark.parametrize("flags", [0, SOCK_NONBLOCK | SOCK_CLOEXEC])
def test_a_port_list_allows_tcp_stream_sockets(
    machine: str, family: int, protocol: int, flags: int
) -> None:
    assert action(machine, PORTS, "socket", family, SOCK_STREAM | flags, protocol) == (
        SECCOMP_RET_ALLOW
    )


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(
    ("family", "kind", "protocol"),
    [
        (AF_INET, SOCK_DGRAM, 0),
        (AF_INET6, SOCK_DGRAM, 0),
        (AF_INET, SOCK_RAW, 1),
        (AF_INET, SOCK_SEQPACKET, 0),
        (AF_INET, SOCK_STREAM, IPPROTO_MPTCP),
        (AF_INET6, SOCK_STREAM, IPPROTO_SCTP),
        (AF_NETLINK, SOCK_RAW, 0),
        (AF_PACKET, SOCK_RAW, 0),
        (AF_VSOCK, SOCK_STREAM, 0),
        (AF_UNIX, SOCK_STREAM, 0),
    ],
)
def test_a_port_list_refuses_every_other_socket(
    machine: str, family: int, kind: int, protocol: int
) -> None:
    assert action(machine, PORTS, "socket", family, kind, protocol) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_a_port_list_with_unix_sockets_allows_unix_but_still_refuses_udp(machine: str) -> None:
    options = FilterOptions(network=NetworkKind.PORTS, allow_unix_sockets=True)
    assert action(machine, options, "socket", AF_UNIX, SOCK_STREAM, 0) == SECCOMP_RET_ALLOW
    assert action(machine, options, "socket", AF_INET, SOCK_DGRAM, 0) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_bare_network_allows_udp_and_raw_but_not_unix(machine: str) -> None:
    assert action(machine, ANY, "socket", AF_INET, SOCK_DGRAM, 0) == SECCOMP_RET_ALLOW
    assert action(machine, ANY, "socket", AF_PACKET, SOCK_RAW, 0) == SECCOMP_RET_ALLOW
    assert action(machine, ANY, "socket", AF_UNIX, SOCK_STREAM, 0) == EPERM


@pytest.mark.parametrize("machine", MACHINES)
def test_tcp_ulp_is_refused_under_a_port_list_and_other_options_are_not(machine: str) -> None:
    sol_tcp, tcp_ulp, tcp_nodelay, sol_socket, so_reuseaddr = 6, 31, 1, 1, 2
    assert action(machine, PORTS, "setsockopt", 3, sol_tcp, tcp_ulp, 0, 0) == EPERM
    assert action(machine, PORTS, "setsockopt", 3, sol_tcp, tcp_nodelay, 0, 0) == (
        SECCOMP_RET_ALLOW
    )
    assert action(machine, PORTS, "setsockopt", 3, sol_socket, so_reuseaddr, 0, 0) == (
        SECCOMP_RET_ALLOW
    )


@pytest.mark.parametrize("machine", MACHINES)
@pytest.mark.parametrize(("call", "flags_index"), [("sendto", 3), ("sendmmsg", 3), ("sendmsg", 2)])
def test_fastopen_sends_are_refused_under_a_port_list(
    machine: str, call: str, flags_index: int
) -> None:
    with_fastopen = [3, 0, 0, 0, 0, 0]
    with_fastopen[flags_index] = MSG_FASTOPEN | MSG_NOSIGNAL
    plain = [3, 0, 0, 0, 0, 0]
    plain[flags_index] = MSG_NOSIGNAL
    assert action(machine, PORTS, call, *with_fastopen) == EPERM
    assert action(machine, PORTS, call, *plain) == SECCOMP_RET_ALLOW


@pytest.mark.parametrize("machine", MACHINES)
def test_without_a_port_list_setsockopt_and_sends_are_not_judged(machine: str) -> None:
    assert action(machine, ANY, "setsockopt", 3, 6, 31, 0, 0) == SECCOMP_RET_ALLOW
    assert action(machine, ANY, "sendto", 3, 0, 0, MSG_FASTOPEN, 0, 0) == SECCOMP_RET_ALLOW
