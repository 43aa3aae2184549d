"""``sandbx doctor``: what this host can enforce, said before a run is refused for it.

Exit 0 when the default policy can be enforced (proven by running /bin/true
through the real boundary), 1 when it cannot.
"""

from __future__ import annotations

import os

from sandbx.boundary import Exited, HostReport, Probe, probe_host, run_sandboxed
from sandbx.cli._flags import check, parse
from sandbx.errors import SandbxError
from sandbx.policy import Command, GrantFlags, derive_policy

_MINIMUM_ABI = 5
PROG = "sandbx doctor"


def main(argv: list[str]) -> int:
    parsed = parse(
        PROG, "Say what this host can enforce, and which runs it would refuse.", (), argv
    )
    check(not parsed.rest, PROG, "takes no arguments", "run `sandbx doctor`")
    report = probe_host()
    end_to_end = _run_true()
    lines = [
        "host",
        _row("kernel", ok=True, detail=f"Linux {report.kernel} ({report.machine})"),
        _row(
            "Landlock",
            report.landlock_abi >= _MINIMUM_ABI,
            f"ABI {report.landlock_abi}" if report.landlock_abi else "absent or disabled",
        ),
        _row("  filesystem rules", report.landlock_abi >= 1, "ABI 1"),
        _row("  truncate right", report.landlock_abi >= 3, "ABI 3"),
        _row("  TCP port rules", report.landlock_abi >= 4, "ABI 4"),
        _row("  ioctl on devices", report.landlock_abi >= 5, "ABI 5"),
        _row("  scoping (abstract sockets, signals)", report.landlock_abi >= 6, "ABI 6"),
        _probe_row("unprivileged user namespaces", report.user_namespaces),
        _probe_row("user, pid, mount, net, ipc namespaces", report.sandbox_namespaces),
        _probe_row("mount inside a user namespace", report.userns_mount),
        _row(
            "AppArmor user-namespace restriction",
            report.apparmor_userns_restriction in ("absent", "0"),
            f"apparmor_restrict_unprivileged_userns={report.apparmor_userns_restriction}",
        ),
        _probe_row("seccomp filters", report.seccomp_filter),
        _probe_row("cgroup v2 delegation (not required)", report.cgroup_v2_delegation),
        "",
        "sandbox-run",
        *_feature_rows(report, end_to_end),
    ]
    os.write(1, ("\n".join(lines) + "\n").encode())
    return 0 if end_to_end.ok else 1


def _feature_rows(report: HostReport, end_to_end: Probe) -> list[str]:
    namespaces = report.sandbox_namespaces.ok
    landlock = report.landlock_abi >= _MINIMUM_ABI
    return [
        _verdict("the default policy (/bin/true, end to end)", end_to_end.ok, end_to_end.detail),
        _verdict("--allow-read / --allow-write / --allow-exec", landlock and namespaces),
        _verdict("--allow-env, --pin-sha256", end_to_end.ok),
        _verdict("--timeout (kills every descendant)", namespaces),
        _verdict("--allow-read /proc (a /proc of the sandbox's own)", report.userns_mount.ok),
        _verdict("--allow-network, bare (the host's network)", end_to_end.ok),
        _verdict(
            "--allow-network PORT (Landlock TCP port rules, ABI 4)",
            end_to_end.ok and report.landlock_abi >= 4,
        ),
        _verdict("--allow-unix-sockets", end_to_end.ok),
        _verdict(
            "--allow-dns NAME (resolver files mounted in a user namespace)",
            end_to_end.ok and report.userns_mount.ok,
        ),
        _verdict("--dns-over-tcp", end_to_end.ok),
        _scoping_row(report.landlock_abi),
    ]


def _scoping_row(abi: int) -> str:
    if abi >= 6:
        return "  runs       abstract Unix sockets and signals scoped to the sandbox"
    return "  degraded   abstract Unix sockets and signals are not scoped (needs ABI 6)"


def _run_true() -> Probe:
    try:
        command = Command(argv=("/bin/true",))
        policy = derive_policy(
            GrantFlags(read=("/usr",)), command, working_directory="/", environ=os.environ
        )
        result = run_sandboxed(policy, command)
    except SandbxError as error:
        return Probe(ok=False, detail=error.one_line())
    if result.outcome == Exited(0):
        return Probe(ok=True, detail="")
    return Probe(ok=False, detail=str(result.outcome))


def _row(name: str, ok: bool, detail: str) -> str:
    return f"  {'ok' if ok else 'missing':<10} {name}: {detail}"


def _probe_row(name: str, probe: Probe) -> str:
    return _row(name, probe.ok, probe.detail)


def _verdict(name: str, runs: bool, detail: str = "") -> str:
    suffix = f" ({detail})" if detail else ""
    return f"  {'runs' if runs else 'refused':<10} {name}{suffix}"
