"""Transcripts and session ids sandbx refuses, and how: exit 1, one line naming the
problem (a line number, a format, the ``chmod`` that fixes it), no request to the
model, and not one byte of the transcript changed.

An id not of sandbx's own form is refused before any file system call; a transcript
another user could write, someone else owns, or that is a symlink is refused; so is
one damaged in the middle, of a future format, or whose history the API would refuse.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from sandbx.testing import ScriptedMessagesServer, reply, text_block
from tests.session.session_support import (
    HOSTILE_IDS,
    agent_run,
    answer,
    header,
    line,
    mode_of,
    one_turn,
    round_record,
    run_sandbx,
    sent_messages,
    store_dir,
    tree,
    turn_record,
    write_transcript,
)
from tests.support import Run, Sandbx, running_as_root

pytestmark = pytest.mark.boundary

SESSION_ID = "k3v9q2zd"


def _lines(records: list[dict[str, object]]) -> list[bytes]:
    return [line(record) for record in records]


def _resume(sbx: Sandbx, session_id: str = SESSION_ID) -> tuple[Run, ScriptedMessagesServer]:
    with ScriptedMessagesServer([reply(text_block("Should never be asked."))]) as server:
        run = agent_run(sbx, server, "--session", session_id, prompt="go on")
    return run, server


def assert_refused(run: Run, server: ScriptedMessagesServer, *fragments: str) -> str:
    """Exit 1, one ``sandbx:`` line holding every fragment, nothing sent to the model."""
    assert run.returncode == 1, (run.stdout, run.stderr)
    assert run.stdout == ""
    assert "Traceback" not in run.stderr
    lines = run.stderr.splitlines()
    assert len(lines) == 1, run.stderr
    assert lines[0].startswith("sandbx: "), run.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    assert server.requests == ()
    return lines[0]


def _refused_unchanged(sbx: Sandbx, path: Path, *fragments: str) -> str:
    """Resuming the session at ``path`` is refused and leaves its bytes and mode alone."""
    before = (path.read_bytes(), mode_of(path), os.lstat(path).st_mtime_ns)
    run, server = _resume(sbx, path.name.removesuffix(".jsonl"))
    refusal = assert_refused(run, server, *fragments)
    assert (path.read_bytes(), mode_of(path), os.lstat(path).st_mtime_ns) == before
    return refusal


# --- the baseline these refusals are measured against ---------------------------------


def test_a_well_formed_transcript_written_by_hand_resumes(sbx: Sandbx) -> None:
    write_transcript(store_dir(sbx), SESSION_ID, _lines(one_turn("hello", "hi there")))

    with ScriptedMessagesServer([reply(text_block("Resumed."))]) as server:
        run = agent_run(sbx, server, "--session", SESSION_ID, prompt="go on")

    assert run.returncode == 0, run.stderr
    assert sent_messages(server, 0) == [
        {"role": "user", "content": "hello"},
        answer("hi there"),
        {"role": "user", "content": "go on"},
    ]


# --- ids --------------------------------------------------------------------------------


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_an_id_not_of_sandbx_s_form_is_refused_before_any_file_is_touched(
    sbx: Sandbx, hostile: str
) -> None:
    with ScriptedMessagesServer([reply(text_block("Never."))]) as server:
        run = agent_run(sbx, server, f"--session={hostile}", prompt="go on")

    assert_refused(run, server, f"{hostile!r} is not a sandbx session id")
    assert tree(sbx.home) == []


def test_an_id_not_of_sandbx_s_form_after_a_space_is_refused_not_taken_as_the_prompt(
    sbx: Sandbx,
) -> None:
    outcomes = {}
    for hostile in HOSTILE_IDS:
        with ScriptedMessagesServer([reply(text_block("Never."))]) as server:
            run = agent_run(sbx, server, "--session", hostile, prompt="go on")
        outcome = f"exit {run.returncode}"
        if server.requests:
            outcome += f", the model was asked {sent_messages(server, 0)[0]['content']!r}"
        outcomes[hostile] = outcome

    assert outcomes == dict.fromkeys(HOSTILE_IDS, "exit 1")
    assert tree(sbx.home) == []


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_sessions_show_refuses_an_id_not_of_sandbx_s_form_touching_nothing(
    sbx: Sandbx, hostile: str
) -> None:
    run = run_sandbx(sbx, "sessions", "show", hostile)

    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert f"{hostile!r} is not a sandbx session id" in run.stderr
    assert tree(sbx.home) == []


def test_an_id_of_sandbx_s_form_with_no_transcript_is_refused(sbx: Sandbx) -> None:
    write_transcript(store_dir(sbx), SESSION_ID, _lines(one_turn()))

    run, server = _resume(sbx, "zzzzzzzz")

    assert_refused(run, server, "there is no session zzzzzzzz", "sandbx sessions")
    assert os.listdir(store_dir(sbx)) == [f"{SESSION_ID}.jsonl"]


# --- who may reach the transcript ------------------------------------------------------


@pytest.mark.parametrize("mode", [0o644, 0o640, 0o660, 0o620, 0o602, 0o606], ids=oct)
def test_a_transcript_others_can_reach_is_refused_naming_the_chmod(sbx: Sandbx, mode: int) -> None:
    path = write_transcript(store_dir(sbx), SESSION_ID, _lines(one_turn()))
    path.chmod(mode)

    _refused_unchanged(sbx, path, f"refusing session {SESSION_ID}", f"chmod 600 {path}")


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o770, 0o703], ids=oct)
def test_a_store_others_can_reach_is_refused_naming_the_chmod(sbx: Sandbx, mode: int) -> None:
    store = store_dir(sbx)
    path = write_transcript(store, SESSION_ID, _lines(one_turn()))
    store.chmod(mode)

    _refused_unchanged(sbx, path, f"chmod 700 {store}")
    assert mode_of(store) == mode


def test_no_session_is_started_in_a_store_others_can_reach(sbx: Sandbx) -> None:
    store = store_dir(sbx)
    store.mkdir(parents=True)
    store.chmod(0o755)

    with ScriptedMessagesServer([reply(text_block("Never."))]) as server:
        run = agent_run(sbx, server, "--session", prompt="start")

    assert_refused(run, server, f"chmod 700 {store}")
    assert os.listdir(store) == []


def test_a_symlinked_transcript_is_refused_and_its_target_left_alone(
    sbx: Sandbx, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    target = write_transcript(elsewhere, "zzzzzzzz", _lines(one_turn()))
    store = store_dir(sbx)
    store.mkdir(parents=True, mode=0o700)
    link = store / f"{SESSION_ID}.jsonl"
    link.symlink_to(target)
    before = target.read_bytes()

    run, server = _resume(sbx)

    assert_refused(run, server, str(link), "symlink")
    assert target.read_bytes() == before
    assert link.is_symlink()


def test_a_symlinked_store_is_refused(sbx: Sandbx, tmp_path: Path) -> None:
    real = tmp_path / "real-store"
    path = write_transcript(real, SESSION_ID, _lines(one_turn()))
    store = store_dir(sbx)
    store.parent.mkdir(parents=True, mode=0o700)
    store.symlink_to(real)
    before = path.read_bytes()

    run, server = _resume(sbx)

    assert_refused(run, server, str(store), "symlink")
    assert path.read_bytes() == before


def test_a_fifo_in_place_of_a_transcript_is_refused_without_opening_it(sbx: Sandbx) -> None:
    store = store_dir(sbx)
    store.mkdir(parents=True, mode=0o700)
    os.mkfifo(store / f"{SESSION_ID}.jsonl", 0o600)

    run, server = _resume(sbx)  # opening the FIFO would block until the timeout

    assert_refused(run, server, "is not a regular file")


@pytest.mark.skipif(not running_as_root(), reason="only root can give a file to someone else")
@pytest.mark.parametrize("which", ["transcript", "store"])
def test_a_transcript_or_store_someone_else_owns_is_refused(sbx: Sandbx, which: str) -> None:
    path = write_transcript(store_dir(sbx), SESSION_ID, _lines(one_turn()))
    owned = path if which == "transcript" else path.parent
    os.chown(owned, 65534, 65534)

    _refused_unchanged(sbx, path, str(owned), "belongs to uid 65534")


# --- what the transcript holds -----------------------------------------------------------


def _four_lines() -> list[bytes]:
    """A header and two turns: four whole lines, the last a turn record."""
    return _lines(
        [
            header(),
            round_record(1, {"role": "user", "content": "one"}, answer("One.")),
            round_record(2, {"role": "user", "content": "two"}, answer("Two.")),
            turn_record(2),
        ]
    )


@pytest.mark.parametrize(
    ("number", "damage"),
    [
        (2, b'{"type":"round","turn":1,"messages":[{"ro\n'),
        (3, b"not json at all\n"),
        (2, b"[1, 2, 3]\n"),
        (3, b"\n"),
        (2, b'{"type":"round","turn":1,"messages":[],"x":"\xff\xfe"}\n'),
    ],
    ids=["torn", "not-json", "not-an-object", "blank", "not-utf8"],
)
def test_a_damaged_line_in_the_middle_is_refused_with_its_number(
    sbx: Sandbx, number: int, damage: bytes
) -> None:
    lines = _four_lines()
    lines[number - 1] = damage
    path = write_transcript(store_dir(sbx), SESSION_ID, lines)

    _refused_unchanged(sbx, path, f"session {SESSION_ID} is damaged at line {number}")
    shown = run_sandbx(sbx, "sessions", "show", SESSION_ID)
    assert shown.returncode == 1
    assert f"damaged at line {number}" in shown.stderr


def test_a_transcript_of_a_future_format_is_refused(sbx: Sandbx) -> None:
    records = one_turn()
    records[0] = header(version=2)
    path = write_transcript(store_dir(sbx), SESSION_ID, _lines(records))

    _refused_unchanged(sbx, path, "has format 2", "reads format 1")


def test_a_transcript_without_a_header_is_refused(sbx: Sandbx) -> None:
    path = write_transcript(store_dir(sbx), SESSION_ID, _lines(one_turn()[1:]))

    _refused_unchanged(sbx, path, "has no header")


@pytest.mark.parametrize(
    "messages",
    [
        [answer("I speak first.")],
        [{"role": "user", "content": "one"}, answer("One."), answer("One again.")],
    ],
    ids=["opens-with-the-assistant", "two-assistants-in-a-row"],
)
def test_a_history_that_does_not_alternate_is_refused(
    sbx: Sandbx, messages: list[dict[str, object]]
) -> None:
    records = [header(), round_record(1, *messages), turn_record(1)]
    path = write_transcript(store_dir(sbx), SESSION_ID, _lines(records))

    _refused_unchanged(sbx, path, "does not alternate")


def test_a_history_ending_on_an_unanswered_tool_call_is_refused(sbx: Sandbx) -> None:
    call = {"type": "tool_use", "id": "toolu_01abc", "name": "ls", "input": {"path": "."}}
    records = [
        header(),
        round_record(
            1, {"role": "user", "content": "one"}, {"role": "assistant", "content": [call]}
        ),
    ]
    path = write_transcript(store_dir(sbx), SESSION_ID, _lines(records))

    _refused_unchanged(sbx, path, "ends on a tool call that was never answered")
