"""The launch plan: everything the sandboxed child needs, computed before the clone.

The seccomp program, the Landlock rights of each grant, the mount flags, the
id maps and the command's environment are worked out here, in the caller,
down to the C structs the kernel reads; the child only makes the calls. Each
Python object the child touches costs it a copy-on-write page fault, so the
less it computes the faster a spawn is. The part that depends on the policy
alone (a ``Confinement``) is kept for the next run under the same policy.
"""

from __future__ import annotations

import os

from sandbx._value import value
from sandbx.boundary._landlock import (
    SCOPING_ABI,
    PreparedRuleset,
    handled_for_run,
    rights_for,
)
from sandbx.boundary._mounts import PreparedMounts, mount_specs
from sandbx.boundary._namespaces import SANDBOX_NAMESPACES, id_map_writes
from sandbx.boundary._pinned import PinnedPath
from sandbx.boundary._seccomp import CompiledFilter, FilterOptions, PreparedFilter, compile_filter
from sandbx.boundary._syscalls import CLONE_NEWNET
from sandbx.policy import Command, NetworkKind, Pin, Policy, ResolverFiles


class Confinement:
    """What a policy turns into in the kernel, prepared once and reused by every run under it."""

    __slots__ = (
        "abi",
        "degraded",
        "environment",
        "id_maps",
        "mount_proc",
        "mounts",
        "namespaces",
        "pin",
        "policy",
        "resolver",
        "ruleset",
        "seccomp",
    )

    def __init__(self, policy: Policy, abi: int) -> None:
        network = policy.network
        handled = handled_for_run(abi, network)
        self.policy = policy
        self.abi = abi
        # A network grant shares the host's network namespace; Landlock and
        # seccomp then bound what the command may do in it.
        self.namespaces = (
            SANDBOX_NAMESPACES
            if network.kind is NetworkKind.DENIED
            else SANDBOX_NAMESPACES & ~CLONE_NEWNET
        )
        self.environment = dict(policy.environment)
        self.id_maps = id_map_writes(os.geteuid(), os.getegid())
        self.mount_proc = any(grant.on_procfs for grant in policy.grants)
        self.mounts = PreparedMounts(mount_specs(policy.grants))
        self.ruleset = PreparedRuleset(
            handled,
            tuple(
                (
                    PinnedPath.of(grant),
                    rights_for(grant.access, is_directory=grant.is_directory, handled=handled),
                )
                for grant in policy.grants
            ),
            network.ports if network.kind is NetworkKind.PORTS else (),
        )
        self.resolver: ResolverFiles | None = network.resolver
        options = FilterOptions(allow_unix_sockets=network.unix_sockets, network=network.kind)
        self.seccomp = PreparedFilter(_compiled(options))
        self.pin: Pin | None = policy.pin
        # Best-effort hardening this kernel cannot give; each becomes a ``degraded`` record.
        self.degraded = degraded_on(abi)


@value
class LaunchPlan:
    argv: tuple[str, ...]
    working_directory: str
    timeout_seconds: float | None
    confinement: Confinement


@value
class Channels:
    """Descriptors the child inherits: where to report, where its standard streams go,
    and, for a prepared sandbox, where its command will come from."""

    report: int
    stdin: int | None = None
    stdout: int | None = None
    stderr: int | None = None
    command: int | None = None

    def descriptors(self) -> tuple[int, ...]:
        return tuple(
            fd
            for fd in (self.report, self.stdin, self.stdout, self.stderr, self.command)
            if fd is not None
        )


_FILTERS: dict[FilterOptions, CompiledFilter] = {}
_LAST: list[Confinement] = []


def _compiled(options: FilterOptions) -> CompiledFilter:
    if options not in _FILTERS:
        _FILTERS[options] = compile_filter(options)
    return _FILTERS[options]


def degraded_on(abi: int) -> tuple[str, ...]:
    if abi >= SCOPING_ABI:
        return ()
    note = (
        f"Landlock ABI {abi} cannot scope abstract Unix sockets and signals to the sandbox "
        f"(needs ABI {SCOPING_ABI}, Linux 6.12)"
    )
    return (note,)


def build_plan(
    policy: Policy, command: Command, *, abi: int, timeout_seconds: float | None = None
) -> LaunchPlan:
    # The policy is immutable, so the confinement built for the same object last
    # time still holds; the spawner runs every tool call under one policy.
    if _LAST and _LAST[0].policy is policy and _LAST[0].abi == abi:
        confinement = _LAST[0]
    else:
        confinement = Confinement(policy, abi)
        _LAST[:] = [confinement]
    return LaunchPlan(
        argv=command.argv,
        working_directory=os.getcwd(),
        timeout_seconds=policy.timeout_seconds if timeout_seconds is None else timeout_seconds,
        confinement=confinement,
    )
