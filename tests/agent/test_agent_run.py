"""``sandbx agent-run`` end to end: the real CLI as a process, its tools in the real
boundary, its model a scripted Messages server on loopback.

Each test asserts what a person sees (stdout, sandbx's stderr lines, the exit code),
what the audit trail holds, and exactly what the model was sent.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from sandbx.testing import (
    ContentBlock,
    ScriptedMessagesServer,
    ScriptEntry,
    StopReason,
    connection_cut,
    error_reply,
    reply,
    scripted_tool_use_id,
    stream_error,
    text_block,
    thinking_block,
    tool_use_block,
)
from tests.agent.agent_support import (
    ALL_TOOLS,
    DEFAULT_TOOLS,
    KEY,
    PROMPT,
    agent_run,
    assert_key_never_shown,
    bodies,
    call_lines,
    messages_of,
    records_of,
    tool_result,
)
from tests.support import Run, Sandbx

pytestmark = pytest.mark.boundary

TOOL_ORDER = ["read", "write", "edit", "ls", "grep", "find", "bash"]
RETRY_HINT = " — check the key, the model and ANTHROPIC_BASE_URL"


def _project(sbx: Sandbx) -> Path:
    root = sbx.workdir.resolve()
    (root / "README.md").write_text("# demo\nA tiny demo.\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text(
        "def main():\n    # TODO: greet the user\n    return None\n"
    )
    (root / "src" / "util.py").write_text("def helper():\n    return 1  # TODO: tidy\n")
    return root


def _answered(text: str = "The answer.") -> ScriptedMessagesServer:
    return ScriptedMessagesServer([reply(text_block(text))])


def _error_line(run: Run) -> str:
    """The one line a failed run ends with: the last on stderr, and the only one of its kind."""
    last = run.stderr.splitlines()[-1]
    assert last.startswith("sandbx: "), run.stderr
    assert run.stderr.endswith(last + "\n")
    failures = [
        line for line in run.messages if line.startswith("sandbx: the model's API answered")
    ]
    assert failures in ([], [last]), run.stderr
    assert "Traceback" not in run.stderr
    return last


# --- one turn, several rounds ---------------------------------------------------------


def test_a_turn_lists_greps_reads_and_edits_a_project_and_the_file_changes_once(
    sbx: Sandbx,
) -> None:
    root = _project(sbx)
    app = root / "src" / "app.py"
    util_before = (root / "src" / "util.py").read_bytes()
    script = [
        reply(text_block("Let me look around."), tool_use_block("ls", {"path": "."})),
        reply(tool_use_block("grep", {"path": "src", "pattern": "TODO: greet"})),
        reply(tool_use_block("read", {"path": "src/app.py"})),
        reply(
            tool_use_block(
                "edit",
                {
                    "path": "src/app.py",
                    "old": "    # TODO: greet the user\n    return None\n",
                    "new": '    print("hello")\n',
                },
            )
        ),
        reply(text_block("I replaced the TODO in src/app.py with a greeting.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--allow-tool", "edit")

    assert run.returncode == 0, run.stderr
    assert run.stdout == "Let me look around.\nI replaced the TODO in src/app.py with a greeting.\n"
    assert run.messages == [
        "sandbx: approved tools: edit, find, grep, ls, read",
        f"sandbx: ls {root} — ran",
        f"sandbx: grep {root}/src — ran",
        f"sandbx: read {app} — ran",
        f"sandbx: edit {app} — ran",
    ]
    assert [
        (r["decision"], r["tool"], r["path"], r["access"], r["session"]) for r in run.records
    ] == [
        ("allowed", "ls", str(root), "read", "-"),
        ("allowed", "grep", f"{root}/src", "read", "-"),
        ("allowed", "read", str(app), "read", "-"),
        ("allowed", "edit", str(app), "write", "-"),
    ]

    # What the model was told, call by call.
    assert tool_result(server, 0, 1) == {
        "type": "tool_result",
        "tool_use_id": scripted_tool_use_id(0, 1),
        "content": "README.md\nsrc/",
        "is_error": False,
    }
    assert tool_result(server, 1, 0)["content"] == f"{app}:2:     # TODO: greet the user"
    assert tool_result(server, 2, 0)["content"] == (
        "def main():\n    # TODO: greet the user\n    return None\n"
    )
    assert tool_result(server, 3, 0) == {
        "type": "tool_result",
        "tool_use_id": scripted_tool_use_id(3, 0),
        "content": f"edited {app}: 1 occurrence replaced",
        "is_error": False,
    }

    # The conversation grows by one assistant message and one answer per round.
    sent = bodies(server)
    assert [len(messages_of(body)) for body in sent] == [1, 3, 5, 7, 9]
    assert messages_of(sent[0]) == [{"role": "user", "content": PROMPT}]
    assert messages_of(sent[4])[1]["content"] == [
        {"type": "text", "text": "Let me look around."},
        {
            "type": "tool_use",
            "id": scripted_tool_use_id(0, 1),
            "name": "ls",
            "input": {"path": "."},
        },
    ]

    # On disk: the one occurrence replaced, once, and nothing else touched.
    assert app.read_text() == 'def main():\n    print("hello")\n'
    assert (root / "src" / "util.py").read_bytes() == util_before
    assert sorted(p.name for p in root.rglob("*")) == ["README.md", "app.py", "src", "util.py"]


def test_several_calls_in_one_round_are_answered_in_order_in_one_message(sbx: Sandbx) -> None:
    root = _project(sbx)
    script = [
        reply(
            tool_use_block("read", {"path": "README.md"}),
            tool_use_block("find", {"path": ".", "pattern": "app"}),
            tool_use_block("ls", {"path": "src"}),
        ),
        reply(text_block("Three answers.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)

    assert run.returncode == 0, run.stderr
    answers = messages_of(bodies(server)[1])[2]
    assert answers["role"] == "user"
    assert [item["tool_use_id"] for item in answers["content"]] == [
        scripted_tool_use_id(0, 0),
        scripted_tool_use_id(0, 1),
        scripted_tool_use_id(0, 2),
    ]
    assert [item["content"] for item in answers["content"]] == [
        "# demo\nA tiny demo.\n",
        f"{root}/src/app.py",
        "app.py\nutil.py",
    ]
    assert call_lines(run) == [
        f"sandbx: read {root}/README.md — ran",
        f"sandbx: find {root} — ran",
        f"sandbx: ls {root}/src — ran",
    ]


def test_a_round_without_a_tool_call_ends_the_turn_with_exit_0(sbx: Sandbx) -> None:
    with _answered("No tools needed.") as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "No tools needed.\n"
    assert run.messages == [f"sandbx: approved tools: {DEFAULT_TOOLS}"]
    assert run.records == []
    assert len(server.requests) == 1
    assert server.remaining == 0


def test_an_answer_that_ends_its_own_line_gets_no_second_newline(sbx: Sandbx) -> None:
    with _answered("Line one.\nLine two.\n") as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Line one.\nLine two.\n"


# --- the first stderr line and the request ------------------------------------------


@pytest.mark.parametrize(
    ("flags", "approved"),
    [
        ((), DEFAULT_TOOLS),
        (("--allow-tool", "edit"), "edit, find, grep, ls, read"),
        (("--allow-tool", "write", "--allow-tool", "bash"), "bash, find, grep, ls, read, write"),
        (("--allow-tool", "read"), DEFAULT_TOOLS),
        (("--allow-tool",), ALL_TOOLS),
        (("--allow-tool", "--allow-tool", "bash"), ALL_TOOLS),
    ],
)
def test_the_first_stderr_line_names_the_approved_tools(
    sbx: Sandbx, flags: tuple[str, ...], approved: str
) -> None:
    with _answered() as server:
        run = agent_run(sbx, server, *flags)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0] == f"sandbx: approved tools: {approved}"
    assert messages_of(bodies(server)[0]) == [{"role": "user", "content": PROMPT}]
    system = bodies(server)[0]["system"]
    assert isinstance(system, str)
    assert f"Approved tools: {approved}. Other tools will be refused." in system


def test_a_bare_allow_tool_before_the_separator_approves_all_seven_and_says_so(
    sbx: Sandbx,
) -> None:
    # `--allow-tool -- write the file`: the line that makes the slip obvious.
    with _answered() as server:
        run = sbx.run(
            "agent-run",
            "--allow-tool",
            "--",
            "write the file",
            ANTHROPIC_API_KEY=KEY,
            ANTHROPIC_BASE_URL=server.url,
        )
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[0] == f"sandbx: approved tools: {ALL_TOOLS}"
    assert messages_of(bodies(server)[0]) == [{"role": "user", "content": "write the file"}]


def test_the_request_carries_the_defaults_all_seven_tools_and_sandbx_system_lines(
    sbx: Sandbx,
) -> None:
    root = sbx.workdir.resolve()
    with _answered() as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    (request,) = server.requests
    assert request.method == "POST"
    assert request.path == "/v1/messages"
    # The key travels in a header (which one is the SDK's choice), and nowhere else.
    assert KEY in (
        request.headers.get("x-api-key"),
        request.headers.get("authorization", "").removeprefix("Bearer "),
    )
    assert KEY not in str(request.body)
    assert "anthropic-version" in request.headers
    body = request.body
    assert isinstance(body, dict)
    assert body["model"] == "claude-sonnet-5"
    assert body["max_tokens"] == 4096
    assert body["stream"] is True
    assert "tool_choice" not in body
    assert "thinking" not in body
    tools = body["tools"]
    assert isinstance(tools, list)
    assert [tool["name"] for tool in tools] == TOOL_ORDER
    assert all(tool["input_schema"]["type"] == "object" for tool in tools)
    system = body["system"]
    assert isinstance(system, str)
    lines = system.splitlines()
    assert lines[0] == "You are answering one question inside sandbx, a sandbox for coding agents."
    assert f"Approved tools: {DEFAULT_TOOLS}. Other tools will be refused." in lines
    assert f"Working directory: {root}" in lines
    assert f"Writable roots: {root}" in lines
    readable = next(line for line in lines if line.startswith("Readable roots: "))
    assert str(root) in readable.removeprefix("Readable roots: ").split(", ")
    assert "Network: denied." in lines
    assert_key_never_shown(run)


def test_system_text_is_sent_after_sandbx_own_lines(sbx: Sandbx) -> None:
    with _answered() as server:
        run = agent_run(sbx, server, "--system", "Answer in French.\nBe brief.")
    assert run.returncode == 0, run.stderr
    system = bodies(server)[0]["system"]
    assert isinstance(system, str)
    assert system.startswith("You are answering one question inside sandbx")
    assert system.endswith("\n\nAnswer in French.\nBe brief.")
    assert system.index("Approved tools:") < system.index("Answer in French.")


def test_model_and_max_tokens_reach_the_request(sbx: Sandbx) -> None:
    with _answered() as server:
        run = agent_run(sbx, server, "--model", "claude-test-1", "--max-tokens", "77")
    assert run.returncode == 0, run.stderr
    body = bodies(server)[0]
    assert body["model"] == "claude-test-1"
    assert body["max_tokens"] == 77


def test_grant_flags_shape_the_roots_sandbx_names_to_the_model(sbx: Sandbx) -> None:
    root = _project(sbx)
    with _answered() as server:
        run = agent_run(sbx, server, "--allow-read", str(root / "src"))
    assert run.returncode == 0, run.stderr
    system = bodies(server)[0]["system"]
    assert isinstance(system, str)
    lines = system.splitlines()
    readable = next(line for line in lines if line.startswith("Readable roots: "))
    assert f"{root}/src" in readable.removeprefix("Readable roots: ").split(", ")
    assert str(root) not in readable.removeprefix("Readable roots: ").split(", ")
    assert "Writable roots: none" in lines


# --- bounds: --max-tokens and --max-rounds --------------------------------------------


def test_a_round_stopped_by_max_tokens_exits_2_naming_the_bound(sbx: Sandbx) -> None:
    script = [reply(text_block("The answer is cut he"), stop_reason=StopReason.MAX_TOKENS)]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--max-tokens", "50")
    assert run.returncode == 2, run.stderr
    assert run.stdout == "The answer is cut he\n"
    assert run.messages[-1] == "sandbx: the answer was cut at --max-tokens 50"
    assert len(server.requests) == 1
    assert bodies(server)[0]["max_tokens"] == 50


def test_a_tool_call_cut_by_max_tokens_is_not_run_and_exits_2(sbx: Sandbx) -> None:
    script = [
        reply(tool_use_block("ls", {"path": "."}), stop_reason=StopReason.MAX_TOKENS),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 2, run.stderr
    assert run.records == []
    assert run.messages[-1] == "sandbx: the answer was cut at --max-tokens 4096"
    assert len(server.requests) == 1


def _rounds_of_tools(count: int, *, opening_text: str | None) -> list[ScriptEntry]:
    """``count`` rounds of one ``ls`` each, the first opening with text if given."""
    script: list[ScriptEntry] = []
    for index in range(count):
        blocks: list[ContentBlock] = []
        if index == 0 and opening_text is not None:
            blocks.append(text_block(opening_text))
        blocks.append(tool_use_block("ls", {"path": "."}))
        script.append(reply(*blocks))
    return script


def test_out_of_rounds_one_more_request_with_no_tool_asks_for_the_answer_and_exits_2(
    sbx: Sandbx,
) -> None:
    script = [
        *_rounds_of_tools(2, opening_text="Looking around."),
        reply(text_block("Summary: one directory, listed twice.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--max-rounds", "2")
    assert run.returncode == 2, run.stderr
    # The summary sits a blank line below what came before the cap.
    assert run.stdout == "Looking around.\n\nSummary: one directory, listed twice.\n"
    assert run.messages[-1] == "sandbx: the turn used its --max-rounds 2"
    assert len(records_of(run, "allowed")) == 2
    sent = bodies(server)
    assert len(sent) == 3
    assert "tool_choice" not in sent[0]
    assert "tool_choice" not in sent[1]
    # The wrap-up still offers the tools (the conversation names them) but allows none.
    assert sent[2]["tool_choice"] == {"type": "none"}
    offered = sent[2]["tools"]
    assert isinstance(offered, list)
    assert [tool["name"] for tool in offered] == TOOL_ORDER
    assert len(messages_of(sent[2])) == 5
    assert messages_of(sent[2])[-1]["content"][0]["type"] == "tool_result"


def test_the_wrap_up_after_a_turn_that_opened_with_a_tool_call_has_no_blank_line(
    sbx: Sandbx,
) -> None:
    script = [*_rounds_of_tools(1, opening_text=None), reply(text_block("Summary."))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--max-rounds", "1")
    assert run.returncode == 2, run.stderr
    assert run.stdout == "Summary.\n"
    assert bodies(server)[1]["tool_choice"] == {"type": "none"}


def test_no_wrap_up_sends_no_summary_request_and_leaves_stdout_empty_after_a_tool_call(
    sbx: Sandbx,
) -> None:
    script = [*_rounds_of_tools(1, opening_text=None), reply(text_block("never asked for"))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--max-rounds", "1", "--no-wrap-up")
    assert run.returncode == 2, run.stderr
    assert run.stdout == ""
    assert run.messages[-1] == "sandbx: the turn used its --max-rounds 1"
    assert len(server.requests) == 1
    assert server.remaining == 1


def test_no_wrap_up_keeps_what_the_model_said_before_the_cap(sbx: Sandbx) -> None:
    script = [*_rounds_of_tools(2, opening_text="Partial answer."), reply(text_block("unused"))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--max-rounds", "2", "--no-wrap-up")
    assert run.returncode == 2, run.stderr
    assert run.stdout == "Partial answer.\n"
    assert len(server.requests) == 2


def test_the_default_round_cap_is_eight(sbx: Sandbx) -> None:
    script = [*_rounds_of_tools(8, opening_text=None), reply(text_block("Summary."))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 2, run.stderr
    assert len(server.requests) == 9
    assert bodies(server)[8]["tool_choice"] == {"type": "none"}
    assert run.messages[-1] == "sandbx: the turn used its --max-rounds 8"


# --- thinking -------------------------------------------------------------------------


def test_signed_thinking_blocks_are_replayed_unchanged_within_the_turn(sbx: Sandbx) -> None:
    script = [
        reply(
            thinking_block("I should list the files first.", "c2lnbmF0dXJlLW9uZQ=="),
            tool_use_block("ls", {"path": "."}),
        ),
        reply(
            thinking_block("The listing is empty.", "c2lnbmF0dXJlLXR3bw=="),
            tool_use_block("find", {"path": ".", "pattern": "x"}),
        ),
        reply(text_block("Nothing here.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Nothing here.\n"
    # Without --show-thinking nothing of it is shown, and none is asked for.
    assert "I should list" not in run.stderr
    assert "thinking" not in bodies(server)[0]
    third = messages_of(bodies(server)[2])
    assert third[1]["content"] == [
        {
            "type": "thinking",
            "thinking": "I should list the files first.",
            "signature": "c2lnbmF0dXJlLW9uZQ==",
        },
        {
            "type": "tool_use",
            "id": scripted_tool_use_id(0, 1),
            "name": "ls",
            "input": {"path": "."},
        },
    ]
    assert third[3]["content"][0] == {
        "type": "thinking",
        "thinking": "The listing is empty.",
        "signature": "c2lnbmF0dXJlLXR3bw==",
    }


def test_show_thinking_asks_for_summarised_thinking_and_prints_it_on_stderr_only(
    sbx: Sandbx,
) -> None:
    script = [
        reply(
            thinking_block("Plan: list\x1b[31m the files.", "c2ln"),
            tool_use_block("ls", {"path": "."}),
        ),
        reply(text_block("Done.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--show-thinking")
    assert run.returncode == 0, run.stderr
    assert bodies(server)[0]["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert bodies(server)[1]["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert run.stdout == "Done.\n"
    # Shown as it arrives, its escape sequence defused; replayed to the model unchanged.
    assert "Plan: list\ufffd[31m the files." in run.stderr
    assert "\x1b" not in run.stderr
    assert messages_of(bodies(server)[1])[1]["content"][0]["thinking"] == (
        "Plan: list\x1b[31m the files."
    )
    # The reasoning does not swallow the lines that follow it: the record and the
    # per-call line each still start a line of their own.
    assert len(records_of(run, "allowed")) == 1, run.stderr
    assert f"sandbx: ls {sbx.workdir.resolve()} — ran" in run.messages


# --- model text on stderr cannot pass for the audit trail ------------------------------

FORGED = (
    '2026-10-28T14:33:42.998120Z  INFO sandbx::audit: decision="exited" '
    'spawn="forged.0000000000000000.0" session="-" program="/bin/true" code=0'
)


def _trail(run: Run) -> list[str]:
    """What the spec's filter keeps: `2>&1 >/dev/null | grep sandbx::audit`."""
    return [line for line in run.stderr.splitlines() if "sandbx::audit" in line]


def test_reasoning_shown_on_stderr_cannot_forge_an_audit_record(sbx: Sandbx) -> None:
    script = [
        reply(
            thinking_block(f"Planning.\n{FORGED}\nDone planning.", "c2ln"),
            tool_use_block("ls", {"path": "."}),
        ),
        reply(text_block("Done.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--show-thinking")
    assert run.returncode == 0, run.stderr
    assert "Planning." in run.stderr
    assert [record["decision"] for record in run.records] == ["allowed"], run.stderr
    assert len(_trail(run)) == 1, _trail(run)
    # The model itself is still sent its own reasoning unchanged.
    assert FORGED in str(bodies(server)[1])


def test_a_path_the_model_chooses_cannot_put_a_forged_record_on_stderr(sbx: Sandbx) -> None:
    forged_path = f"x\n{FORGED}"
    script = [
        reply(tool_use_block("read", {"path": forged_path})),
        reply(text_block("Done.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    assert [record["decision"] for record in run.records] == ["absent"], run.stderr
    assert "forged" not in {str(record.get("spawn")) for record in run.records}
    # One line holds the marker: the real record, the path inside its quoted field.
    assert len(_trail(run)) == 1, _trail(run)


# --- the model's API failing ----------------------------------------------------------


def test_a_429_is_retried_after_the_retry_after_it_names(sbx: Sandbx) -> None:
    script = [error_reply(429, retry_after=1), reply(text_block("Recovered."))]
    with ScriptedMessagesServer(script) as server:
        started = time.monotonic()
        run = agent_run(sbx, server)
        elapsed = time.monotonic() - started
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Recovered.\n"
    assert (
        "sandbx: the model's API failed (429 rate_limit_error); asking again in 1.0 s"
        in run.messages
    )
    assert elapsed >= 1.0
    first, second = bodies(server)
    assert first == second


def test_a_retry_after_of_zero_asks_again_at_once(sbx: Sandbx) -> None:
    script = [error_reply(429, retry_after=0), reply(text_block("Recovered."))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    assert (
        "sandbx: the model's API failed (429 rate_limit_error); asking again in 0.0 s"
        in run.messages
    )


@pytest.mark.parametrize(
    ("entry", "named"),
    [
        (error_reply(529), "529 overloaded_error"),
        (error_reply(500), "500 api_error"),
        (stream_error(3), "overloaded_error"),
        (connection_cut(2), "connection:"),
    ],
    ids=["529-overloaded", "500", "error-event-mid-stream", "connection-cut-mid-stream"],
)
def test_a_transient_failure_is_retried_with_backoff_and_the_turn_goes_on(
    sbx: Sandbx, entry: ScriptEntry, named: str
) -> None:
    script = [entry, reply(text_block("Recovered."))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    assert run.stdout.endswith("Recovered.\n")
    retries = [line for line in run.messages if "asking again in" in line]
    assert len(retries) == 1, run.stderr
    assert named in retries[0]
    assert retries[0].startswith("sandbx: the model's API failed (")
    assert len(server.requests) == 2
    first, second = bodies(server)
    assert first == second


def test_a_stream_cut_after_tool_input_began_retries_the_round_and_runs_the_call_once(
    sbx: Sandbx,
) -> None:
    listing = reply(tool_use_block("ls", {"path": "."}))
    script = [
        connection_cut(5, interrupting=listing),
        listing,
        reply(text_block("Listed.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Listed.\n"
    assert len(records_of(run, "allowed")) == 1
    assert len(server.requests) == 3


def test_text_streamed_before_a_cut_stays_and_the_retried_answer_starts_a_new_line(
    sbx: Sandbx,
) -> None:
    # Six events: message_start, the block's start, a ping, three pieces of text.
    script = [connection_cut(6), reply(text_block("Recovered."))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 0, run.stderr
    partial, _, retried = run.stdout.rpartition("\n")
    assert retried == ""
    assert partial.endswith("\nRecovered."), run.stdout
    assert partial.startswith("This reply was interrupted")
    assert len(server.requests) == 2


def test_retries_that_run_out_end_the_run_with_exit_1_and_one_line(sbx: Sandbx) -> None:
    script = [error_reply(529, retry_after=1) for _ in range(6)]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    # Four retries, then the fifth failure is the end: one line, naming what failed.
    assert len(server.requests) == 5
    assert server.remaining == 1
    retries = [line for line in run.messages if "asking again in 1.0 s" in line]
    assert len(retries) == 4
    assert _error_line(run) == (
        "sandbx: the model's API answered 529 overloaded_error: scripted overloaded_error"
        + RETRY_HINT
    )
    assert_key_never_shown(run)


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_an_error_that_is_not_transient_is_not_retried(sbx: Sandbx, status: int) -> None:
    with ScriptedMessagesServer([error_reply(status), reply(text_block("unused"))]) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 1, run.stderr
    assert len(server.requests) == 1
    line = _error_line(run)
    assert line.startswith(f"sandbx: the model's API answered {status} ")
    assert line.endswith(RETRY_HINT)
    assert not [message for message in run.messages if "asking again" in message]
    assert_key_never_shown(run)


def test_an_api_failure_after_tools_ran_still_ends_with_one_line(sbx: Sandbx) -> None:
    script = [reply(tool_use_block("ls", {"path": "."})), error_reply(401)]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server)
    assert run.returncode == 1, run.stderr
    assert len(records_of(run, "allowed")) == 1
    assert _error_line(run).startswith("sandbx: the model's API answered 401 authentication_error")


# --- the model calling tools wrongly ----------------------------------------------------


def test_an_unknown_tool_becomes_an_error_result_and_the_turn_goes_on(sbx: Sandbx) -> None:
    script = [
        reply(tool_use_block("rm_rf", {"path": "/"}), tool_use_block("ls", {"path": "."})),
        reply(text_block("I will stick to the tools I have.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--allow-tool")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "I will stick to the tools I have.\n"
    unknown = tool_result(server, 0, 0)
    assert unknown["is_error"] is True
    # The model is told there is no such tool, and which there are, not that a flag
    # would approve one sandbx does not have.
    assert "no tool named 'rm_rf'" in str(unknown["content"])
    assert "read, write, edit, ls, grep, find, bash" in str(unknown["content"])
    assert "--allow-tool rm_rf" not in run.stderr
    assert tool_result(server, 0, 1)["is_error"] is False
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("tool", "arguments", "complaint"),
    [
        ("read", {"file": "README.md"}, "`path` must be a string"),
        ("read", {"path": ""}, "`path` must not be empty"),
        ("ls", {"path": 7}, "`path` must be a string"),
        ("grep", {"path": "."}, "`pattern` must be a string"),
        ("find", {"path": "a\u0000b", "pattern": "x"}, "`path` must not contain a NUL byte"),
        ("edit", {"path": "README.md", "new": "x"}, "`old` must be a string"),
        ("write", {"path": "new.txt"}, "`content` must be a string"),
        ("bash", {"command": ["ls"]}, "`command` must be a string"),
        ("bash", {"command": "true", "timeout": 0}, "`timeout` must be above 0"),
        ("bash", {"command": "true", "timeout": "soon"}, "`timeout` must be a number"),
    ],
)
def test_bad_arguments_become_an_error_result_and_the_turn_goes_on(
    sbx: Sandbx, tool: str, arguments: dict[str, object], complaint: str
) -> None:
    _project(sbx)
    script = [reply(tool_use_block(tool, arguments)), reply(text_block("Sorry."))]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(sbx, server, "--allow-tool")
    assert run.returncode == 0, run.stderr
    assert run.stdout == "Sorry.\n"
    result = tool_result(server, 0, 0)
    assert result["is_error"] is True
    assert str(result["content"]).startswith(f"bad arguments for {tool}: ")
    assert complaint in str(result["content"])
    (line,) = call_lines(run)
    assert line.startswith(f"sandbx: {tool}")
    assert "refused: bad arguments (" in line
    assert records_of(run, "spawned") == []
    assert not (sbx.workdir / "new.txt").exists()


# --- command lines sandbx will not take -------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "complaint"),
    [
        (("--max-rounds", "0"), "--max-rounds '0' is not a whole number above zero"),
        (("--max-rounds", "two"), "--max-rounds 'two' is not a whole number above zero"),
        (("--max-tokens", "0"), "--max-tokens '0' is not a whole number above zero"),
        (("--max-tokens", "-5"), "--max-tokens '-5' is not a whole number above zero"),
        (("--approve", "maybe"), "--approve 'maybe' is neither run nor call"),
    ],
)
def test_a_bad_agent_flag_is_a_usage_error_and_nothing_is_asked(
    sbx: Sandbx, flags: tuple[str, ...], complaint: str
) -> None:
    with _answered() as server:
        run = agent_run(sbx, server, *flags)
    assert run.returncode == 64, run.stderr
    assert run.stdout == ""
    assert run.records == []
    assert len(run.stderr.splitlines()) == 1, run.stderr
    assert complaint in run.stderr
    assert server.requests == ()


def test_no_prompt_is_a_usage_error(sbx: Sandbx) -> None:
    with _answered() as server:
        run = sbx.run("agent-run", ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=server.url)
    assert run.returncode == 64, run.stderr
    assert "no question to ask" in run.stderr
    assert server.requests == ()


def test_allow_env_anthropic_api_key_is_refused_without_showing_the_key(sbx: Sandbx) -> None:
    with _answered() as server:
        run = agent_run(sbx, server, "--allow-env", "ANTHROPIC_API_KEY")
    assert run.returncode == 64, run.stderr
    assert run.stderr.startswith(
        "sandbx: --allow-env ANTHROPIC_API_KEY refused: sandbx makes the model call itself"
    )
    assert len(run.stderr.splitlines()) == 1
    assert_key_never_shown(run)
    assert run.stdout == ""
    assert run.records == []
    assert server.requests == ()


def test_another_allow_env_reaches_bash_but_the_key_does_not(sbx: Sandbx) -> None:
    script = [
        reply(tool_use_block("bash", {"command": 'echo "[$GREETING] [$ANTHROPIC_API_KEY]"'})),
        reply(text_block("Done.")),
    ]
    with ScriptedMessagesServer(script) as server:
        run = agent_run(
            sbx, server, "--allow-tool", "bash", "--allow-env", "GREETING", GREETING="hi"
        )
    assert run.returncode == 0, run.stderr
    assert tool_result(server, 0, 0)["content"] == "[hi] []\n"


@pytest.mark.parametrize("key", [None, "", "   "])
def test_no_key_is_one_line_naming_both_ways_to_give_one(sbx: Sandbx, key: str | None) -> None:
    with _answered() as server:
        env = {"ANTHROPIC_BASE_URL": server.url}
        if key is not None:
            env["ANTHROPIC_API_KEY"] = key
        run = sbx.run("agent-run", "--", PROMPT, **env)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert run.records == []
    (line,) = run.stderr.splitlines()
    assert line.startswith("sandbx: no Anthropic API key")
    assert "ANTHROPIC_API_KEY" in line
    assert "sandbx auth login" in line
    assert server.requests == ()


@pytest.mark.parametrize(
    "url", ["http://example.com", "http://api.anthropic.com.example.net:80", "ftp://127.0.0.1"]
)
def test_a_base_url_neither_https_nor_loopback_is_refused(sbx: Sandbx, url: str) -> None:
    run = sbx.run("agent-run", "--", PROMPT, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=url)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert run.records == []
    (line,) = run.stderr.splitlines()
    assert line.startswith(f"sandbx: ANTHROPIC_BASE_URL {url!r} refused")
    assert "https" in line
    assert_key_never_shown(run)


def test_http_on_loopback_by_name_is_accepted(sbx: Sandbx) -> None:
    with _answered() as server:
        url = server.url.replace("127.0.0.1", "localhost")
        run = sbx.run("agent-run", "--", PROMPT, ANTHROPIC_API_KEY=KEY, ANTHROPIC_BASE_URL=url)
    assert run.returncode == 0, run.stderr
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("where", "flags", "fragment"),
    [
        ("home", (), "refusing to derive a policy from your home directory"),
        ("project", ("--allow-read", "{home}"), "refused: it reaches sandbx's own"),
        ("project", ("--allow-write", "/"), "refused"),
        ("project", ("--allow-read", "{project}/missing"), "missing"),
    ],
    ids=["home-as-working-directory", "home-as-grant", "root-as-grant", "missing-grant"],
)
def test_a_policy_sandbox_run_refuses_is_refused_here_too_in_the_same_words(
    sbx: Sandbx, where: str, flags: tuple[str, ...], fragment: str
) -> None:
    paths = {"home": str(sbx.home), "project": str(sbx.workdir)}
    cwd = Path(paths[where])
    argv = tuple(flag.format(**paths) for flag in flags)
    with _answered() as server:
        run = agent_run(sbx, server, *argv, cwd=cwd)
    assert run.returncode == 1, run.stderr
    assert run.stdout == ""
    assert run.records == []
    (line,) = run.stderr.splitlines()
    assert fragment in line
    assert server.requests == ()
    assert sbx.run("sandbox-run", *argv, "--", "/bin/true", cwd=cwd).stderr == run.stderr
