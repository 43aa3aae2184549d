"""``sandbx sessions`` and ``sandbx sessions show ID``: read the session store, never write it."""

from __future__ import annotations

import os

from sandbx._fdio import write_text
from sandbx.agent._display import shown_safely
from sandbx.cli._flags import check, parse
from sandbx.errors import SandbxError
from sandbx.policy import session_store_dir
from sandbx.session import Transcript, list_sessions, open_transcript, vet_session_id

PROG = "sandbx sessions"


def main(argv: list[str]) -> int:
    parsed = parse(
        PROG, "List stored sessions, newest first; `show ID` prints one transcript.", (), argv
    )
    words = list(parsed.rest)
    check(
        words == [] or (len(words) == 2 and words[0] == "show"),
        PROG,
        "takes nothing, or show ID",
        "run `sandbx sessions` or `sandbx sessions show ID`",
    )
    directory = session_store_dir(os.environ)
    if directory is None:
        raise SandbxError("there is no session store ($XDG_STATE_HOME and $HOME are unset)")
    if not words:
        write_text(1, _listing(list_sessions(directory)))
        return 0
    transcript = open_transcript(directory, vet_session_id(words[1]))
    write_text(1, _shown(transcript))
    return 0


def _listing(transcripts: list[Transcript]) -> str:
    if not transcripts:
        return "no sessions yet; start one with `sandbx agent-run --session -- PROMPT`\n"
    lines = [f"{'id':<9} {'started':<21} {'turns':>5}  first prompt"]
    for transcript in transcripts:
        first = _first_prompt(transcript)
        lines.append(
            f"{transcript.session_id:<9} {transcript.created:<21} "
            f"{len(transcript.turn_records):>5}  {shown_safely(first, 60)}"
        )
    return "\n".join(lines) + "\n"


def _first_prompt(transcript: Transcript) -> str:
    for message in transcript.messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return str(message["content"]).replace("\n", " ")
    return ""


def _shown(transcript: Transcript) -> str:
    lines = [f"session {transcript.session_id}, started {transcript.created}, {transcript.model}"]
    lines.extend(f"note: {note}" for note in transcript.notes)
    for message in transcript.messages:
        content = message.get("content")
        blocks = content if isinstance(content, list) else [{"type": "text", "text": content}]
        role = str(message.get("role"))
        lines.extend(_block_line(role, block) for block in blocks if isinstance(block, dict))
    return "\n".join(lines) + "\n"


def _block_line(role: str, block: dict[str, object]) -> str:
    kind = block.get("type")
    if kind == "text":
        speaker = "you" if role == "user" else "model"
        return f"{speaker}: {shown_safely(str(block.get('text', '')), 4000)}"
    if kind == "tool_use":
        return f"  call {block.get('name')} {shown_safely(str(block.get('input')), 300)}"
    if kind == "tool_result":
        verdict = "failed" if block.get("is_error") else "ok"
        return f"  result ({verdict}): {shown_safely(str(block.get('content', '')), 300)}"
    return f"  [{kind}]"
