"""``sandbx agent-run --session [ID]``: a conversation kept as an append-only JSONL transcript.

Bare ``--session`` starts one and says its id; ``--session ID`` resumes it, and the
model is sent every earlier turn exactly as it was. Each finished round is one
record, fsynced, so a ``kill -9`` at any moment loses at most the round in flight;
a torn last line is left out with a note. ``--compact-at`` leaves the oldest whole
turns out of what is sent, and says so. The real CLI runs as a process, its tools in
the real boundary, its model a scripted Messages server on loopback.
"""

from __future__ import annotations

import calendar
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from sandbx.testing import (
    ScriptedMessagesServer,
    Usage,
    reply,
    text_block,
    thinking_block,
    tool_use_block,
)
from tests.session.session_support import (
    ENV_KEY,
    agent_run,
    answer,
    mode_of,
    records_in,
    run_sandbx,
    sent_messages,
    started_id,
    store_dir,
)
from tests.support import SANDBX, Run, Sandbx, parse_records

pytestmark = pytest.mark.boundary

CREATED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


def _readme(sbx: Sandbx) -> None:
    (sbx.workdir / "README.md").write_text("# demo\nA tiny demo.\n")


def _prompt(text: str) -> dict[str, object]:
    return {"role": "user", "content": text}


def _ok(run: Run) -> Run:
    assert run.returncode == 0, run.stderr
    assert "Traceback" not in run.stderr
    return run


def _start(sbx: Sandbx, prompt: str, text: str, *flags: str, **env: str) -> tuple[str, Path]:
    """A session of one turn answered with ``text``; its id and transcript."""
    with ScriptedMessagesServer([reply(text_block(text))]) as server:
        run = _ok(agent_run(sbx, server, "--session", *flags, prompt=prompt, **env))
    session_id = started_id(run)
    return session_id, store_dir(sbx) / f"{session_id}.jsonl"


def _resume(
    sbx: Sandbx, session_id: str, prompt: str, *script_texts: str, flags: tuple[str, ...] = ()
) -> tuple[Run, ScriptedMessagesServer]:
    script = [reply(text_block(text)) for text in script_texts]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--session", session_id, *flags, prompt=prompt)
    return run, server


# --- start, resume, continue ----------------------------------------------------------


def test_a_session_is_started_resumed_and_continued_and_each_request_holds_every_earlier_turn(
    sbx: Sandbx,
) -> None:
    _readme(sbx)
    first_script = [
        reply(
            text_block("Let me look."),
            tool_use_block("ls", {"path": "."}),
            usage=Usage(input_tokens=120, output_tokens=7),
        ),
        reply(text_block("It holds a README."), usage=Usage(input_tokens=180, output_tokens=9)),
    ]
    with ScriptedMessagesServer(first_script) as first:
        started = _ok(agent_run(sbx, first, "--session", prompt="what is here?"))
    session_id = started_id(started)
    path = store_dir(sbx) / f"{session_id}.jsonl"
    after_first = path.read_bytes()
    turn_one = [*sent_messages(first, 1), answer("It holds a README.")]

    resumed, second = _resume(sbx, session_id, "and what is in it?", "A title and a line.")
    after_second = path.read_bytes()
    continued, third = _resume(sbx, session_id, "thanks; anything else?", "Nothing else.")

    assert started.stdout == "Let me look.\nIt holds a README.\n"
    assert started.messages[0] == (
        f"sandbx: session {session_id} started; resume it with --session {session_id}"
    )
    assert turn_one[0] == _prompt("what is here?")
    _ok(resumed)
    assert resumed.stdout == "A title and a line.\n"
    assert not any("started" in line for line in resumed.messages), resumed.stderr
    assert sent_messages(second, 0) == [*turn_one, _prompt("and what is in it?")]
    _ok(continued)
    assert sent_messages(third, 0) == [
        *turn_one,
        _prompt("and what is in it?"),
        answer("A title and a line."),
        _prompt("thanks; anything else?"),
    ]
    # Append-only: each run only added lines after what was there.
    final = path.read_bytes()
    assert after_second.startswith(after_first)
    assert final.startswith(after_second)
    records = records_in(path)
    assert [(r["type"], r.get("turn")) for r in records] == [
        ("header", None),
        ("round", 1),
        ("round", 1),
        ("turn", 1),
        ("round", 2),
        ("turn", 2),
        ("round", 3),
        ("turn", 3),
    ]
    assert records[1]["messages"] == sent_messages(first, 1)
    assert records[2]["messages"] == [answer("It holds a README.")]
    assert records[3] == {
        "type": "turn",
        "turn": 1,
        "outcome": "answered",
        "rounds": 1,
        "usage": {"input_tokens": 180, "output_tokens": 16},
        "withheld_turns": 0,
    }
    assert records[4]["messages"] == [_prompt("and what is in it?"), answer("A title and a line.")]


def test_the_transcript_is_0600_in_a_0700_store_under_home_whatever_the_umask(
    sbx: Sandbx,
) -> None:
    with ScriptedMessagesServer([reply(text_block("Kept."))]) as server:
        run = _ok(
            run_sandbx(
                sbx,
                "agent-run",
                "--session",
                "--",
                "keep this",
                umask=0o000,
                ANTHROPIC_API_KEY=ENV_KEY,
                ANTHROPIC_BASE_URL=server.url,
            )
        )
    session_id = started_id(run)

    store = store_dir(sbx)
    path = store / f"{session_id}.jsonl"
    assert os.listdir(store) == [f"{session_id}.jsonl"]
    assert mode_of(path) == 0o600
    assert mode_of(store) == 0o700
    assert path.stat().st_uid == os.geteuid()


def test_the_store_is_under_xdg_state_home_when_it_is_set(sbx: Sandbx, tmp_path: Path) -> None:
    state = tmp_path / "state"

    session_id, _ = _start(sbx, "keep this", "Kept.", XDG_STATE_HOME=str(state))

    store = state / "sandbx" / "sessions"
    assert os.listdir(store) == [f"{session_id}.jsonl"]
    assert mode_of(store) == 0o700
    assert mode_of(store / f"{session_id}.jsonl") == 0o600
    assert not (sbx.home / ".local").exists()


def test_the_header_records_the_format_the_creation_time_and_the_model(sbx: Sandbx) -> None:
    before = time.time()

    _session_id, path = _start(sbx, "hello", "Hi.", "--model", "claude-test-model")

    header = records_in(path)[0]
    assert set(header) == {"type", "format", "created", "model"}
    assert header["type"] == "header"
    assert header["format"] == 1
    assert header["model"] == "claude-test-model"
    created = str(header["created"])
    assert CREATED.match(created), created
    stamp = calendar.timegm(time.strptime(created, "%Y-%m-%dT%H:%M:%SZ"))
    assert before - 2 <= stamp <= time.time() + 2


def test_thinking_is_replayed_within_a_turn_but_never_stored_or_resent(sbx: Sandbx) -> None:
    _readme(sbx)
    script = [
        reply(
            thinking_block("secret-reasoning-9e1f", "signature-0b7d"),
            tool_use_block("ls", {"path": "."}),
        ),
        reply(thinking_block("more-reasoning-c4a2", "signature-81fe"), text_block("Done.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = _ok(agent_run(sbx, server, "--session", "--show-thinking", prompt="think"))
    session_id = started_id(run)
    path = store_dir(sbx) / f"{session_id}.jsonl"

    resumed, later = _resume(sbx, session_id, "again", "Again.")

    assert "secret-reasoning-9e1f" in json.dumps(sent_messages(server, 1))
    data = path.read_bytes()
    for marker in (b"reasoning", b"signature", b'"thinking"'):
        assert marker not in data
    _ok(resumed)
    sent = json.dumps(sent_messages(later, 0))
    assert "reasoning" not in sent
    assert "signature" not in sent


def test_a_turn_cut_while_the_model_was_only_thinking_resumes_as_a_request_the_api_accepts(
    sbx: Sandbx,
) -> None:
    cut = reply(thinking_block("still-thinking-5d2e", "signature-77aa"), stop_reason="max_tokens")
    with ScriptedMessagesServer([cut]) as server:
        run = agent_run(sbx, server, "--session", "--show-thinking", prompt="think hard")
    assert run.returncode == 2, run.stderr
    session_id = started_id(run)

    resumed, later = _resume(sbx, session_id, "go on", "Went on.")

    # The scripted server refuses an empty message with 400, as the API does.
    _ok(resumed)
    sent = sent_messages(later, 0)
    assert sent[0] == _prompt("think hard")
    assert sent[-1] == _prompt("go on")
    assert all(message["content"] for message in sent), sent


# --- the audit trail ----------------------------------------------------------------


def test_every_audit_record_of_a_session_run_names_the_session(sbx: Sandbx) -> None:
    _readme(sbx)
    outside = sbx.workdir.parent / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("nobody may read this\n")
    calls = [
        tool_use_block("ls", {"path": "."}),
        tool_use_block("read", {"path": str(outside / "secret.txt")}),
        tool_use_block("bash", {"command": "echo hi"}),
    ]
    with ScriptedMessagesServer([reply(*calls), reply(text_block("Done."))]) as server:
        run = _ok(agent_run(sbx, server, "--session", "--allow-tool", "bash", prompt="look around"))
    session_id = started_id(run)
    with ScriptedMessagesServer([reply(*calls), reply(text_block("Again."))]) as server:
        resumed = _ok(
            agent_run(
                sbx, server, "--session", session_id, "--allow-tool", "bash", prompt="once more"
            )
        )

    for each in (run, resumed):
        assert sorted(str(record["decision"]) for record in each.records) == [
            "allowed",
            "denied",
            "exited",
            "spawned",
        ], each.stderr
        assert [record["session"] for record in each.records] == [session_id] * 4


# --- kill -9 mid-turn -----------------------------------------------------------------


def _crash_mid_turn(sbx: Sandbx, tmp_path: Path) -> tuple[str, list[dict[str, object]]]:
    """Start a session whose first round (ls) finishes and whose second (bash sleep) is
    running when sandbx and its process group are killed with SIGKILL.

    Returns the session id and the messages of the finished round, as the model was
    sent them in the request that followed it.
    """
    _readme(sbx)
    script = [
        reply(tool_use_block("ls", {"path": "."})),
        reply(tool_use_block("bash", {"command": "sleep 5"})),
        reply(text_block("Never sent.")),
    ]
    stderr_path = tmp_path / "crashed.stderr"
    env = {**sbx.env, "ANTHROPIC_API_KEY": ENV_KEY}
    with ScriptedMessagesServer(script) as server, stderr_path.open("wb") as stderr:
        process = subprocess.Popen(
            [*SANDBX, "agent-run", "--session", "--allow-tool", "bash", "--", "start it"],
            cwd=sbx.workdir,
            env={**env, "ANTHROPIC_BASE_URL": server.url},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
        try:
            deadline = time.monotonic() + 30
            # The second round's command is running: the first round is over.
            while 'decision="spawned"' not in stderr_path.read_text():
                assert process.poll() is None, stderr_path.read_text()
                assert time.monotonic() < deadline, stderr_path.read_text()
                time.sleep(0.05)
            time.sleep(0.3)
            assert process.poll() is None, "the turn ended before it could be killed"
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=10)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)
        finished_round = sent_messages(server, 1)
        assert len(server.requests) == 2
    assert process.returncode == -signal.SIGKILL
    text = stderr_path.read_text()
    (started,) = [line for line in text.splitlines() if " started; resume it with " in line]
    session_id = started.split()[2]
    spawned = [r for r in parse_records(text) if r["decision"] == "spawned"]
    assert [r["session"] for r in spawned] == [session_id]
    return session_id, finished_round


def _merged_with(messages: list[dict[str, object]], prompt: str) -> list[dict[str, object]]:
    """``messages`` ending on tool results, then ``prompt``: one user message, as sent."""
    last = messages[-1]
    assert last["role"] == "user"
    content = last["content"]
    assert isinstance(content, list)
    return [
        *messages[:-1],
        {"role": "user", "content": [*content, {"type": "text", "text": prompt}]},
    ]


def test_a_kill_9_mid_turn_leaves_a_transcript_that_resumes_with_exactly_the_finished_rounds(
    sbx: Sandbx, tmp_path: Path
) -> None:
    session_id, finished_round = _crash_mid_turn(sbx, tmp_path)
    path = store_dir(sbx) / f"{session_id}.jsonl"
    records = records_in(path)

    resumed, server = _resume(sbx, session_id, "carry on", "Resumed.")

    assert [(r["type"], r.get("turn")) for r in records] == [("header", None), ("round", 1)]
    assert records[1]["messages"] == finished_round
    assert [m["role"] for m in finished_round] == ["user", "assistant", "user"]
    _ok(resumed)
    assert resumed.stdout == "Resumed.\n"
    assert not [line for line in resumed.messages if "torn" in line]
    assert sent_messages(server, 0) == _merged_with(finished_round, "carry on")


def test_a_session_resumed_after_a_kill_9_mid_turn_can_be_resumed_again(
    sbx: Sandbx, tmp_path: Path
) -> None:
    session_id, finished_round = _crash_mid_turn(sbx, tmp_path)
    _ok(_resume(sbx, session_id, "carry on", "Resumed.")[0])

    again, server = _resume(sbx, session_id, "and again", "Again.")

    _ok(again)
    assert sent_messages(server, 0) == [
        *_merged_with(finished_round, "carry on"),
        answer("Resumed."),
        _prompt("and again"),
    ]


def test_a_session_whose_turn_stopped_at_max_rounds_can_be_resumed_twice(sbx: Sandbx) -> None:
    _readme(sbx)
    with ScriptedMessagesServer([reply(tool_use_block("ls", {"path": "."}))]) as server:
        run = agent_run(
            sbx, server, "--session", "--max-rounds", "1", "--no-wrap-up", prompt="look"
        )
    assert run.returncode == 2, run.stderr
    session_id = started_id(run)
    resumed, first = _resume(sbx, session_id, "carry on", "Resumed.")
    _ok(resumed)

    again, second = _resume(sbx, session_id, "and again", "Again.")

    _ok(again)
    assert sent_messages(second, 0) == [
        *sent_messages(first, 0),
        answer("Resumed."),
        _prompt("and again"),
    ]


# --- a torn last line -----------------------------------------------------------------

TORN = b'{"type":"round","turn":2,"messages":[{"role":"user","content":"cut sh'


def test_a_torn_last_line_is_left_out_with_a_note_and_nothing_before_it_is_rewritten(
    sbx: Sandbx,
) -> None:
    session_id, path = _start(sbx, "first", "One.")
    with path.open("ab") as transcript:
        transcript.write(TORN)
    before = path.read_bytes()

    resumed, server = _resume(sbx, session_id, "second", "Two.")

    _ok(resumed)
    assert (
        f"sandbx: session {session_id}: line 4 was torn (a crash while writing it) "
        "and is left out" in resumed.messages
    )
    assert sent_messages(server, 0) == [_prompt("first"), answer("One."), _prompt("second")]
    # Every whole line before the torn one stays as it was; the torn fragment, already
    # lost in the crash, is cut off so the next record starts a line of its own.
    kept = before[: -len(TORN)]
    after = path.read_bytes()
    assert after.startswith(kept)
    assert TORN not in after


def test_a_session_resumed_past_a_torn_last_line_keeps_the_new_turn_and_resumes_again(
    sbx: Sandbx,
) -> None:
    session_id, path = _start(sbx, "first", "One.")
    with path.open("ab") as transcript:
        transcript.write(TORN)
    _ok(_resume(sbx, session_id, "second", "Two.")[0])

    again, server = _resume(sbx, session_id, "third", "Three.")

    _ok(again)
    assert sent_messages(server, 0) == [
        _prompt("first"),
        answer("One."),
        _prompt("second"),
        answer("Two."),
        _prompt("third"),
    ]


# --- --compact-at ---------------------------------------------------------------------


def _three_turns_of_growing_size(sbx: Sandbx) -> tuple[str, list[dict[str, object]]]:
    """A session of two turns, the last request of which reported 6000 input tokens.

    Returns its id and the second turn's messages as stored.
    """
    _readme(sbx)
    with ScriptedMessagesServer(
        [reply(text_block("One."), usage=Usage(input_tokens=10, output_tokens=2))]
    ) as server:
        session_id = started_id(_ok(agent_run(sbx, server, "--session", prompt="one")))
    script = [
        reply(tool_use_block("ls", {"path": "."}), usage=Usage(input_tokens=5000, output_tokens=5)),
        reply(text_block("Two."), usage=Usage(input_tokens=6000, output_tokens=2)),
    ]
    with ScriptedMessagesServer(script) as server:
        _ok(agent_run(sbx, server, "--session", session_id, prompt="two"))
        turn_two = [*sent_messages(server, 1)[2:], answer("Two.")]
    assert turn_two[0] == _prompt("two")
    return session_id, turn_two


def test_compact_at_leaves_out_the_oldest_whole_turns_records_them_and_says_so(
    sbx: Sandbx,
) -> None:
    session_id, turn_two = _three_turns_of_growing_size(sbx)
    path = store_dir(sbx) / f"{session_id}.jsonl"
    script = [
        reply(tool_use_block("ls", {"path": "."}), usage=Usage(input_tokens=7000, output_tokens=5)),
        reply(text_block("Three."), usage=Usage(input_tokens=300, output_tokens=2)),
    ]

    with ScriptedMessagesServer(script) as server:
        run = agent_run(
            sbx, server, "--session", session_id, "--compact-at", "1000", prompt="three"
        )

    # The server validates each request as the API does: both were answered.
    _ok(run)
    assert run.stdout == "Three.\n"
    first, second = sent_messages(server, 0), sent_messages(server, 1)
    # The first request left turn one out: it opens with turn two's own prompt.
    assert first == [*turn_two, _prompt("three")]
    # That request took 7000 tokens, so the next left turn two out as well.
    assert second[0] == _prompt("three")
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert (
        "sandbx: the last request took 6000 tokens, past --compact-at 1000: "
        "the oldest 1 turn(s) are no longer sent"
    ) in run.messages
    assert (
        "sandbx: the last request took 7000 tokens, past --compact-at 1000: "
        "the oldest 2 turn(s) are no longer sent"
    ) in run.messages
    assert (
        "sandbx: --compact-at left the oldest 2 turn(s) out of what was sent; "
        "they stay in the transcript"
    ) in run.messages
    turn_records = [r for r in records_in(path) if r["type"] == "turn"]
    assert [(r["turn"], r["withheld_turns"]) for r in turn_records] == [(1, 0), (2, 0), (3, 2)]


def test_compact_at_below_what_the_last_request_took_changes_nothing(sbx: Sandbx) -> None:
    session_id, _turn_two = _three_turns_of_growing_size(sbx)
    path = store_dir(sbx) / f"{session_id}.jsonl"

    with ScriptedMessagesServer([reply(text_block("Three."))]) as server:
        run = agent_run(sbx, server, "--session", session_id, "--compact-at", "6000", prompt="3")

    _ok(run)
    assert sent_messages(server, 0)[:2] == [_prompt("one"), answer("One.")]
    assert not [line for line in run.messages if "compact-at" in line]
    assert records_in(path)[-1]["withheld_turns"] == 0


def test_turns_left_out_by_compact_at_stay_in_the_transcript_and_are_sent_without_it(
    sbx: Sandbx,
) -> None:
    session_id, turn_two = _three_turns_of_growing_size(sbx)
    with ScriptedMessagesServer([reply(text_block("Three."))]) as server:
        _ok(agent_run(sbx, server, "--session", session_id, "--compact-at", "1000", prompt="3"))

    with ScriptedMessagesServer([reply(text_block("Four."))]) as server:
        run = _ok(agent_run(sbx, server, "--session", session_id, prompt="4"))

    assert sent_messages(server, 0) == [
        _prompt("one"),
        answer("One."),
        *turn_two,
        _prompt("3"),
        answer("Three."),
        _prompt("4"),
    ]
    assert not [line for line in run.messages if "compact-at" in line]


@pytest.mark.parametrize(
    "flags",
    [
        ["--compact-at", "1000"],
        ["--session", "--compact-at", "0"],
        ["--session", "--compact-at", "many"],
        ["--session", "--compact-at", "-5"],
    ],
    ids=["without-session", "zero", "not-a-number", "negative"],
)
def test_a_compact_at_sandbx_cannot_use_exits_64_and_asks_nothing(
    sbx: Sandbx, flags: list[str]
) -> None:
    with ScriptedMessagesServer([reply(text_block("Never."))]) as server:
        run = agent_run(sbx, server, *flags, prompt="hello")

    assert run.returncode == 64, run.stderr
    assert "--compact-at" in run.stderr
    assert server.requests == ()
    assert not store_dir(sbx).exists()
