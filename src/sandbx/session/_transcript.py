"""A session's transcript: one JSONL file, appended a record at a time and flushed to disk.

Records: a ``header`` (format version, created, model), one ``round`` per
finished round of tool calls or answer (its messages, thinking removed), and
one ``turn`` per finished turn (outcome, usage, rounds, what compaction left
out). A round is one record, so a crash loses at most the round being
written. Reading refuses a torn or invalid line in the middle (with its
number), a future format, and a history that does not alternate or ends on an
unanswered tool call; a torn last line is dropped with a note. Nothing is
ever rewritten.
"""

from __future__ import annotations

import json
import os
import time

from sandbx._private_files import (
    PRIVATE_FILE_MODE,
    NotPrivate,
    check_private,
    ensure_private_directory,
    sync_directory,
)
from sandbx._value import value
from sandbx.errors import SandbxError

FORMAT_VERSION = 1
_ID_ALPHABET = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")
_ID_LENGTH = 8

Message = dict[str, object]


class SessionRefused(SandbxError):
    """A session id, file or transcript sandbx will not use."""


@value
class TurnRecord:
    turn: int
    outcome: str
    rounds: int
    input_tokens: int
    output_tokens: int
    withheld_turns: int = 0


@value
class Transcript:
    """What a session file holds, as far as it can be trusted."""

    session_id: str
    created: str
    model: str
    turns: tuple[tuple[Message, ...], ...]
    turn_records: tuple[TurnRecord, ...]
    notes: tuple[str, ...]
    # Where a torn last line begins, if there is one: what reopening cuts off.
    torn_tail_at: int | None = None

    @property
    def messages(self) -> tuple[Message, ...]:
        return tuple(message for turn in self.turns for message in turn)


def new_session_id() -> str:
    number = int.from_bytes(os.urandom(8), "big")
    digits = []
    for _ in range(_ID_LENGTH):
        number, digit = divmod(number, 36)
        digits.append("0123456789abcdefghijklmnopqrstuvwxyz"[digit])
    return "".join(digits)


def vet_session_id(text: str) -> str:
    """Checked before any file system call: no separator, no dot, nothing outside the alphabet."""
    if len(text) != _ID_LENGTH or not set(text) <= _ID_ALPHABET:
        raise SessionRefused(
            f"{text!r} is not a sandbx session id",
            "pass the id sandbx printed (8 letters and digits), or --session alone for a new one",
        )
    return text


def list_sessions(directory: str) -> list[Transcript]:
    """Every readable transcript in the store, newest first; unreadable ones are skipped."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found: list[tuple[float, Transcript]] = []
    for name in names:
        session_id = name.removesuffix(".jsonl")
        if not name.endswith(".jsonl") or len(session_id) != _ID_LENGTH:
            continue
        try:
            path = _checked_path(directory, session_id, create_store=False)
            found.append((os.stat(path).st_mtime, read_transcript(path, session_id)))
        except (SessionRefused, OSError):
            continue
    return [transcript for _mtime, transcript in sorted(found, key=lambda item: -item[0])]


def open_transcript(directory: str, session_id: str) -> Transcript:
    return read_transcript(_checked_path(directory, session_id, create_store=False), session_id)


class SessionFile:
    """An open transcript to append to."""

    def __init__(self, session_id: str, fd: int) -> None:
        self.session_id = session_id
        self._fd = fd

    @classmethod
    def create(cls, directory: str, model: str) -> SessionFile:
        _ensure_store(directory)
        session_id = new_session_id()
        path = os.path.join(directory, f"{session_id}.jsonl")
        fd = os.open(
            path,
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            PRIVATE_FILE_MODE,
        )
        session = cls(session_id, fd)
        session.append(
            {
                "type": "header",
                "format": FORMAT_VERSION,
                "created": _now(),
                "model": model,
            }
        )
        sync_directory(directory)
        return session

    @classmethod
    def reopen(cls, directory: str, session_id: str) -> tuple[SessionFile, Transcript]:
        path = _checked_path(directory, session_id)
        transcript = read_transcript(path, session_id)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC)
        if transcript.torn_tail_at is not None:
            # The torn record was lost in the crash already; cutting it off, with
            # the note the caller prints, keeps the next record on a line of its own.
            os.ftruncate(fd, transcript.torn_tail_at)
            os.fsync(fd)
        return cls(session_id, fd), transcript

    def append(self, record: dict[str, object]) -> None:
        line = (json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n").encode(
            "utf-8", "surrogatepass"
        )
        # One write per record, then fsync: a crash at any moment leaves every
        # earlier record whole and at most this one torn.
        view = memoryview(line)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)

    def append_round(self, turn: int, messages: list[Message]) -> None:
        self.append({"type": "round", "turn": turn, "messages": [_stored(m) for m in messages]})

    def append_turn(self, record: TurnRecord) -> None:
        self.append(
            {
                "type": "turn",
                "turn": record.turn,
                "outcome": record.outcome,
                "rounds": record.rounds,
                "usage": {
                    "input_tokens": record.input_tokens,
                    "output_tokens": record.output_tokens,
                },
                "withheld_turns": record.withheld_turns,
            }
        )

    def close(self) -> None:
        os.close(self._fd)


def _stored(message: Message) -> Message:
    """Thinking blocks are replayed within a turn and never stored."""
    content = message.get("content")
    if not isinstance(content, list):
        return message
    kept = [
        block
        for block in content
        if not (isinstance(block, dict) and block.get("type") in ("thinking", "redacted_thinking"))
    ]
    if not kept:
        # The API refuses an empty message; a reply that was all thinking keeps a mark.
        kept = [{"type": "text", "text": "(no answer)"}]
    return {**message, "content": kept}


def _ensure_store(directory: str) -> None:
    try:
        # sandbx's own directory above the store is made private when sandbx
        # makes it; the store itself is what is checked.
        os.makedirs(os.path.dirname(directory), mode=0o700, exist_ok=True)
        ensure_private_directory(directory)
    except NotPrivate as exc:
        raise SessionRefused(f"the session store {exc.path} {exc.why}", exc.fix) from exc


def _checked_path(directory: str, session_id: str, *, create_store: bool = True) -> str:
    vet_session_id(session_id)
    if create_store:
        _ensure_store(directory)
    path = os.path.join(directory, f"{session_id}.jsonl")
    try:
        check_private(path, directory=False)
    except FileNotFoundError as exc:
        raise SessionRefused(
            f"there is no session {session_id}", "run `sandbx sessions` to list them"
        ) from exc
    except NotPrivate as exc:
        raise SessionRefused(
            f"refusing session {session_id}: {exc.path} {exc.why}", exc.fix
        ) from exc
    return path


def read_transcript(path: str, session_id: str) -> Transcript:
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read()
    return parse_transcript(data, session_id)


def parse_transcript(data: bytes, session_id: str) -> Transcript:
    lines = data.split(b"\n")
    notes: list[str] = []
    torn_last = lines[-1] != b""
    if not torn_last:
        lines = lines[:-1]
    records: list[dict[str, object]] = []
    for number, raw in enumerate(lines, 1):
        record = _record_of(raw)
        if record is None:
            if number == len(lines) and torn_last:
                notes.append(f"line {number} was torn (a crash while writing it) and is left out")
                break
            raise SessionRefused(
                f"session {session_id} is damaged at line {number}",
                "nothing was changed; copy the file aside and start a new session",
            )
        records.append(record)
    torn_at = len(data) - len(lines[-1]) if torn_last and notes else None
    return _assemble(records, session_id, notes, torn_at)


def _record_of(raw: bytes) -> dict[str, object] | None:
    try:
        record = json.loads(raw.decode("utf-8", "surrogatepass"))
    except (ValueError, UnicodeDecodeError):
        return None
    return record if isinstance(record, dict) else None


def _assemble(
    records: list[dict[str, object]], session_id: str, notes: list[str], torn_at: int | None
) -> Transcript:
    if not records or records[0].get("type") != "header":
        raise SessionRefused(
            f"session {session_id} has no header", "start a new session with --session alone"
        )
    header = records[0]
    version = header.get("format")
    if not isinstance(version, int) or version > FORMAT_VERSION:
        raise SessionRefused(
            f"session {session_id} has format {version!r}; this sandbx reads format "
            f"{FORMAT_VERSION} and earlier",
            "use a newer sandbx to resume it",
        )
    turns: dict[int, list[Message]] = {}
    finished: list[TurnRecord] = []
    for record in records[1:]:
        turn = record.get("turn")
        if not isinstance(turn, int):
            raise SessionRefused(f"session {session_id} has a record without a turn", "")
        if record.get("type") == "round":
            messages = record.get("messages")
            if isinstance(messages, list):
                turns.setdefault(turn, []).extend(m for m in messages if isinstance(m, dict))
        elif record.get("type") == "turn":
            finished.append(_turn_record(record))
    ordered = tuple(tuple(turns[number]) for number in sorted(turns))
    _check_history(ordered, session_id)
    return Transcript(
        session_id=session_id,
        created=str(header.get("created", "")),
        model=str(header.get("model", "")),
        turns=ordered,
        turn_records=tuple(finished),
        notes=tuple(notes),
        torn_tail_at=torn_at,
    )


def _turn_record(record: dict[str, object]) -> TurnRecord:
    usage = record.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return TurnRecord(
        turn=int(str(record.get("turn", 0))),
        outcome=str(record.get("outcome", "")),
        rounds=int(str(record.get("rounds", 0))),
        input_tokens=int(str(usage.get("input_tokens", 0))),
        output_tokens=int(str(usage.get("output_tokens", 0))),
        withheld_turns=int(str(record.get("withheld_turns", 0))),
    )


def merged_messages(messages: list[Message]) -> list[Message]:
    """Adjacent user messages become one: a turn that ended on tool results is followed by
    the next turn's prompt, and the API wants roles to alternate."""
    merged: list[Message] = []
    for message in messages:
        if merged and merged[-1].get("role") == "user" and message.get("role") == "user":
            merged[-1] = {
                "role": "user",
                "content": [*message_blocks(merged[-1]), *message_blocks(message)],
            }
        else:
            merged.append(message)
    return merged


def message_blocks(message: Message) -> list[object]:
    """A message's content as a list of blocks, a plain string becoming one text block."""
    content = message.get("content")
    if isinstance(content, list):
        return list(content)
    return [{"type": "text", "text": str(content)}]


def _check_history(turns: tuple[tuple[Message, ...], ...], session_id: str) -> None:
    expected = "user"
    previous: Message | None = None
    for message in merged_messages([m for turn in turns for m in turn]):
        role = message.get("role")
        if role != expected:
            raise SessionRefused(
                f"session {session_id}'s history does not alternate user and assistant",
                "nothing was changed; start a new session",
            )
        expected = "assistant" if role == "user" else "user"
        previous = message
    if previous is not None and previous.get("role") == "assistant" and _tool_uses(previous):
        raise SessionRefused(
            f"session {session_id} ends on a tool call that was never answered",
            "nothing was changed; start a new session",
        )


def _tool_uses(message: Message) -> list[object]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_use"]


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
