"""``sandbx sandbox-run [FLAGS] -- CMD ARGS…``: run one command under a derived policy.

Parses the flags, derives the policy, writes ``spawned``, runs the command
through the boundary and writes how it ended. Its exit code is the command's
own (a signal as 128+n); sandbx's own failures exit 1 with one line, usage 64.
"""

from __future__ import annotations

import argparse
import os
from typing import assert_never

from sandbx import audit
from sandbx.boundary import Failed, FailureReason, StderrGuard, run_sandboxed
from sandbx.cli._parsing import OnlyOnce, Parser, command_after_separator, positive_seconds
from sandbx.errors import UsageError
from sandbx.policy import Command, GrantFlags, derive_policy, vet_env_name

GUARD = StderrGuard(
    marker=audit.MARKER.encode(),
    replacement=b"sandbx::audit(written by the command):",
)


def build_parser(prog: str = "sandbx sandbox-run") -> Parser:
    parser = Parser(
        prog,
        "Run CMD confined: read+exec on the system directories, read+write on the working "
        "directory (replaced by any path flag), no network, a cleared environment.",
    )
    add_grant_flags(parser)
    parser.add_argument(
        "--timeout",
        type=positive_seconds,
        metavar="SECONDS",
        help="kill the command, and every process it spawned, past this many seconds",
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS")
    return parser


def add_grant_flags(parser: Parser) -> None:
    parser.add_argument(
        "--allow-read", action="append", default=[], metavar="PATH", help="read PATH (repeatable)"
    )
    parser.add_argument(
        "--allow-write",
        action="append",
        default=[],
        metavar="PATH",
        help="read and write PATH (repeatable); write does not imply execute",
    )
    parser.add_argument(
        "--allow-exec",
        action="append",
        default=[],
        metavar="PATH",
        help="read and run programs under PATH (repeatable)",
    )
    parser.add_argument(
        "--allow-env",
        action="append",
        default=[],
        metavar="NAME",
        type=_env_name,
        help="pass NAME with the value sandbx holds (repeatable)",
    )
    parser.add_argument(
        "--pin-sha256",
        action=OnlyOnce,
        metavar="HEX",
        help="refuse the run unless the absolute program after -- hashes to HEX",
    )


def _env_name(text: str) -> str:
    try:
        return vet_env_name(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(f"{exc.what} ({exc.hint})") from None


def grant_flags_from(arguments: argparse.Namespace) -> GrantFlags:
    return GrantFlags(
        read=tuple(arguments.allow_read),
        write=tuple(arguments.allow_write),
        execute=tuple(arguments.allow_exec),
        env=tuple(arguments.allow_env),
        pin_sha256=arguments.pin_sha256,
        timeout_seconds=getattr(arguments, "timeout", None),
    )


def main(argv: list[str]) -> int:
    parser = build_parser()
    arguments = parser.parse_args(argv)
    words = command_after_separator(arguments.command)
    if not words:
        parser.error("no command to run; put it after --, as in `sandbx sandbox-run -- ls`")
    command = Command(argv=tuple(words))
    policy = derive_policy(
        grant_flags_from(arguments),
        command,
        working_directory=os.getcwd(),
        environ=os.environ,
    )
    sink = audit.StderrSink()
    spawn = audit.next_spawn_id()
    sink.write(audit.spawned(spawn, policy, command))
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
            assert_never(reason)


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
