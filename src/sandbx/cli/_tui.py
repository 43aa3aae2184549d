"""``sandbx tui [agent-run's flags] -- "PROMPT"``: the same turn, drawn on a screen.

It needs a terminal on stdout and refuses a piped run at once, before it reads
a key or a credential. When the turn ends the screen goes and the transcript
is printed in its place; audit records on a terminal stderr are held back
until then. A hangup of the terminal ends the turn where it stood: exit 3,
with the audit trail released to stderr rather than dropped.
"""

from __future__ import annotations

import os
import signal
import sys
import threading

from sandbx import audit
from sandbx._fdio import write_text
from sandbx.agent import Asker, Sink, TurnEnd, TurnResult
from sandbx.cli._agent_run import build_turn, prepare, run_turn, start_tools
from sandbx.errors import SandbxError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from sandbx.tui import TurnScreen

PROG = "sandbx tui"
EX_TERMINAL_GONE = 3


class NeedsTerminal(SandbxError):
    def __init__(self) -> None:
        super().__init__(
            "tui draws on a terminal, and stdout is not one",
            "run it in a terminal, or use `sandbx agent-run` for a piped run",
        )


def main(argv: list[str]) -> int:
    if not os.isatty(1):
        raise NeedsTerminal
    prepared = prepare(argv, PROG)
    records = audit.StderrSink()
    if os.isatty(2):
        records.hold()
    tools = start_tools(prepared, records)
    try:
        from sandbx.tui import TurnScreen

        def run(sink: Sink, asker: Asker, stop: threading.Event) -> TurnResult:
            turn = build_turn(prepared, tools=tools, sink=sink, asker=asker, stop=stop)
            return run_turn(prepared, turn, hung_up=screen.hung_up)

        screen = TurnScreen(prompt=prepared.prompt, run_turn=run, kill_command=tools.interrupt)

        signal.signal(signal.SIGHUP, lambda _signal, _frame: screen.hang_up())
        result = screen.run()
    finally:
        tools.close()
        if prepared.session is not None:
            prepared.session.close()
    if screen.hung_up.is_set():
        records.release()
        # Whatever Textual left buffered for the terminal can never be written now;
        # without this, the interpreter's final flush would fail and exit 120.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until exit
        return EX_TERMINAL_GONE
    _print_transcript(prepared.prompt, screen)
    records.release()
    if result is None:
        return 1
    if result.note:
        write_text(2, f"sandbx: {result.note}\n")
    return result.end.exit_code if result.end is not TurnEnd.TERMINAL_GONE else EX_TERMINAL_GONE


def _print_transcript(prompt: str, screen: TurnScreen) -> None:
    from sandbx.agent._display import shown_safely
    from sandbx.tui import PROMPT_MARK, ROW_MARK, model_text

    parts = [f"{PROMPT_MARK} {model_text(prompt)}\n"]
    for line in screen.lines:
        match line.kind:
            case "answer":
                parts.append(model_text(line.text).rstrip("\n") + "\n")
            case "reasoning":
                parts.append(f"(reasoning) {model_text(line.text)}\n")
            case _:
                parts.append(f"{ROW_MARK} sandbx: {model_text(shown_safely(line.text, 2000))}\n")
    write_text(1, "".join(parts))
