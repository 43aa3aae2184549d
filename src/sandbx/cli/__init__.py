"""The command line: subcommands, exit codes, and the one place errors reach the user.

Subcommands are imported only when called (``_SUBCOMMANDS`` maps names to
modules), so ``sandbox-run`` never pays for what another subcommand imports.
"""

from __future__ import annotations

import os
import sys

from sandbx._fdio import write_text
from sandbx.cli._flags import HelpRequested
from sandbx.errors import EX_FAILURE, EX_USAGE, SandbxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NoReturn

__all__ = ["entry", "main"]

_SUBCOMMANDS = {
    "sandbox-run": "sandbx.cli._sandbox_run",
    "agent-run": "sandbx.cli._agent_run",
    "tui": "sandbx.cli._tui",
    "auth": "sandbx.cli._auth",
    "sessions": "sandbx.cli._sessions",
    "hash": "sandbx.cli._hash",
    "doctor": "sandbx.cli._doctor",
}

_USAGE = """\
usage: sandbx [--debug] SUBCOMMAND [ARGS…]

subcommands:
  sandbox-run [FLAGS] -- CMD ARGS…   run one command inside the boundary
  agent-run [FLAGS] -- "PROMPT"      ask one question; a model answers with tools
  tui [FLAGS] -- "PROMPT"            the same turn, on a screen you can watch and stop
  auth login|status|logout           store, check or remove the Anthropic API key
  sessions [show ID]                 list stored sessions, or print one
  hash PATH                          print PATH's SHA-256 for --pin-sha256
  doctor                             say what this host can enforce

`sandbx SUBCOMMAND --help` describes each one.
"""


def entry() -> NoReturn:
    """The ``sandbx`` command. It leaves by ``os._exit``: everything it writes goes
    out unbuffered through ``os.write``, so the interpreter's finalization (a few
    milliseconds of module teardown) would only delay the exit code.
    """
    code = main()
    if sys.gettrace() is not None:
        raise SystemExit(code)  # a tracer (coverage, a debugger) must see the end
    os._exit(code)


def main(argv: list[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    debug = False
    while words and words[0] == "--debug":
        debug = True
        words.pop(0)
    if not words:
        _say("sandbx: no subcommand — run `sandbx --help` for the list\n")
        return EX_USAGE
    if words[0] in ("-h", "--help"):
        _say(_USAGE, fd=1)
        return 0
    if words[0] == "--version":
        from sandbx import __version__

        _say(f"sandbx {__version__}\n", fd=1)
        return 0
    return _run_subcommand(words[0], words[1:], debug=debug)


def _run_subcommand(name: str, rest: list[str], *, debug: bool) -> int:
    module_name = _SUBCOMMANDS.get(name)
    if module_name is None:
        _say(f"sandbx: no subcommand {name!r} — run `sandbx --help` for the list\n")
        return EX_USAGE
    try:
        # __import__ rather than importlib, which would cost every start its import.
        module = __import__(module_name, fromlist=["main"])
        code: int = module.main(rest)
    except HelpRequested as shown:
        _say(shown.text, fd=1)
        return 0
    except SandbxError as error:
        if debug:
            raise
        _say(error.one_line() + "\n")
        return error.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as error:
        if debug:
            raise
        _say(
            f"sandbx: internal error — {type(error).__name__}: {error} "
            "(run again with --debug for the traceback)\n"
        )
        return EX_FAILURE
    return code


def _say(text: str, fd: int = 2) -> None:
    write_text(fd, text)
