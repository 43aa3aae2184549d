"""The approval gate: which tool calls may run at all, and, under ``--approve call``, which
a person approves one by one on the terminal.

Read-only tools are approved by default; write, edit and bash only by
``--allow-tool``. Under ``--approve call`` every write and every command is
asked about (y: this call, n: refuse it, a: every call to that tool from now
on). Typeahead is discarded before each question, so nothing typed earlier
answers it. A terminal that goes away refuses the call and every one after it.
"""

from __future__ import annotations

import json
import os
import termios
from typing import Protocol

from sandbx._enum import Enum
from sandbx._value import value
from sandbx.agent._display import shown_safely
from sandbx.errors import SandbxError
from sandbx.tools import READ_ONLY_TOOLS, TOOL_NAMES


class ApproveWhen(Enum):
    RUN = "run"
    CALL = "call"


class NoTerminal(SandbxError):
    def __init__(self, why: str) -> None:
        super().__init__(
            f"--approve call needs a terminal to ask on, and there is none ({why})",
            "run it from a terminal, or approve tools for the whole run with --allow-tool",
        )


class TerminalGone(Exception):
    """The terminal asked on went away: this call and the rest are refused."""


@value
class Verdict:
    approved: bool
    why: str = ""


class Terminal:
    """The controlling terminal, opened once at start: questions go there, answers come back."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    @classmethod
    def open(cls) -> Terminal:
        try:
            fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY | os.O_CLOEXEC)
        except OSError as exc:
            raise NoTerminal(exc.strerror or "no /dev/tty") from exc
        return cls(fd)

    def say(self, text: str) -> None:
        try:
            os.write(self.fd, text.encode("utf-8", "replace"))
        except OSError as exc:
            raise TerminalGone(str(exc)) from exc

    def ask_key(self, question: str, keys: str) -> str:
        try:
            saved = termios.tcgetattr(self.fd)
            raw = list(saved)
            raw[3] = int(raw[3]) & ~(termios.ICANON | termios.ECHO)
            # Echo off first, then typeahead discarded, then the question: a key
            # typed before the question was shown can neither answer it nor show.
            termios.tcsetattr(self.fd, termios.TCSANOW, raw)
            termios.tcflush(self.fd, termios.TCIFLUSH)
            try:
                self.say(question)
                while True:
                    key = os.read(self.fd, 1)
                    if not key:
                        msg = "end of input"
                        raise TerminalGone(msg)
                    answer = key.decode("ascii", "replace").lower()
                    if answer in keys:
                        self.say(answer + "\n")
                        return answer
            finally:
                termios.tcsetattr(self.fd, termios.TCSANOW, saved)
        except (OSError, termios.error) as exc:
            raise TerminalGone(str(exc)) from exc


class Asker(Protocol):
    """Where a person is asked: the terminal under agent-run, rows on the screen under tui."""

    def ask_key(self, question: str, keys: str) -> str: ...


class Gate:
    def __init__(
        self, *, approved: frozenset[str], when: ApproveWhen, terminal: Asker | None
    ) -> None:
        self.approved = approved
        self._when = when
        self._terminal = terminal
        self._always: set[str] = set()
        self._gone = False

    def decide(self, tool: str, arguments: dict[str, object]) -> Verdict:
        if tool not in TOOL_NAMES:
            return Verdict(
                approved=False,
                why=f"there is no tool named {tool!r}; the tools are {', '.join(TOOL_NAMES)}",
            )
        if tool not in self.approved:
            return Verdict(
                approved=False,
                why=f"the `{tool}` tool is not approved for this run: pass --allow-tool {tool}",
            )
        if self._when is ApproveWhen.RUN or tool in READ_ONLY_TOOLS or tool in self._always:
            return Verdict(approved=True)
        if self._gone or self._terminal is None:
            raise TerminalGone("the terminal is gone")
        shown = shown_safely(json.dumps(arguments, ensure_ascii=False))
        try:
            answer = self._terminal.ask_key(
                f"sandbx: run {tool} {shown}? [y] this call, [n] refuse, [a] every {tool} call: ",
                "yna",
            )
        except TerminalGone:
            self._gone = True
            raise
        if answer == "a":
            self._always.add(tool)
        if answer == "n":
            return Verdict(approved=False, why="refused on the terminal")
        return Verdict(approved=True)
