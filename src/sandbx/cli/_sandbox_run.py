"""``sandbx sandbox-run [FLAGS] -- CMD ARGS…``: run one command under a derived policy.

Parses the flags, derives the policy, writes ``spawned``, runs the command
through the boundary and writes how it ended. Its exit code is the command's
own (a signal as 128+n); sandbx's own failures exit 1 with one line, usage 64.
"""

from __future__ import annotations

import os

from sandbx import audit
from sandbx._exhaustive import unreachable
from sandbx.boundary import Failed, FailureReason, StderrGuard, run_sandboxed
from sandbx.cli._flags import Flag, Parsed, check, parse
from sandbx.errors import HostError, UsageError
from sandbx.policy import Command, GrantFlags, derive_policy, is_port_text

PROG = "sandbx sandbox-run"
SUMMARY = (
    "Run CMD confined: read+exec on the system directories, read+write on the working "
    "directory (replaced by any path flag), no network unless granted, a cleared environment."
)

GRANT_FLAGS = (
    Flag(name="--allow-read", metavar="PATH", repeatable=True, help="read PATH"),
    Flag(
        name="--allow-write",
        metavar="PATH",
        repeatable=True,
        help="read and write PATH; write does not imply execute",
    ),
    Flag(
        name="--allow-exec",
        metavar="PATH",
        repeatable=True,
        help="read and run programs under PATH",
    ),
    Flag(
        name="--allow-env",
        metavar="NAME",
        repeatable=True,
        help="pass NAME with the value sandbx itself holds",
    ),
    Flag(
        name="--pin-sha256",
        metavar="HEX",
        help="refuse the run unless the absolute program after -- hashes to HEX",
    ),
    Flag(
        name="--allow-network",
        metavar="PORT",
        repeatable=True,
        takes_next_as_value=is_port_text,
        help="alone: the host's network, any port and protocol; with PORT: TCP to and from "
        "PORT only",
    ),
    Flag(name="--allow-unix-sockets", help="Unix-domain sockets (not implied by network)"),
    Flag(
        name="--allow-dns",
        metavar="NAME",
        repeatable=True,
        help="let NAME, and only listed names, resolve; grants no path and no port",
    ),
    Flag(
        name="--dns-over-tcp",
        help="set RES_OPTIONS=use-vc so glibc resolves over TCP; allowlists no port",
    ),
)
RUN_FLAGS = (
    *GRANT_FLAGS,
    Flag(
        name="--timeout",
        metavar="SECONDS",
        help="kill the command, and every process it spawned, past SECONDS",
    ),
)

GUARD = StderrGuard(
    marker=audit.FILTER_WORD.encode(),
    replacement=audit.NOT_A_RECORD.encode(),
)


def grant_flags_from(parsed: Parsed, prog: str) -> GrantFlags:
    return GrantFlags(
        read=tuple(parsed.all("--allow-read")),
        write=tuple(parsed.all("--allow-write")),
        execute=tuple(parsed.all("--allow-exec")),
        env=tuple(parsed.all("--allow-env")),
        pin_sha256=parsed.one("--pin-sha256"),
        timeout_seconds=_seconds(parsed.one("--timeout"), prog),
        network_any=None in parsed.values.get("--allow-network", []),
        network_ports=tuple(parsed.all("--allow-network")),
        unix_sockets=parsed.given("--allow-unix-sockets"),
        dns_names=tuple(parsed.all("--allow-dns")),
        dns_over_tcp=parsed.given("--dns-over-tcp"),
    )


def _seconds(text: str | None, prog: str) -> float | None:
    if text is None:
        return None
    try:
        return float(text)
    except ValueError:
        raise UsageError(
            f"{prog}: --timeout {text!r} is not a number of seconds",
            "pass --timeout SECONDS, for example --timeout 30",
        ) from None


def working_directory() -> str:
    try:
        return os.getcwd()
    except FileNotFoundError:
        raise HostError(
            "the working directory no longer exists",
            "cd to an existing directory, or name the tree with --allow-read/--allow-write",
        ) from None


def launch_environment() -> dict[str, str]:
    """The environment sandbx was started with, before the interpreter changed it.

    CPython's locale coercion (PEP 538) sets LC_CTYPE in ``os.environ`` when the
    locale is C; /proc/self/environ still holds what the caller really passed.
    """
    try:
        with open("/proc/self/environ", "rb") as handle:
            raw = handle.read()
    except OSError:
        return dict(os.environ)
    environment: dict[str, str] = {}
    for entry in raw.split(b"\0"):
        name, separator, value = entry.partition(b"=")
        if separator and name:
            environment[os.fsdecode(name)] = os.fsdecode(value)
    return environment


def main(argv: list[str]) -> int:
    parsed = parse(PROG, SUMMARY, RUN_FLAGS, argv)
    check(
        bool(parsed.rest),
        PROG,
        "no command to run",
        "put it after --, as in `sandbx sandbox-run -- ls`",
    )
    command = Command(argv=parsed.rest)
    policy = derive_policy(
        grant_flags_from(parsed, PROG),
        command,
        working_directory=working_directory(),
        environ=launch_environment(),
    )
    sink = audit.StderrSink()
    spawn = audit.next_spawn_id()
    sink.write(audit.spawned(spawn, policy, command))
    if policy.network.unresolved_names:
        sink.write(audit.degraded(spawn, audit.unresolved_names(policy.network)))
    result = run_sandboxed(policy, command, stderr_guard=GUARD)
    for what in result.degraded:
        sink.write(audit.degraded(spawn, what))
    sink.write(audit.ended(spawn, command, result))
    if isinstance(result.outcome, Failed):
        _explain(result.outcome, command)
    return result.exit_code


def _hint_for(reason: FailureReason) -> str:
    match reason:
        case FailureReason.TIMEOUT:
            return "raise --timeout SECONDS, or leave it out for no limit"
        case FailureReason.INTERRUPTED:
            return "the command and every process it started were killed"
        case (
            FailureReason.UNSUPPORTED
            | FailureReason.LANDLOCK
            | FailureReason.SECCOMP
            | FailureReason.CAPABILITIES
            | FailureReason.NAMESPACE_SETUP_FAILED
        ):
            return "run `sandbx doctor` to see what this host can enforce"
        case FailureReason.GRANT_REPLACED | FailureReason.GRANT_REDIRECTED:
            return "a granted path changed while sandbx started; check it, then run again"
        case FailureReason.PIN_MISMATCH:
            return (
                "the program is not the one pinned; if the change is yours, "
                "take its digest again with `sandbx hash PATH`"
            )
        case FailureReason.PIN_REFUSED:
            return "pin a program you can read; pin an interpreter, not a #! script"
        case FailureReason.EXEC_FAILED:
            return "check the name; a bare name is looked up on PATH inside the sandbox"
        case FailureReason.SPAWN_FAILED:
            return "run `sandbx doctor`; if it is healthy, this is a bug in sandbx"
        case _:
            raise unreachable(reason)


def _explain(failure: Failed, command: Command) -> None:
    if failure.reason is FailureReason.EXEC_FAILED:
        what = f"could not run {command.program}: {failure.detail}"
        hint = (
            "if it lies outside the system directories, grant its directory with --allow-exec DIR; "
            "write does not imply execute"
            if "EACCES" in failure.detail
            else _hint_for(failure.reason)
        )
    else:
        hint = _hint_for(failure.reason)
        what = f"{failure.reason.value}: {failure.detail}"
    os.write(2, f"sandbx: {what} — {hint}\n".encode("utf-8", "backslashreplace"))
