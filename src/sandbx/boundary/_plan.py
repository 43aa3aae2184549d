"""The launch plan: everything stage 1 and stage 2 need, computed before the fork.

Building the seccomp program, the Landlock rights of each grant and the
command's environment happens here, in the parent, so the forked stages only
hand finished data to the kernel.
"""

from __future__ import annotations

import os

from sandbx._value import value
from sandbx.boundary._landlock import SCOPING_ABI, Handled, handled_for_run, rights_for
from sandbx.boundary._mounts import MountSpec, mount_specs
from sandbx.boundary._namespaces import SANDBOX_NAMESPACES
from sandbx.boundary._seccomp import CompiledFilter, FilterOptions, compile_filter
from sandbx.boundary._syscalls import CLONE_NEWNET
from sandbx.policy import Command, NetworkKind, Pin, Policy, ResolverFiles, VettedGrant


@value
class PathRule:
    grant: VettedGrant
    rights: int


@value
class LaunchPlan:
    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    path_rules: tuple[PathRule, ...]
    mounts: tuple[MountSpec, ...]
    working_directory: str
    handled: Handled
    port_rules: tuple[int, ...]
    namespaces: int
    resolver: ResolverFiles | None
    seccomp: CompiledFilter
    pin: Pin | None
    mount_proc: bool
    timeout_seconds: float | None
    uid: int
    gid: int
    # Best-effort hardening this kernel cannot give; each becomes a ``degraded`` record.
    degraded: tuple[str, ...]


@value
class Channels:
    """Descriptors the child inherits: where to report, and where stderr goes."""

    report: int
    stdin: int | None = None
    stdout: int | None = None
    stderr: int | None = None


_SECCOMP_BY_OPTIONS: dict[FilterOptions, CompiledFilter] = {}


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
    network = policy.network
    handled = handled_for_run(abi, network)
    options = FilterOptions(allow_unix_sockets=network.unix_sockets, network=network.kind)
    if options not in _SECCOMP_BY_OPTIONS:
        _SECCOMP_BY_OPTIONS[options] = compile_filter(options)
    return LaunchPlan(
        argv=command.argv,
        environment=policy.environment,
        path_rules=tuple(
            PathRule(
                grant=grant,
                rights=rights_for(grant.access, is_directory=grant.is_directory, handled=handled),
            )
            for grant in policy.grants
        ),
        mounts=mount_specs(policy.grants),
        working_directory=os.getcwd(),
        handled=handled,
        port_rules=network.ports if network.kind is NetworkKind.PORTS else (),
        # A network grant shares the host's network namespace; Landlock and
        # seccomp then bound what the command may do in it.
        namespaces=SANDBOX_NAMESPACES
        if network.kind is NetworkKind.DENIED
        else SANDBOX_NAMESPACES & ~CLONE_NEWNET,
        resolver=network.resolver,
        seccomp=_SECCOMP_BY_OPTIONS[options],
        pin=policy.pin,
        mount_proc=any(grant.on_procfs for grant in policy.grants),
        timeout_seconds=policy.timeout_seconds if timeout_seconds is None else timeout_seconds,
        uid=os.geteuid(),
        gid=os.getegid(),
        degraded=degraded_on(abi),
    )
