"""The screen for one turn: prompt, streamed answer, one row per tool call, a status line.

The turn runs in a thread; everything it reports reaches the screen through
``call_from_thread``. sandbx's rows are widgets of their own, styled apart, and
model text has control characters and the row mark replaced, so the model
cannot draw something that passes for them. ctrl-c or escape ends the turn:
a running bash command is killed, any other tool call finishes first.
"""

from __future__ import annotations

import select
import sys
import threading
from collections.abc import Callable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.drivers.linux_driver import LinuxDriver
from textual.widgets import Static

from sandbx._value import value
from sandbx.agent import Sink, TurnInterrupted, TurnResult
from sandbx.agent._display import shown_safely, shown_safely_lines

ROW_MARK = "▌"
PROMPT_MARK = ">"
# Every block element (U+2580..U+259F) could pass for the row mark: all become "|".
_LOOKALIKES = str.maketrans({chr(code): "|" for code in range(0x2580, 0x25A0)})


def model_text(text: str) -> str:
    """Model text as the screen shows it: no control characters, no look-alike of the row mark."""
    return shown_safely_lines(text).translate(_LOOKALIKES)


@value
class ScreenLine:
    """What the screen showed, kept for the transcript printed when the screen goes."""

    kind: str  # "answer", "row", "reasoning"
    text: str


RunTurn = Callable[[Sink, "ScreenAsker", threading.Event], TurnResult]


class ScreenAsker:
    """``--approve call`` on the screen: a question row under the transcript, one key answers."""

    def __init__(self, app: TurnScreen) -> None:
        self._app = app
        self._answered = threading.Event()
        self._answer = ""
        self.keys = ""

    def ask_key(self, question: str, keys: str) -> str:
        self._answered.clear()
        # Keys count only once the question is on the screen: call_from_thread
        # returns after show_question has run.
        self._app.call_from_thread(self._app.show_question, question)
        self.keys = keys
        self._answered.wait()
        self.keys = ""
        if self._answer == "interrupt":
            raise TurnInterrupted
        return self._answer

    def answer(self, key: str) -> None:
        self._answer = key
        self._answered.set()


class _StdoutDriver(LinuxDriver):
    """Textual draws on stderr by default; sandbx keeps stderr for the audit trail and
    draws on stdout, the terminal tui insists on."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._file = sys.__stdout__


class TurnScreen(App[TurnResult | None]):
    CSS = """
    #prompt { background: $boost; padding: 0 1; }
    #transcript { height: 1fr; }
    .answer { padding: 0 1; }
    .reasoning { color: $text-muted; padding: 0 1; }
    .row { background: $panel; color: $accent; padding: 0 1; }
    #question { background: $warning 30%; padding: 0 1; display: none; }
    #status { dock: bottom; background: $primary 40%; padding: 0 1; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+c", "interrupt", "end the turn", priority=True),
        Binding("escape", "interrupt", "end the turn", priority=True),
    ]

    def __init__(self, *, prompt: str, run_turn: RunTurn, kill_command: Callable[[], None]) -> None:
        super().__init__(driver_class=_StdoutDriver)
        self._prompt = prompt
        self._run_turn = run_turn
        self._kill_command = kill_command
        self.stop = threading.Event()
        self.hung_up = threading.Event()
        self.asker = ScreenAsker(self)
        self.lines: list[ScreenLine] = []
        self._answer_widget: Static | None = None
        self._answer_text = ""
        self._rounds = 0
        self._requests = 0
        self._tokens = (0, 0)
        self._state = "running"

    def compose(self) -> ComposeResult:
        yield Static(Text(f"{PROMPT_MARK} {model_text(self._prompt)}"), id="prompt")
        yield VerticalScroll(id="transcript")
        yield Static(id="question")
        yield Static(self._status_text(), id="status")

    def on_mount(self) -> None:
        self.run_worker(self._work, thread=True, exit_on_error=False)
        self.set_interval(0.25, self._watch_terminal)

    def _watch_terminal(self) -> None:
        """A hangup reaches only the session leader as a signal; everyone else sees it as
        POLLHUP on the terminal. Then the turn ends where it stood."""
        poller = select.poll()
        for fd in (0, 1):
            poller.register(fd, select.POLLIN)
        gone = select.POLLHUP | select.POLLERR | select.POLLNVAL
        if any(events & gone for _fd, events in poller.poll(0)):
            self.hang_up()

    def hang_up(self) -> None:
        if not self.hung_up.is_set():
            self.hung_up.set()
            self.stop.set()
            if self.asker.keys:
                self.asker.answer("interrupt")
            self._kill_command()
            self.exit(None)

    def _work(self) -> None:
        sink = Sink(
            answer=lambda text: self.call_from_thread(self.add_answer, text),
            reasoning=lambda text: self.call_from_thread(self.add_reasoning, text),
            line=lambda text: self.call_from_thread(self.add_row, text),
            progress=lambda requests, calls, tokens_in, tokens_out: self.call_from_thread(
                self.show_progress, requests, calls, tokens_in, tokens_out
            ),
        )
        result: TurnResult | None = None
        try:
            result = self._run_turn(sink, self.asker, self.stop)
        finally:
            self._state = "done"
            self.call_from_thread(self.exit, result)

    def add_answer(self, text: str) -> None:
        transcript = self.query_one("#transcript", VerticalScroll)
        if self._answer_widget is None:
            self._answer_widget = Static(classes="answer")
            transcript.mount(self._answer_widget)
            self._answer_text = ""
        self._answer_text += text
        self._answer_widget.update(Text(model_text(self._answer_text)))
        self._remember("answer", text)
        transcript.scroll_end(animate=False)

    def add_reasoning(self, text: str) -> None:
        self._remember("reasoning", text)
        self._add_static(model_text(text), "reasoning")

    def add_row(self, text: str) -> None:
        self._answer_widget = None
        self._remember("row", text)
        self._add_static(f"{ROW_MARK} sandbx: {shown_safely(text, 2000)}", "row")
        self.query_one("#status", Static).update(self._status_text())

    def show_progress(self, requests: int, calls: int, tokens_in: int, tokens_out: int) -> None:
        self._requests = requests
        self._rounds = calls
        self._tokens = (tokens_in, tokens_out)
        self.query_one("#status", Static).update(self._status_text())

    def show_question(self, question: str) -> None:
        widget = self.query_one("#question", Static)
        widget.update(Text(f"{ROW_MARK} {shown_safely(question, 2000)}"))
        widget.display = True
        self._remember("row", question)

    def on_key(self, event: object) -> None:
        key = str(getattr(event, "key", ""))
        if self.asker.keys and key in self.asker.keys:
            self.query_one("#question", Static).display = False
            self._add_static(f"{ROW_MARK} answered: {key}", "row")
            self._remember("row", f"answered: {key}")
            self.asker.answer(key)

    def action_interrupt(self) -> None:
        self.stop.set()
        self._state = "stopping"
        self.query_one("#status", Static).update(self._status_text())
        if self.asker.keys:
            self.query_one("#question", Static).display = False
            self.asker.answer("interrupt")
        self._kill_command()

    def _add_static(self, text: str, kind: str) -> None:
        transcript = self.query_one("#transcript", VerticalScroll)
        transcript.mount(Static(Text(text), classes=kind))
        transcript.scroll_end(animate=False)

    def _remember(self, kind: str, text: str) -> None:
        if self.lines and self.lines[-1].kind == kind and kind != "row":
            self.lines[-1] = ScreenLine(kind=kind, text=self.lines[-1].text + text)
        else:
            self.lines.append(ScreenLine(kind=kind, text=text))

    def _status_text(self) -> Text:
        tokens_in, tokens_out = self._tokens
        return Text(
            f"{self._state} · rounds {self._requests} · tool calls {self._rounds} · "
            f"tokens in {tokens_in} out {tokens_out} · ctrl-c or escape ends the turn"
        )
