"""``sandbx sessions`` and ``sandbx sessions show ID``: the session store, read and never
written.

The list has one row per stored session (id, started, turns, the first prompt cut
short), newest first; ``show`` prints one transcript readably: each prompt, each
answer, each tool call and its outcome. Neither changes a byte, a mode or a time.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbx.testing import ScriptedMessagesServer, reply, text_block, tool_use_block
from tests.session.session_support import (
    agent_run,
    records_in,
    run_sandbx,
    started_id,
    store_dir,
    tree,
)
from tests.support import Run, Sandbx

pytestmark = pytest.mark.boundary

EMPTY = "no sessions yet; start one with `sandbx agent-run --session -- PROMPT`\n"
LONG_PROMPT = "please read every file in this project and explain " + "in great detail " * 6


def _ok(run: Run) -> Run:
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run


def _session(sbx: Sandbx, *prompts: str) -> str:
    """A session of one answered turn per prompt; its id."""
    session_id: str | None = None
    for number, prompt in enumerate(prompts, 1):
        resume = [] if session_id is None else [session_id]
        with ScriptedMessagesServer([reply(text_block(f"Answer {number}."))]) as server:
            run = _ok(agent_run(sbx, server, "--session", *resume, prompt=prompt))
        session_id = session_id or started_id(run)
    assert session_id is not None
    return session_id


def _snapshot(store: Path) -> dict[str, tuple[bytes, int, int]]:
    """Every file's bytes, mode and modification time, and the store's own."""
    found = {}
    for path in (store, *(store / name for name in os.listdir(store))):
        status = os.lstat(path)
        data = path.read_bytes() if path.is_file() else b""
        found[path.name] = (data, status.st_mode, status.st_mtime_ns)
    return found


def test_sessions_without_a_store_says_there_are_none_and_creates_nothing(sbx: Sandbx) -> None:
    run = _ok(run_sandbx(sbx, "sessions"))

    assert run.stdout == EMPTY
    assert tree(sbx.home) == []


def test_sessions_lists_each_session_newest_first_with_its_turns_and_first_prompt_cut_short(
    sbx: Sandbx,
) -> None:
    older = _session(sbx, "what is here?", "and in the README?")
    newer = _session(sbx, LONG_PROMPT)
    created = {
        session_id: records_in(store_dir(sbx) / f"{session_id}.jsonl")[0]["created"]
        for session_id in (older, newer)
    }

    run = _ok(run_sandbx(sbx, "sessions"))

    head, *rows = run.stdout.splitlines()
    assert head.split() == ["id", "started", "turns", "first", "prompt"]
    assert [row.split(maxsplit=3)[:3] for row in rows] == [
        [newer, created[newer], "1"],
        [older, created[older], "2"],
    ]
    newer_prompt = rows[0].split(maxsplit=3)[3]
    assert len(newer_prompt) < len(LONG_PROMPT.strip())
    assert LONG_PROMPT.startswith(newer_prompt.split("…")[0])
    assert "…" in newer_prompt
    assert rows[1].split(maxsplit=3)[3] == "what is here?"


def test_sessions_and_sessions_show_change_nothing_in_the_store(sbx: Sandbx) -> None:
    first = _session(sbx, "one", "two")
    _session(sbx, "three")
    store = store_dir(sbx)
    before = _snapshot(store)

    listed = _ok(run_sandbx(sbx, "sessions"))
    shown = _ok(run_sandbx(sbx, "sessions", "show", first))

    assert first in listed.stdout
    assert "you: one" in shown.stdout
    assert _snapshot(store) == before


def test_sessions_show_prints_prompts_answers_and_each_tool_call_with_its_outcome(
    sbx: Sandbx,
) -> None:
    (sbx.workdir / "README.md").write_text("# demo\n")
    secret = sbx.workdir.parent / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("nobody may read this\n")
    script = [
        reply(
            text_block("Looking."),
            tool_use_block("ls", {"path": "."}),
            tool_use_block("read", {"path": str(secret)}),
        ),
        reply(text_block("It holds a README.")),
    ]
    with ScriptedMessagesServer(script) as server:
        session_id = started_id(_ok(agent_run(sbx, server, "--session", prompt="look around")))
    with ScriptedMessagesServer([reply(text_block("Nothing more."))]) as server:
        _ok(agent_run(sbx, server, "--session", session_id, prompt="anything else?"))
    created = records_in(store_dir(sbx) / f"{session_id}.jsonl")[0]["created"]

    run = _ok(run_sandbx(sbx, "sessions", "show", session_id))

    lines = run.stdout.splitlines()
    assert lines[0] == f"session {session_id}, started {created}, claude-sonnet-5"
    assert lines[1:5] == [
        "you: look around",
        "model: Looking.",
        "  call ls {'path': '.'}",
        f"  call read {{'path': '{secret}'}}",
    ]
    # The outcomes follow in the order of the calls.
    assert lines[5].startswith("  result (ok): ")
    assert "README.md" in lines[5]
    assert lines[6].startswith("  result (failed): ")
    assert "nobody may read this" not in run.stdout
    assert lines[7:] == [
        "model: It holds a README.",
        "you: anything else?",
        "model: Nothing more.",
    ]


def test_sessions_show_notes_a_torn_last_line_and_leaves_it_in_place(sbx: Sandbx) -> None:
    session_id = _session(sbx, "one")
    path = store_dir(sbx) / f"{session_id}.jsonl"
    with path.open("ab") as transcript:
        transcript.write(b'{"type":"round","turn":2,"mess')
    before = path.read_bytes()

    run = _ok(run_sandbx(sbx, "sessions", "show", session_id))

    assert "note: line 4 was torn (a crash while writing it) and is left out" in run.stdout
    assert "you: one" in run.stdout
    assert path.read_bytes() == before


def test_sessions_show_of_an_unknown_session_is_refused_and_creates_nothing(
    sbx: Sandbx,
) -> None:
    run = run_sandbx(sbx, "sessions", "show", "abcd1234")

    assert run.returncode == 1
    assert "there is no session abcd1234" in run.stderr
    assert tree(sbx.home) == []


@pytest.mark.parametrize(
    "words",
    [["list"], ["show"], ["show", "abcd1234", "extra"], ["--all"], ["abcd1234"]],
    ids=["list", "show-alone", "show-two", "unknown-flag", "id-alone"],
)
def test_a_bad_sessions_command_line_exits_64(sbx: Sandbx, words: list[str]) -> None:
    run = run_sandbx(sbx, "sessions", *words)

    assert run.returncode == 64, run.stderr
    assert run.stdout == ""
    assert run.stderr.startswith("sandbx: sandbx sessions: ")
