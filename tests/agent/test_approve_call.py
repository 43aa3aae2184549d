"""``--approve call`` driven through a real pseudo-terminal: sandbx asks on /dev/tty before
every write and every command, a person answers y, n or a, and the terminal can go away.

The pty is the controlling terminal of a fresh session, so /dev/tty is the pty and
nothing typed on the terminal running the suite can answer a question here.
"""

from __future__ import annotations

import pytest

from sandbx.testing import ScriptedMessagesServer, reply, text_block, tool_use_block
from tests.agent.agent_support import (
    on_a_terminal,
    records_of,
    tool_result,
    without_a_terminal,
)
from tests.support import Sandbx

pytestmark = pytest.mark.boundary

QUESTION_END = "? [y] this call, [n] refuse, [a] every "


def _question(tool: str, shown: str) -> str:
    return f"sandbx: run {tool} {shown}{QUESTION_END}{tool} call: "


def test_y_approves_one_call_and_the_next_write_is_asked_again_and_n_refuses_it(
    sbx: Sandbx,
) -> None:
    root = sbx.workdir.resolve()
    script = [
        reply(
            text_block("Writing two files."),
            tool_use_block("read", {"path": "missing.txt"}),
            tool_use_block("write", {"path": f"{root}/first.txt", "content": "one\n"}),
        ),
        reply(tool_use_block("write", {"path": f"{root}/second.txt", "content": "two\n"})),
        reply(text_block("One written, one refused.")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(sbx, server, "--allow-tool", "write", "--approve", "call") as terminal,
    ):
        terminal.answer("y")
        terminal.answer("n")
        run = terminal.finish()

    assert run.returncode == 0, run.stderr
    assert run.stdout == "Writing two files.\nOne written, one refused.\n"
    assert (root / "first.txt").read_text() == "one\n"
    assert not (root / "second.txt").exists()
    # Read-only calls are not asked about; each write is.
    assert terminal.questions() == [
        _question("write", f'{{"path": "{root}/first.txt", "content": "one\\n"}}') + "y",
        _question("write", f'{{"path": "{root}/second.txt", "content": "two\\n"}}') + "n",
    ]
    # The per-call lines are on the terminal, beside the questions, not on stderr.
    assert f"sandbx: write {root}/first.txt — ran" in terminal.terminal.splitlines()
    assert f"sandbx: write {root}/second.txt — refused: refused on the terminal" in (
        terminal.terminal.splitlines()
    )
    assert f"sandbx: read {root}/missing.txt — failed: no such file or directory" in (
        terminal.terminal.splitlines()
    )
    assert [line for line in run.stderr.splitlines() if line.startswith("sandbx: ")] == [
        "sandbx: approved tools: find, grep, ls, read, write"
    ]
    # The model is told which call ran and which was refused.
    assert tool_result(server, 0, 2)["is_error"] is False
    refused = tool_result(server, 1, 0)
    assert refused["is_error"] is True
    assert refused["content"] == "refused: refused on the terminal"
    assert len(server.requests) == 3
    assert [(r["decision"], r["tool"]) for r in run.records] == [
        ("absent", "read"),
        ("allowed", "write"),
    ]


def test_a_approves_every_later_call_to_that_tool_and_no_other(sbx: Sandbx) -> None:
    root = sbx.workdir.resolve()
    script = [
        reply(
            tool_use_block("bash", {"command": "echo one > one.txt"}),
            tool_use_block("bash", {"command": "echo two > two.txt"}),
        ),
        reply(
            tool_use_block("bash", {"command": "echo three > three.txt"}),
            tool_use_block("write", {"path": "four.txt", "content": "4"}),
        ),
        reply(text_block("Done.")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(
            sbx, server, "--allow-tool", "bash", "--allow-tool", "write", "--approve", "call"
        ) as terminal,
    ):
        terminal.answer("a")
        terminal.answer("n")
        run = terminal.finish()

    assert run.returncode == 0, run.stderr
    assert terminal.questions() == [
        _question("bash", '{"command": "echo one > one.txt"}') + "a",
        _question("write", '{"path": "four.txt", "content": "4"}') + "n",
    ]
    for name in ("one", "two", "three"):
        assert (root / f"{name}.txt").read_text() == f"{name}\n"
    assert not (root / "four.txt").exists()
    assert [r["decision"] for r in records_of(run, "exited")] == ["exited"] * 3
    assert all(r["session"] == "-" for r in run.records)


def test_typeahead_is_discarded_before_each_question(sbx: Sandbx) -> None:
    script = [
        reply(tool_use_block("write", {"path": "typed.txt", "content": "x"})),
        reply(text_block("Refused, as asked.")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(sbx, server, "--allow-tool", "write", "--approve", "call") as terminal,
    ):
        # Typed before any question exists: it must answer none.
        terminal.type_ahead("yyy\na\n")
        terminal.answer("n")
        run = terminal.finish()

    assert run.returncode == 0, run.stderr
    assert not (sbx.workdir / "typed.txt").exists()
    assert tool_result(server, 0, 0)["content"] == "refused: refused on the terminal"


def test_keys_other_than_y_n_or_a_are_ignored_until_one_comes(sbx: Sandbx) -> None:
    script = [
        reply(tool_use_block("write", {"path": "asked.txt", "content": "x"})),
        reply(text_block("Done.")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(sbx, server, "--allow-tool", "write", "--approve", "call") as terminal,
    ):
        terminal.answer("q7 Y")
        run = terminal.finish()

    assert run.returncode == 0, run.stderr
    assert (sbx.workdir / "asked.txt").read_text() == "x"


def test_a_tool_not_approved_is_refused_without_asking(sbx: Sandbx) -> None:
    script = [
        reply(tool_use_block("bash", {"command": "touch nope.txt"})),
        reply(text_block("Done.")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(sbx, server, "--approve", "call") as terminal,
    ):
        run = terminal.finish()

    assert run.returncode == 0, run.stderr
    assert terminal.questions() == []
    assert not (sbx.workdir / "nope.txt").exists()
    assert tool_result(server, 0, 0)["content"] == (
        "refused: the `bash` tool is not approved for this run: pass --allow-tool bash"
    )
    assert run.records == []


def test_the_question_shows_arguments_defused_and_cut_at_512_characters(sbx: Sandbx) -> None:
    hostile = "A\u202eB\u200bC\u2066D\x1b[2J\x07E" + "x" * 1000
    script = [
        reply(tool_use_block("write", {"path": "shown.txt", "content": hostile})),
        reply(text_block("Done.")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(sbx, server, "--allow-tool", "write", "--approve", "call") as terminal,
    ):
        terminal.answer("n")
        run = terminal.finish()

    assert run.returncode == 0, run.stderr
    (question,) = terminal.questions()
    shown = question.removeprefix("sandbx: run write ").split(QUESTION_END)[0]
    assert shown.startswith('{"path": "shown.txt", "content": "A\ufffdB\ufffdC\ufffdD')
    for invisible in ("\u202e", "\u200b", "\u2066", "\x1b", "\x07"):
        assert invisible not in terminal.terminal
    body, marker = shown.split("… [")
    assert len(body) == 512
    assert marker.endswith(" more characters]")
    assert not (sbx.workdir / "shown.txt").exists()


def test_the_terminal_going_away_refuses_that_call_and_the_rest_and_exits_3(
    sbx: Sandbx,
) -> None:
    root = sbx.workdir.resolve()
    script = [
        reply(
            text_block("Writing."),
            tool_use_block("write", {"path": "never.txt", "content": "x"}),
            tool_use_block("bash", {"command": "touch never-either.txt"}),
        ),
        reply(text_block("never asked for")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(
            sbx,
            server,
            "--allow-tool",
            "--approve",
            "call",
            prompt="write the file",
            behind_a_leader=True,
        ) as terminal,
    ):
        terminal.wait_for(QUESTION_END)
        terminal.hang_up()
        run = terminal.finish()

    assert run.returncode == 3, run.stderr
    assert run.stdout == "Writing.\n"
    assert not (root / "never.txt").exists()
    assert not (root / "never-either.txt").exists()
    assert run.records == []
    # No further request: the model never hears of the refused calls.
    assert len(server.requests) == 1
    assert server.remaining == 1
    assert "Traceback" not in run.stderr
    assert "internal error" not in run.stderr
    assert "the terminal went away" in run.stderr


def test_a_hangup_of_the_terminal_sandbx_controls_also_exits_3(sbx: Sandbx) -> None:
    # As when the window closes: the kernel signals the session's controlling process.
    script = [
        reply(
            text_block("Writing."), tool_use_block("write", {"path": "never.txt", "content": "x"})
        ),
        reply(text_block("never asked for")),
    ]
    with (
        ScriptedMessagesServer(script) as server,
        on_a_terminal(sbx, server, "--allow-tool", "write", "--approve", "call") as terminal,
    ):
        terminal.wait_for(QUESTION_END)
        terminal.hang_up()
        run = terminal.finish()

    assert run.returncode == 3, (run.returncode, run.stderr)
    assert run.stdout == "Writing.\n"
    assert not (sbx.workdir / "never.txt").exists()
    assert len(server.requests) == 1


def test_approve_call_with_no_terminal_refuses_the_run_before_asking_anything(
    sbx: Sandbx,
) -> None:
    with ScriptedMessagesServer([reply(text_block("unused"))]) as server:
        run = without_a_terminal(sbx, server, "--allow-tool", "write", "--approve", "call")
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert run.records == []
    (line,) = run.stderr.splitlines()
    assert line.startswith("sandbx: --approve call needs a terminal to ask on, and there is none")
    assert "--allow-tool" in line
    assert server.requests == ()


def test_approve_run_needs_no_terminal(sbx: Sandbx) -> None:
    script = [
        reply(tool_use_block("write", {"path": "unattended.txt", "content": "x"})),
        reply(text_block("Done.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = without_a_terminal(sbx, server, "--allow-tool", "write", "--approve", "run")
    assert run.returncode == 0, run.stderr
    assert (sbx.workdir / "unattended.txt").read_text() == "x"
    assert run.records[0]["decision"] == "allowed"
