"""The tui's screen under Textual's pilot, with a real turn behind it.

Each test builds ``TurnScreen`` the way ``sandbx tui`` does: the turn comes from
agent-run's ``build_turn`` and ``run_turn``, its tools run in the real tool box (the
worker and the spawner, the real boundary), and its model is a scripted Messages
server on loopback. Assertions are on what the screen renders: the prompt, the answer
as it streams, sandbx's rows, the question row and the status line. SVG snapshots of
the main states are written to tests/tui/snapshots/.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static

from sandbx import audit
from sandbx.agent import ApproveWhen, Asker, Sink, TurnEnd, TurnResult
from sandbx.cli._agent_run import AgentOptions, Prepared, build_turn, run_turn
from sandbx.policy import Command, GrantFlags, derive_policy
from sandbx.providers import Endpoint
from sandbx.testing import (
    ScriptedMessagesServer,
    Usage,
    error_reply,
    reply,
    text_block,
    thinking_block,
    tool_use_block,
)
from sandbx.tools import READ_ONLY_TOOLS, ToolBox
from sandbx.tui import PROMPT_MARK, ROW_MARK, TurnScreen
from tests.tui.tui_support import (
    KEY,
    SNAPSHOTS,
    processes_with,
    sleep_marker,
    svg_text,
    wait_for_no_process,
)

pytestmark = pytest.mark.boundary

SIZE = (100, 30)
ESC = "\x1b"
# The row mark and every block element that could pass for it at a glance.
ROW_MARK_LOOKALIKES = "▉▊▋▌▍▎▏▐█▕"


# --- the rig: a real turn behind the screen --------------------------------------------


@dataclass
class Rig:
    workdir: Path
    tools: ToolBox
    snapshots: Path


@pytest.fixture
def rig(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Rig]:
    """The tool box for a project directory, started before any thread of the test exists,
    from that directory: a command runs where sandbx was started, as under the CLI."""
    workdir = tmp_path / "project"
    workdir.mkdir()
    monkeypatch.chdir(workdir)
    policy = derive_policy(
        GrantFlags(),
        Command(argv=("/bin/sh",)),
        working_directory=str(workdir),
        environ=os.environ,
    )
    devnull = os.open(os.devnull, os.O_WRONLY)
    tools = ToolBox.start(
        policy,
        working_directory=str(workdir),
        sink=audit.StderrSink(devnull),
        session=lambda: audit.NO_SESSION,
    )
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    try:
        yield Rig(workdir=workdir, tools=tools, snapshots=snapshots)
    finally:
        tools.close()
        os.close(devnull)


def screen(
    rig: Rig,
    server: ScriptedMessagesServer,
    prompt: str,
    *,
    allow: frozenset[str] = frozenset(),
    approve: ApproveWhen = ApproveWhen.RUN,
    show_thinking: bool = False,
    hold: threading.Event | None = None,
) -> TurnScreen:
    """The screen ``sandbx tui`` builds; with ``hold``, the turn's thread waits for it
    after the turn has ended, so the screen can be read before it goes."""
    options = AgentOptions(
        approve=approve,
        approved_tools=READ_ONLY_TOOLS | allow,
        model="claude-test",
        max_tokens=1024,
        max_rounds=8,
        wrap_up=True,
        system="",
        show_thinking=show_thinking,
        session=False,
        session_id=None,
        compact_at=None,
    )
    prepared = Prepared(
        prompt=prompt,
        options=options,
        policy=rig.tools._policy,
        working_directory=str(rig.workdir),
        endpoint=Endpoint(base_url=server.url, api_key=KEY),
        session=None,
    )

    def run(sink: Sink, asker: Asker, stop: threading.Event) -> TurnResult:
        turn = build_turn(prepared, tools=rig.tools, sink=sink, asker=asker, stop=stop)
        try:
            result = run_turn(prepared, turn)
        finally:
            # The CLI leaves its HTTP client to process exit; a test closes it.
            turn._provider._client.close()  # type: ignore[attr-defined]
        if hold is not None:
            assert hold.wait(timeout=30), "the test never let the turn's thread go"
        return result

    return TurnScreen(prompt=prompt, run_turn=run, kill_command=rig.tools.interrupt)


def drive(
    app: TurnScreen,
    steps: Callable[[Pilot[TurnResult | None]], Awaitable[None]],
    hold: threading.Event | None = None,
) -> None:
    """Run the screen headless at 100x30 and hand the pilot to ``steps``; then let the
    turn's thread go and wait until the screen has gone. If ``steps`` fails, the turn is
    ended as a hangup would end it, so no command outlives the test."""

    async def main() -> None:
        async with app.run_test(size=SIZE) as pilot:
            try:
                await steps(pilot)
                if hold is not None:
                    hold.set()
                await wait_until(pilot, lambda: app._exit, "the screen to go")
            finally:
                if hold is not None:
                    hold.set()
                if not app._exit:
                    app.hang_up()

    asyncio.run(asyncio.wait_for(main(), timeout=90))


# --- reading the screen --------------------------------------------------------------


def screen_lines(app: TurnScreen) -> list[str]:
    """Every line of the screen as it is drawn now."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def shown(app: TurnScreen, widget: Static) -> str:
    """What ``widget`` shows on the screen: its region of the drawn lines, padding stripped."""
    region = widget.region
    lines = screen_lines(app)[region.y : region.bottom]
    return "\n".join(line[region.x : region.right].strip() for line in lines)


def rows(app: TurnScreen) -> list[str]:
    """sandbx's rows as drawn, a row wrapped on the screen joined again."""
    drawn = [shown(app, widget) for widget in app.query(".row").results(Static)]
    return [row.replace("\n", " ") for row in drawn if row]


def answers(app: TurnScreen) -> list[str]:
    return [shown(app, widget) for widget in app.query(".answer").results(Static)]


def reasoning(app: TurnScreen) -> list[str]:
    return [shown(app, widget).strip() for widget in app.query(".reasoning").results(Static)]


def marks_only_on_rows(app: TurnScreen) -> bool:
    """Whether the row mark is drawn on the first line of each of sandbx's rows and on no
    other line of the screen."""
    marked = {y for y, line in enumerate(screen_lines(app)) if ROW_MARK in line}
    firsts = {widget.region.y for widget in app.query(".row").results(Static)}
    return marked == firsts


def status(app: TurnScreen) -> str:
    return shown(app, app.query_one("#status", Static))


def question(app: TurnScreen) -> str:
    """The question row as drawn, joined again where it wraps; empty while none is shown."""
    widget = app.query_one("#question", Static)
    return shown(app, widget).replace("\n", " ") if widget.display else ""


async def wait_until(
    pilot: Pilot[TurnResult | None],
    condition: Callable[[], bool],
    what: str,
    seconds: float = 30,
) -> None:
    for _ in range(int(seconds / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    screen_now = "\n".join(line.rstrip() for line in screen_lines(pilot.app))  # type: ignore[arg-type]
    raise AssertionError(f"{what}: not within {seconds} s; the screen shows\n{screen_now}")


async def expect(
    pilot: Pilot[TurnResult | None], actual: Callable[[], object], expected: object, what: str
) -> None:
    """Wait until ``actual()`` is ``expected`` (text is laid out a refresh after it is set)."""
    for _ in range(200):
        if actual() == expected:
            return
        await pilot.pause(0.05)
    assert actual() == expected, what


def snapshot(rig: Rig, app: TurnScreen, name: str) -> str:
    """Save an SVG of the screen as tests/tui/snapshots/NAME.svg (when that folder can be
    written: not in an unprivileged run over root's work tree) and return what it shows."""
    written = Path(app.save_screenshot(filename=f"{name}.svg", path=str(rig.snapshots)))
    assert written.is_file()
    if os.access(SNAPSHOTS, os.W_OK) or (
        not SNAPSHOTS.exists() and os.access(SNAPSHOTS.parent, os.W_OK)
    ):
        SNAPSHOTS.mkdir(exist_ok=True)
        shutil.copyfile(written, SNAPSHOTS / f"{name}.svg")
    return svg_text(written.read_text(encoding="utf-8"))


def status_pattern(state: str, rounds: int, calls: int, tokens_in: int, tokens_out: int) -> str:
    return (
        rf"^{state} · rounds {rounds} · tool calls {calls} · "
        rf"tokens in {tokens_in} out {tokens_out}\b"
    )


# --- the tests -----------------------------------------------------------------------


def test_the_prompt_the_streamed_answer_one_row_per_call_and_the_status_line(rig: Rig) -> None:
    prompt = "what does echo print?"
    script = [
        reply(
            text_block("I will run a command."),
            tool_use_block("bash", {"command": "echo hello"}),
            tool_use_block("bash", {"command": "exit 3"}),
            usage=Usage(input_tokens=120, output_tokens=15),
        ),
        reply(
            text_block("The command printed hello."),
            usage=Usage(input_tokens=160, output_tokens=9),
        ),
    ]
    hold = threading.Event()
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, prompt, allow=frozenset({"bash"}), hold=hold)

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(
                pilot, lambda: "The command printed hello." in "".join(answers(app)), "answer"
            )
            await wait_until(pilot, lambda: "tokens in 280" in status(app), "status")
            assert shown(app, app.query_one("#prompt", Static)) == f"{PROMPT_MARK} {prompt}"
            assert [answer.strip() for answer in answers(app)] == [
                "I will run a command.",
                "The command printed hello.",
            ]
            await expect(
                pilot,
                lambda: rows(app),
                [
                    f"{ROW_MARK} sandbx: bash — ran",
                    f"{ROW_MARK} sandbx: bash — ran, exit code 3",
                ],
                "the rows",
            )
            # Rows sit between the answers, in the order things happened.
            first, second = app.query(".answer").results(Static)
            echo_row, exit_row = app.query(".row").results(Static)
            assert first.region.y < echo_row.region.y < exit_row.region.y < second.region.y
            assert re.match(status_pattern("running", 2, 2, 280, 24), status(app)), status(app)
            # The row mark is drawn on sandbx's rows and nowhere else.
            assert marks_only_on_rows(app)
            # sandbx's rows are styled apart from the model's text.
            assert echo_row.styles.background != first.styles.background
            assert question(app) == ""

            picture = snapshot(rig, app, "answered")
            assert f"{PROMPT_MARK} {prompt}" in picture
            assert "I will run a command." in picture
            assert f"{ROW_MARK} sandbx: bash — ran" in picture
            assert "The command printed hello." in picture
            assert "running · rounds 2 · tool calls 2 · tokens in 280 out 24" in picture

        drive(app, steps, hold)

    assert app.return_value is not None
    assert app.return_value.end is TurnEnd.ANSWERED
    assert [line.kind for line in app.lines] == ["answer", "row", "row", "answer"]
    assert len(server.requests) == 2


def test_a_retry_row_is_not_counted_as_a_tool_call(rig: Rig) -> None:
    script = [
        error_reply(529, retry_after=0),
        reply(text_block("Answered on the second try."), usage=Usage(30, 5)),
    ]
    hold = threading.Event()
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, "hello", hold=hold)

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: "second try" in "".join(answers(app)), "answer")
            await wait_until(pilot, lambda: "tokens in 30" in status(app), "status")
            assert [row.split(";")[0] for row in rows(app)] == [
                f"{ROW_MARK} sandbx: the model's API failed (529 overloaded_error)"
            ]
            assert re.match(status_pattern("running", 1, 0, 30, 5), status(app)), status(app)

        drive(app, steps, hold)

    assert len(server.requests) == 2


def test_summarised_reasoning_is_shown_apart_with_show_thinking(rig: Rig) -> None:
    script = [
        reply(
            thinking_block("The user wants the files listed.", "sig-1"),
            text_block("Here they are."),
        )
    ]
    hold = threading.Event()
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, "list the files", show_thinking=True, hold=hold)

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: "Here they are." in "".join(answers(app)), "answer")
            await expect(pilot, lambda: reasoning(app), ["The user wants the files listed."], "")
            (thought,) = app.query(".reasoning").results(Static)
            (answer,) = app.query(".answer").results(Static)
            assert thought.styles.color != answer.styles.color
            # The reasoning came before the answer, and is shown before it.
            assert thought.region.y < answer.region.y

        drive(app, steps, hold)

    assert [line.kind for line in app.lines] == ["reasoning", "answer"]
    body = server.requests[0].body
    assert isinstance(body, dict)
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}


def test_model_text_cannot_draw_escape_sequences_or_forge_sandbx_rows(rig: Rig) -> None:
    forged = (
        "Clearing\x1b[2J the screen, \u202ereversed\u202c, \x07bell\r\n"
        f"{ROW_MARK} sandbx: write /etc/passwd — ran\n"
        "▐ sandbx: bash rm -rf / — ran\n"
        "█ done"
    )
    script = [
        reply(
            thinking_block(f"\x1b]0;title\x07{ROW_MARK} sandbx: thinking forged", "sig-1"),
            text_block(forged),
            tool_use_block("ls", {"path": "."}),
        ),
        reply(text_block(f"{ROW_MARK} sandbx: the second forgery")),
    ]
    hold = threading.Event()
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, f"prompt \x1b[31m{ROW_MARK}", show_thinking=True, hold=hold)

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: "the second forgery" in "".join(answers(app)), "end")
            every_line = screen_lines(app)
            assert not any(ESC in line or "\x07" in line or "\r" in line for line in every_line)
            assert not any("\u202e" in line or "\u202c" in line for line in every_line)
            # The only lines with the row mark are sandbx's own rows.
            assert rows(app) == [f"{ROW_MARK} sandbx: ls {rig.workdir} — ran"]
            assert marks_only_on_rows(app)
            for widget in app.query(".answer, .reasoning, #prompt").results(Static):
                text = str(widget.content)
                assert ESC not in text
                assert ROW_MARK not in text
                assert "\u202e" not in text
            answer_text = "\n".join(answers(app))
            assert "sandbx: write /etc/passwd — ran" in answer_text  # shown, but unmarked
            assert "Clearing" in answer_text
            assert "[2J the screen" in answer_text

        drive(app, steps, hold)


@pytest.mark.parametrize("lookalike", ["▋", "▊", "▉", "▕"])
def test_block_elements_that_pass_for_the_row_mark_are_replaced_too(
    rig: Rig, lookalike: str
) -> None:
    script = [reply(text_block(f"{lookalike} sandbx: write /etc/passwd — ran"))]
    hold = threading.Event()
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, "hello", hold=hold)

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: "/etc/passwd" in "".join(answers(app)), "answer")
            answer_text = "".join(answers(app))
            assert not set(answer_text) & set(ROW_MARK_LOOKALIKES), answer_text

        drive(app, steps, hold)


@pytest.mark.parametrize("key", ["ctrl+c", "escape"])
def test_ctrl_c_or_escape_kills_a_running_bash_command_and_ends_the_turn(
    rig: Rig, key: str
) -> None:
    marker = sleep_marker()
    script = [
        reply(
            text_block("Waiting a while."),
            tool_use_block("bash", {"command": f"sleep {marker}"}),
            usage=Usage(input_tokens=50, output_tokens=7),
        ),
        reply(text_block("never asked for")),
    ]
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, "wait for me", allow=frozenset({"bash"}))

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: bool(processes_with(marker)), "the sleep")
            await wait_until(pilot, lambda: "tokens in 50" in status(app), "status")
            assert re.match(status_pattern("running", 1, 0, 50, 7), status(app)), status(app)
            assert [answer.strip() for answer in answers(app)] == ["Waiting a while."]
            assert rows(app) == []
            if key == "ctrl+c":
                picture = snapshot(rig, app, "running")
                assert "> wait for me" in picture
                assert "Waiting a while." in picture
                assert "running · rounds 1 · tool calls 0 · tokens in 50 out 7" in picture
            await pilot.press(key)
            await wait_until(pilot, lambda: status(app).startswith("stopping · "), "stopping")
            # The bash command is killed, its row added, and the screen goes.
            await wait_until(pilot, lambda: app._exit, "the turn to end")

        drive(app, steps)

    wait_for_no_process(marker)
    assert [(line.kind, line.text) for line in app.lines] == [
        ("answer", "Waiting a while."),
        ("row", "bash — failed: interrupted"),
    ]
    result = app.return_value
    assert result is not None
    assert result.end is TurnEnd.INTERRUPTED
    assert result.end.exit_code == 2
    # The stopped round is not kept: nothing after the prompt.
    assert result.messages == ()
    assert len(server.requests) == 1


def test_any_other_tool_call_finishes_first_when_the_turn_is_interrupted(rig: Rig) -> None:
    fifo = rig.workdir / "slow.txt"
    os.mkfifo(fifo)
    script = [
        reply(text_block("Reading."), tool_use_block("read", {"path": "slow.txt"})),
        reply(text_block("never asked for")),
    ]
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, "read the slow file")

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            writer = -1

            def read_started() -> bool:
                # A writer can open the FIFO only once the read call has it open (or is
                # opening it); the call then waits for content.
                nonlocal writer
                try:
                    writer = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
                except OSError:
                    return False
                return True

            await wait_until(pilot, read_started, "the read call")
            await pilot.press("ctrl+c")
            await wait_until(pilot, lambda: status(app).startswith("stopping"), "stopping")
            await pilot.pause(0.5)
            # The read is not killed: it still waits, and the turn with it.
            assert not app._exit
            assert [line.kind for line in app.lines] == ["answer"]
            os.write(writer, b"slow content\n")
            os.close(writer)
            await wait_until(pilot, lambda: app._exit, "the turn to end")

        drive(app, steps)

    assert [(line.kind, line.text) for line in app.lines] == [
        ("answer", "Reading."),
        ("row", f"read {fifo} — ran"),
    ]
    result = app.return_value
    assert result is not None
    assert result.end is TurnEnd.INTERRUPTED
    assert len(server.requests) == 1


def test_approve_call_asks_on_the_screen_one_key_per_answer(rig: Rig) -> None:
    script = [
        reply(text_block("First."), tool_use_block("bash", {"command": "echo one > one.txt"})),
        reply(tool_use_block("bash", {"command": "echo two > two.txt"})),
        reply(tool_use_block("bash", {"command": "echo three > three.txt"})),
        reply(tool_use_block("bash", {"command": "echo four > four.txt"})),
        reply(text_block("All asked.")),
    ]

    def asked(command: str) -> str:
        return (
            f'{ROW_MARK} sandbx: run bash {{"command": "{command}"}}? '
            "[y] this call, [n] refuse, [a] every bash call:"
        )

    hold = threading.Event()
    with ScriptedMessagesServer(script) as server:
        app = screen(
            rig,
            server,
            "make files",
            allow=frozenset({"bash"}),
            approve=ApproveWhen.CALL,
            hold=hold,
        )

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: question(app) != "", "the first question")
            assert question(app) == asked("echo one > one.txt")
            # The question is a row under the transcript, above the status line.
            widget = app.query_one("#question", Static)
            transcript = app.query_one("#transcript")
            assert transcript.region.bottom <= widget.region.y
            assert widget.region.bottom <= app.query_one("#status", Static).region.y
            picture = snapshot(rig, app, "question")
            assert "sandbx: run bash" in picture
            assert "[y] this call, [n] refuse, [a] every bash" in picture

            # Other keys do not answer.
            await pilot.press("x", "Y", "enter", "space")
            await pilot.pause(0.2)
            assert question(app) == asked("echo one > one.txt")
            assert not (rig.workdir / "one.txt").exists()

            await pilot.press("y")
            await wait_until(pilot, lambda: "two.txt" in question(app), "the second question")
            assert (rig.workdir / "one.txt").read_text() == "one\n"
            await pilot.press("n")
            await wait_until(pilot, lambda: "three.txt" in question(app), "the third question")
            await pilot.press("a")
            await wait_until(pilot, lambda: "All asked." in "".join(answers(app)), "the answer")
            await expect(
                pilot,
                lambda: rows(app),
                [
                    f"{ROW_MARK} answered: y",
                    f"{ROW_MARK} sandbx: bash — ran",
                    f"{ROW_MARK} answered: n",
                    f"{ROW_MARK} sandbx: bash — refused: refused on the terminal",
                    f"{ROW_MARK} answered: a",
                    f"{ROW_MARK} sandbx: bash — ran",
                    # a: every later bash call runs without a question.
                    f"{ROW_MARK} sandbx: bash — ran",
                ],
                "the rows",
            )
            assert question(app) == ""

        drive(app, steps, hold)

    assert (rig.workdir / "one.txt").exists()
    assert not (rig.workdir / "two.txt").exists()
    assert (rig.workdir / "three.txt").exists()
    assert (rig.workdir / "four.txt").exists()
    result = app.return_value
    assert result is not None
    assert result.end is TurnEnd.ANSWERED


@pytest.mark.parametrize("key", ["escape", "ctrl+c"])
def test_escape_or_ctrl_c_on_a_question_refuses_the_call_and_ends_the_turn(
    rig: Rig, key: str
) -> None:
    script = [
        reply(tool_use_block("bash", {"command": "echo made > made.txt"})),
        reply(text_block("never asked for")),
    ]
    with ScriptedMessagesServer(script) as server:
        app = screen(
            rig, server, "make a file", allow=frozenset({"bash"}), approve=ApproveWhen.CALL
        )

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: question(app) != "", "the question")
            await pilot.press(key)

        drive(app, steps)

    assert not (rig.workdir / "made.txt").exists()
    result = app.return_value
    assert result is not None
    assert result.end is TurnEnd.INTERRUPTED
    assert len(server.requests) == 1


def test_a_hangup_ends_the_turn_where_it_stood(rig: Rig) -> None:
    marker = sleep_marker()
    script = [
        reply(tool_use_block("bash", {"command": f"sleep {marker}"})),
        reply(text_block("never asked for")),
    ]
    with ScriptedMessagesServer(script) as server:
        app = screen(rig, server, "wait", allow=frozenset({"bash"}))

        async def steps(pilot: Pilot[TurnResult | None]) -> None:
            await wait_until(pilot, lambda: bool(processes_with(marker)), "the sleep")
            app.hang_up()

        drive(app, steps)

        wait_for_no_process(marker)
    assert app.hung_up.is_set()
    assert app.return_value is None
    assert len(server.requests) == 1
