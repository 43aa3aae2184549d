"""``bash`` {command}: ``/bin/sh -c COMMAND`` through the same boundary as ``sandbox-run``."""

from __future__ import annotations

from sandbx._exhaustive import unreachable
from sandbx.boundary import Exited, Failed, RunResult
from sandbx.tools._base import ToolArgumentError, ToolOutcome, cap_marker, require_string

NAME = "bash"
DEFAULT_TIMEOUT_SECONDS = 90.0
LONGEST_TIMEOUT_SECONDS = 600.0
OUTPUT_LIMIT = 64 * 1024
DESCRIPTION = (
    "Run a shell command with /bin/sh -c inside the sandbox: the run's grants, no "
    "network unless granted, a cleared environment. Output (stdout and stderr) is cut at "
    "64 KiB. The command is killed after `timeout` seconds (default 90)."
)
INPUT_SCHEMA: dict[str, object] = {
    "type": "object",
    "properties": {
        "command": {"type": "string", "description": "the shell command"},
        "timeout": {"type": "number", "description": "seconds before it is killed; at most 600"},
    },
    "required": ["command"],
    "additionalProperties": False,
}


def validate(arguments: dict[str, object]) -> tuple[str, float]:
    command = require_string(arguments, "command")
    timeout = arguments.get("timeout", DEFAULT_TIMEOUT_SECONDS)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float):
        msg = "`timeout` must be a number of seconds"
        raise ToolArgumentError(msg)
    if not 0 < timeout <= LONGEST_TIMEOUT_SECONDS:
        msg = f"`timeout` must be above 0 and at most {LONGEST_TIMEOUT_SECONDS:g}"
        raise ToolArgumentError(msg)
    return command, float(timeout)


def argv_for(command: str) -> tuple[str, ...]:
    return ("/bin/sh", "-c", command)


def outcome_of(result: RunResult) -> ToolOutcome:
    output = result.output.decode("utf-8", "replace")
    if result.output_dropped:
        shown = len(result.output)
        output += cap_marker(shown, shown + result.output_dropped, "bytes")
    match result.outcome:
        case Exited(code=0):
            return ToolOutcome(text=output or "(no output)")
        case Exited(code=code):
            return ToolOutcome(
                text=f"{output}\n[exit code {code}]".lstrip("\n"),
                is_error=True,
                verdict=f"ran, exit code {code}",
            )
        case Failed(reason=reason, detail=detail):
            return ToolOutcome(
                text=f"{output}\n[sandbx: {reason.value}: {detail}]".lstrip("\n"),
                is_error=True,
                verdict=f"failed: {reason.value}",
            )
        case _:
            raise unreachable(result.outcome)
