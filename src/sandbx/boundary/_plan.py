"""The launch plan: everything stage 1 and stage 2 need, computed before the fork.

Building the seccomp program, the Landlock rights of each grant and the
command's environment happens here, in the parent, so the forked stages only
hand finished data to the kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from sandbx.boundary._landlock import Handled, handled_for, rights_for
from sandbx.boundary._seccomp import CompiledFilter, FilterOptions, compile_filter
from sandbx.policy import Command, Pin, Policy, VettedGrant


@dataclass(frozen=True, slots=True, kw_only=True)
class PathRule:
    grant: VettedGrant
    rights: int


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchPlan:
    argv: tuple[str, ...]
    environment: tuple[tuple[str, str], ...]
    path_rules: tuple[PathRule, ...]
    handled: Handled
    seccomp: CompiledFilter
    pin: Pin | None
    mount_proc: bool
    timeout_seconds: float | None
    uid: int
    gid: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Channels:
    """Descriptors the stages inherit: where to report, and where stderr goes."""

    report: int
    stderr: int | None
    cli_pid: int


_SECCOMP_BY_OPTIONS: dict[FilterOptions, CompiledFilter] = {}


def build_plan(policy: Policy, command: Command, *, abi: int) -> LaunchPlan:
    handled = handled_for(abi)
    options = FilterOptions(allow_unix_sockets=policy.network.unix_sockets)
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
        handled=handled,
        seccomp=_SECCOMP_BY_OPTIONS[options],
        pin=policy.pin,
        mount_proc=any(grant.on_procfs for grant in policy.grants),
        timeout_seconds=policy.timeout_seconds,
        uid=os.geteuid(),
        gid=os.getegid(),
    )
