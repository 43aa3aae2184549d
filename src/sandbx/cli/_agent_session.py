"""``--session [ID]`` for agent-run: start or resume a transcript, and keep each finished round.

Bare ``--session`` starts a conversation and says its id on stderr; ``--session
ID`` resumes it (the id is checked before any file is touched). Every finished
round is appended as it ends, and the turn's record when the turn ends.
"""

from __future__ import annotations

from collections.abc import Mapping

from sandbx._fdio import write_text
from sandbx.agent import History, TurnEnd, TurnResult
from sandbx.errors import SandbxError
from sandbx.policy import session_store_dir
from sandbx.session import SessionFile, TurnRecord, vet_session_id

_OUTCOMES = {
    TurnEnd.ANSWERED: "answered",
    TurnEnd.BOUND: "bound",
    TurnEnd.TERMINAL_GONE: "terminal_gone",
    TurnEnd.INTERRUPTED: "interrupted",
}


def is_session_argument(text: str) -> bool:
    """Whatever follows ``--session`` but a flag (or ``--``) is meant as an id, and vetted as
    one: a hostile id is refused, never mistaken for the start of the prompt."""
    return not text.startswith("-")


class NoSessionStore(SandbxError):
    def __init__(self) -> None:
        super().__init__(
            "there is no place for the session store ($XDG_STATE_HOME and $HOME are unset)",
            "set HOME, or leave out --session",
        )


class AgentSession:
    def __init__(self, file: SessionFile, history: History, turn_number: int) -> None:
        self.file = file
        self.history = history
        self._turn_number = turn_number

    @property
    def session_id(self) -> str:
        return self.file.session_id

    @classmethod
    def open(cls, requested: str | None, *, model: str, environ: Mapping[str, str]) -> AgentSession:
        directory = session_store_dir(environ)
        if requested is None:
            if directory is None:
                raise NoSessionStore
            file = SessionFile.create(directory, model)
            write_text(
                2,
                f"sandbx: session {file.session_id} started; resume it with "
                f"--session {file.session_id}\n",
            )
            return cls(file, History(), 1)
        vet_session_id(requested)
        if directory is None:
            raise NoSessionStore
        file, transcript = SessionFile.reopen(directory, requested)
        for note in transcript.notes:
            write_text(2, f"sandbx: session {requested}: {note}\n")
        last_input = transcript.turn_records[-1].input_tokens if transcript.turn_records else 0
        numbers = [record.turn for record in transcript.turn_records]
        history = History(turns=transcript.turns, last_input_tokens=last_input)
        return cls(file, history, max([0, *numbers, len(transcript.turns)]) + 1)

    def keep_round(self, messages: list[dict[str, object]]) -> None:
        self.file.append_round(self._turn_number, messages)

    def finish(self, result: TurnResult) -> None:
        self.file.append_turn(
            TurnRecord(
                turn=self._turn_number,
                outcome=_OUTCOMES[result.end],
                rounds=result.rounds,
                input_tokens=result.last_input_tokens,
                output_tokens=result.output_tokens,
                withheld_turns=result.withheld_turns,
            )
        )
        if result.withheld_turns:
            write_text(
                2,
                f"sandbx: --compact-at left the oldest {result.withheld_turns} turn(s) out of "
                "what was sent; they stay in the transcript\n",
            )

    def close(self) -> None:
        self.file.close()
