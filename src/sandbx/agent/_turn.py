"""One turn: a question, and the rounds of tool calls that answer it.

Each round sends the conversation, streams the reply to stdout and, if it asks
for tools, answers every call in order through the gate and the tool box. A
round without a tool call ends the turn. Out of rounds, one more request with
``tool_choice`` none asks for the answer so far. Thinking blocks are replayed
unchanged within the turn and never kept beyond it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable

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
from sandbx.tools import ToolBox, ToolOutcome


class TurnEnd(enum.Enum):
    """How a turn ended; each maps to agent-run's exit code."""

    ANSWERED = 0
    BOUND = 2
    TERMINAL_GONE = 3


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
class TurnResult:
    end: TurnEnd
    messages: tuple[Message, ...]
    rounds: int
    note: str = ""


class Sink:
    """Where a turn's visible output goes: the answer, reasoning, and sandbx's own lines."""

    def __init__(
        self,
        *,
        answer: Callable[[str], None],
        reasoning: Callable[[str], None] | None,
        line: Callable[[str], None],
    ) -> None:
        self.answer = answer
        self.reasoning = reasoning
        self.line = line


class Turn:
    def __init__(
        self, *, provider: Provider, tools: ToolBox, gate: Gate, sink: Sink, settings: TurnSettings
    ) -> None:
        self._provider = provider
        self._tools = tools
        self._gate = gate
        self._sink = sink
        self._settings = settings
        self._answered_any = False
        self._last_character = "\n"

    @property
    def answer_ends_a_line(self) -> bool:
        return self._last_character == "\n"

    def run(self, history: tuple[Message, ...], prompt: str) -> TurnResult:
        messages: list[Message] = [*history, {"role": "user", "content": prompt}]
        rounds = 0
        while True:
            reply = self._ask(messages, tool_choice=None)
            messages.append(reply.as_message())
            if reply.stop_reason == "max_tokens":
                return self._bound(
                    messages,
                    rounds,
                    f"the answer was cut at --max-tokens {self._settings.max_tokens}",
                )
            calls = reply.tool_uses()
            if not calls:
                return TurnResult(end=TurnEnd.ANSWERED, messages=tuple(messages), rounds=rounds)
            rounds += 1
            try:
                results = [self._answer(call) for call in calls]
            except TerminalGone:
                messages.append({"role": "user", "content": self._refused_all(calls)})
                return TurnResult(
                    end=TurnEnd.TERMINAL_GONE,
                    messages=tuple(messages),
                    rounds=rounds,
                    note="the terminal went away; this call and the rest were refused",
                )
            messages.append({"role": "user", "content": results})
            if rounds >= self._settings.max_rounds:
                return self._out_of_rounds(messages, rounds)

    def _out_of_rounds(self, messages: list[Message], rounds: int) -> TurnResult:
        note = f"the turn used its --max-rounds {self._settings.max_rounds}"
        if self._settings.wrap_up:
            if self._answered_any:
                self._sink.answer("\n")
            reply = self._ask(messages, tool_choice={"type": "none"})
            messages.append(reply.as_message())
        return self._bound(messages, rounds, note)

    def _bound(self, messages: list[Message], rounds: int, note: str) -> TurnResult:
        return TurnResult(end=TurnEnd.BOUND, messages=tuple(messages), rounds=rounds, note=note)

    def _ask(self, messages: list[Message], *, tool_choice: dict[str, object] | None) -> ModelReply:
        request = ModelRequest(
            model=self._settings.model,
            max_tokens=self._settings.max_tokens,
            system=self._settings.system,
            messages=tuple(messages),
            tools=self._settings.tools,
            tool_choice=tool_choice,
            thinking=self._settings.thinking,
        )
        if self._last_character != "\n":
            # A new round's text begins on a line of its own.
            self._sink.answer("\n")
            self._last_character = "\n"
        reply = self._provider.stream(request, self._on_event)
        if any(block.get("type") == "text" for block in reply.content):
            self._answered_any = True
        return reply

    def _on_event(self, event: StreamEvent) -> None:
        match event:
            case TextDelta(text=text):
                if text:
                    self._sink.answer(text)
                    self._last_character = text[-1]
            case ThinkingDelta(text=text):
                if self._sink.reasoning is not None:
                    self._sink.reasoning(text)
            case Retrying(what=what, delay_seconds=delay):
                self._sink.line(f"the model's API failed ({what}); asking again in {delay:.1f} s")

    def _answer(self, call: dict[str, object]) -> dict[str, object]:
        name = str(call.get("name", ""))
        raw = call.get("input")
        arguments = raw if isinstance(raw, dict) else {}
        verdict = self._gate.decide(name, arguments)
        if not verdict.approved:
            outcome = ToolOutcome(
                text=f"refused: {verdict.why}", is_error=True, verdict=f"refused: {verdict.why}"
            )
        else:
            outcome = self._tools.run(name, arguments)
        typed = arguments.get("path") if name != "bash" else None
        subject = outcome.subject or (typed if isinstance(typed, str) else "")
        shown = f"{name} {subject}" if subject else name
        self._sink.line(f"{shown} — {outcome.verdict}")
        return {
            "type": "tool_result",
            "tool_use_id": call.get("id"),
            "content": outcome.text or "(no output)",
            "is_error": outcome.is_error,
        }

    @staticmethod
    def _refused_all(calls: tuple[dict[str, object], ...]) -> list[dict[str, object]]:
        return [
            {
                "type": "tool_result",
                "tool_use_id": call.get("id"),
                "content": "refused: the terminal asked on went away",
                "is_error": True,
            }
            for call in calls
        ]
