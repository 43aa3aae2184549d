"""One turn: a question, and the rounds of tool calls that answer it.

Each round sends the conversation, streams the reply to stdout and, if it asks
for tools, answers every call in order through the gate and the tool box. A
round without a tool call ends the turn. Out of rounds, one more request with
``tool_choice`` none asks for the answer so far. Thinking blocks are replayed
unchanged within the turn and never kept beyond it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sandbx._enum import Enum
from sandbx._value import value
from sandbx.agent._gate import Gate, TerminalGone
from sandbx.providers import (
    Message,
    ModelReply,
    ModelRequest,
    Provider,
    Retrying,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
)
from sandbx.session import merged_messages, message_blocks
from sandbx.tools import ToolBox, ToolOutcome


class TurnEnd(Enum):
    """How a turn ended."""

    ANSWERED = "answered"
    BOUND = "bound"
    INTERRUPTED = "interrupted"
    TERMINAL_GONE = "terminal_gone"

    @property
    def exit_code(self) -> int:
        """The exit code: 0, 2 for a bound or an interrupt, 3 for a lost terminal."""
        match self:
            case TurnEnd.ANSWERED:
                return 0
            case TurnEnd.BOUND | TurnEnd.INTERRUPTED:
                return 2
            case TurnEnd.TERMINAL_GONE:
                return 3


class TurnInterrupted(Exception):
    """The person ended the turn (ctrl-c or escape): the round in flight is dropped."""


@value
class TurnSettings:
    model: str
    max_tokens: int
    max_rounds: int
    wrap_up: bool
    system: str
    tools: tuple[dict[str, object], ...]
    thinking: dict[str, object] | None = None


@value
class History:
    """The earlier turns of a ``--session`` conversation, as stored."""

    turns: tuple[tuple[Message, ...], ...] = ()
    last_input_tokens: int = 0


@value
class TurnResult:
    end: TurnEnd
    messages: tuple[Message, ...]
    rounds: int
    note: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    last_input_tokens: int = 0
    withheld_turns: int = 0


class Sink:
    """Where a turn's visible output goes: the answer, reasoning, and sandbx's own lines."""

    def __init__(
        self,
        *,
        answer: Callable[[str], None],
        reasoning: Callable[[str], None] | None,
        line: Callable[[str], None],
        progress: Callable[[int, int, int, int], None] | None = None,
    ) -> None:
        self.answer = answer
        self.reasoning = reasoning
        self.line = line
        # (requests sent, tool calls answered, input tokens, output tokens), for a status line.
        self.progress = progress


class Turn:
    def __init__(
        self,
        *,
        provider: Provider,
        tools: ToolBox,
        gate: Gate,
        sink: Sink,
        settings: TurnSettings,
        on_round: Callable[[list[Message]], None] | None = None,
        compact_at: int | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self._provider = provider
        self._tools = tools
        self._gate = gate
        self._sink = sink
        self._settings = settings
        self._on_round = on_round
        self._compact_at = compact_at
        self._stop = stop
        self._answered_any = False
        self._last_character = "\n"
        self._history: tuple[tuple[Message, ...], ...] = ()
        self._withheld = 0
        self._last_input = 0
        self._input_tokens = 0
        self._output_tokens = 0
        self._requests = 0
        self._calls = 0
        self._reasoning_pending = ""

    @property
    def answer_ends_a_line(self) -> bool:
        return self._last_character == "\n"

    def run(self, history: History, prompt: str) -> TurnResult:
        """Answer ``prompt``; each finished round is handed to ``on_round`` as it ends."""
        self._history = history.turns
        self._last_input = history.last_input_tokens
        messages: list[Message] = []
        uncommitted: list[Message] = [{"role": "user", "content": prompt}]
        rounds = 0
        while True:
            try:
                reply = self._ask([*messages, *uncommitted], tool_choice=None)
            except TurnInterrupted:
                return self._result(
                    TurnEnd.INTERRUPTED, messages, rounds, "the turn was interrupted"
                )
            if reply.stop_reason == "max_tokens":
                self._commit(messages, uncommitted, [_without_tool_uses(reply.as_message())])
                return self._result(TurnEnd.BOUND, messages, rounds, self._max_tokens_note())
            calls = reply.tool_uses()
            if not calls:
                self._commit(messages, uncommitted, [reply.as_message()])
                return self._result(TurnEnd.ANSWERED, messages, rounds)
            rounds += 1
            try:
                results = [self._answer(call) for call in calls]
                self._check_stop()
            except TurnInterrupted:
                return self._result(
                    TurnEnd.INTERRUPTED, messages, rounds, "the turn was interrupted"
                )
            except TerminalGone:
                # The round that was stopped is not kept: only finished rounds are.
                return self._result(
                    TurnEnd.TERMINAL_GONE,
                    messages,
                    rounds,
                    "the terminal went away; this call and the rest were refused",
                )
            uncommitted = self._commit(
                messages, uncommitted, [reply.as_message(), {"role": "user", "content": results}]
            )
            if rounds >= self._settings.max_rounds:
                return self._out_of_rounds(messages, rounds)

    def _commit(
        self, messages: list[Message], uncommitted: list[Message], finished: list[Message]
    ) -> list[Message]:
        """A round is over: keep it, hand it to the store, start the next one empty."""
        round_messages = [*uncommitted, *finished]
        messages.extend(round_messages)
        if self._on_round is not None:
            self._on_round(round_messages)
        return []

    def _out_of_rounds(self, messages: list[Message], rounds: int) -> TurnResult:
        note = f"the turn used its --max-rounds {self._settings.max_rounds}"
        if self._settings.wrap_up:
            if self._answered_any:
                self._sink.answer("\n")
            try:
                reply = self._ask(messages, tool_choice={"type": "none"})
            except TurnInterrupted:
                return self._result(
                    TurnEnd.INTERRUPTED, messages, rounds, "the turn was interrupted"
                )
            self._commit(messages, [], [_without_tool_uses(reply.as_message())])
        return self._result(TurnEnd.BOUND, messages, rounds, note)

    def _max_tokens_note(self) -> str:
        return f"the answer was cut at --max-tokens {self._settings.max_tokens}"

    def _result(
        self, end: TurnEnd, messages: list[Message], rounds: int, note: str = ""
    ) -> TurnResult:
        return TurnResult(
            end=end,
            messages=tuple(messages),
            rounds=rounds,
            note=note,
            input_tokens=self._input_tokens,
            output_tokens=self._output_tokens,
            last_input_tokens=self._last_input,
            withheld_turns=self._withheld,
        )

    def _request_messages(self, current: list[Message]) -> list[Message]:
        if (
            self._compact_at is not None
            and self._last_input > self._compact_at
            and self._withheld < len(self._history)
        ):
            # Whole turns only, so what is sent still opens with a user's own prompt.
            self._withheld += 1
            self._sink.line(
                f"the last request took {self._last_input} tokens, past --compact-at "
                f"{self._compact_at}: the oldest {self._withheld} turn(s) are no longer sent"
            )
        kept = [m for turn in self._history[self._withheld :] for m in turn]
        return merged_messages([*kept, *current])

    def _ask(self, messages: list[Message], *, tool_choice: dict[str, object] | None) -> ModelReply:
        request = ModelRequest(
            model=self._settings.model,
            max_tokens=self._settings.max_tokens,
            system=self._settings.system,
            messages=tuple(self._request_messages(messages)),
            tools=self._settings.tools,
            tool_choice=tool_choice,
            thinking=self._settings.thinking,
        )
        if self._last_character != "\n":
            # A new round's text begins on a line of its own.
            self._sink.answer("\n")
            self._last_character = "\n"
        try:
            reply = self._provider.stream(request, self._on_event)
        finally:
            self._finish_reasoning()
        self._last_input = reply.usage.input_tokens
        self._input_tokens += reply.usage.input_tokens
        self._output_tokens += reply.usage.output_tokens
        self._requests += 1
        self._report_progress()
        if any(block.get("type") == "text" for block in reply.content):
            self._answered_any = True
        return reply

    def _report_progress(self) -> None:
        if self._sink.progress is not None:
            self._sink.progress(
                self._requests, self._calls, self._input_tokens, self._output_tokens
            )

    def _reason(self, text: str) -> None:
        """Reasoning goes out a whole line at a time, so an audit record written on the same
        stream never lands in the middle of one."""
        if self._sink.reasoning is None:
            return
        self._reasoning_pending += text
        complete, newline, rest = self._reasoning_pending.rpartition("\n")
        if newline:
            self._sink.reasoning(complete + "\n")
            self._reasoning_pending = rest

    def _finish_reasoning(self) -> None:
        if self._sink.reasoning is not None and self._reasoning_pending:
            self._sink.reasoning(self._reasoning_pending + "\n")
        self._reasoning_pending = ""

    def _check_stop(self) -> None:
        if self._stop is not None and self._stop.is_set():
            raise TurnInterrupted

    def _on_event(self, event: StreamEvent) -> None:
        # Raising here ends the stream in flight: its round is never kept.
        self._check_stop()
        match event:
            case TextDelta(text=text):
                # Reasoning held back for a whole line goes out before the answer it preceded.
                self._finish_reasoning()
                if text:
                    self._sink.answer(text)
                    self._last_character = text[-1]
            case ThinkingDelta(text=text):
                self._reason(text)
            case Retrying(what=what, delay_seconds=delay):
                self._finish_reasoning()
                if self._last_character != "\n":
                    # What streamed before the failure stays; the answer asked for
                    # again starts on a line of its own.
                    self._sink.answer("\n")
                    self._last_character = "\n"
                self._sink.line(f"the model's API failed ({what}); asking again in {delay:.1f} s")

    def _answer(self, call: dict[str, object]) -> dict[str, object]:
        self._check_stop()
        name = str(call.get("name", ""))
        raw = call.get("input")
        arguments = raw if isinstance(raw, dict) else {}
        verdict = self._gate.decide(name, arguments)
        if not verdict.approved:
            outcome = ToolOutcome(
                text=f"refused: {verdict.why}",
                is_error=True,
                verdict=f"refused: {verdict.why}",
                subject=self._tools.subject_of(name, arguments),
            )
        else:
            outcome = self._tools.run(name, arguments)
        typed = arguments.get("path") if name != "bash" else None
        subject = outcome.subject or (typed if isinstance(typed, str) else "")
        shown = f"{name} {subject}" if subject else name
        self._sink.line(f"{shown} — {outcome.verdict}")
        self._calls += 1
        self._report_progress()
        return {
            "type": "tool_result",
            "tool_use_id": call.get("id"),
            "content": outcome.text or "(no output)",
            "is_error": outcome.is_error,
        }


def _without_tool_uses(message: Message) -> Message:
    """A cut or wrap-up reply is stored without tool calls nobody will answer."""
    content = [
        b
        for b in message_blocks(message)
        if not (isinstance(b, dict) and b.get("type") == "tool_use")
    ]
    return {"role": "assistant", "content": content or [{"type": "text", "text": "(no answer)"}]}
