"""``sandbx tui`` as a process on a real terminal: tmux, 100x30, keys sent as a person types.

Each test has a tmux server of its own (its own socket, panes kept after they exit, no
status bar). The pane runs a small launcher that ignores SIGHUP, starts sandbx with
SIGHUP at its default and stderr where the test says (a file, another pty, or the pane
itself), and writes sandbx's exit code to a file: so a hangup of the pane, which only
the launcher (the session leader) gets as a signal, is survived and its exit code
recorded. The model is a scripted Messages server on loopback.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbx.testing import ScriptedMessagesServer, reply, text_block, tool_use_block
from tests.support import SANDBX, Sandbx, parse_records
from tests.tui.tui_support import (
    KEY,
    kill_quietly,
    processes_with,
    sleep_marker,
    wait_for_no_process,
    wait_for_process,
)

pytestmark = [
    pytest.mark.boundary,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
]

ROW = "▌ sandbx: "
AUDIT = "sandbx::audit:"

_LAUNCHER = """\
import json, os, signal, subprocess, sys

spec = json.load(open(sys.argv[1], encoding="utf-8"))
signal.signal(signal.SIGHUP, signal.SIG_IGN)


def default_hangup():
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


stderr = None
if spec["stderr"]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOCTTY | os.O_CLOEXEC
    stderr = os.open(spec["stderr"], flags, 0o600)
env = dict(spec["env"], TERM=os.environ.get("TERM", "screen"))
child = subprocess.Popen(
    spec["argv"], cwd=spec["cwd"], env=env, stderr=stderr, preexec_fn=default_hangup
)
with open(spec["pid"] + ".tmp", "w") as pid_file:
    pid_file.write(str(child.pid))
os.rename(spec["pid"] + ".tmp", spec["pid"])
code = child.wait()
with open(spec["rc"] + ".tmp", "w") as rc_file:
    rc_file.write(str(code))
os.rename(spec["rc"] + ".tmp", spec["rc"])
"""


class Pane:
    """``sandbx tui`` in a tmux pane of a server of its own."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.socket = directory / "tmux.sock"
        self.config = directory / "tmux.conf"
        self.config.write_text(
            "set -g remain-on-exit on\nset -g status off\nset -g history-limit 10000\n"
        )
        self.launcher = directory / "launch.py"
        self.launcher.write_text(_LAUNCHER)
        self.pid_file = directory / "sandbx.pid"
        self.rc_file = directory / "sandbx.rc"
        self.env = {name: value for name, value in os.environ.items() if name != "TMUX"}

    def tmux(self, *args: str) -> str:
        completed = subprocess.run(
            ["tmux", "-S", str(self.socket), "-f", str(self.config), *args],
            capture_output=True,
            text=True,
            timeout=15,
            check=True,
            env=self.env,
        )
        return completed.stdout

    def start(self, sbx: Sandbx, argv: list[str], *, stderr: str | None, **env: str) -> None:
        spec = self.directory / "spec.json"
        spec.write_text(
            json.dumps(
                {
                    "argv": [*SANDBX, "tui", *argv],
                    "cwd": str(sbx.workdir),
                    "env": {**sbx.env, **env},
                    "stderr": stderr,
                    "pid": str(self.pid_file),
                    "rc": str(self.rc_file),
                }
            )
        )
        command = f"exec {sys.executable} {self.launcher} {spec}"
        self.tmux("new-session", "-d", "-x", "100", "-y", "30", "-s", "sbx", command)

    def screen(self) -> str:
        """What the pane shows now, lines joined where they wrap."""
        return self.tmux("capture-pane", "-p", "-J", "-t", "sbx")

    def everything(self) -> list[str]:
        """Every line the pane has shown outside the screen, history included."""
        text = self.tmux("capture-pane", "-p", "-J", "-S", "-", "-t", "sbx")
        # tmux's own line under a pane kept after its process ended is not sandbx's.
        return [line.rstrip() for line in text.splitlines() if not line.startswith("Pane is dead")]

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", "sbx", *keys)

    def title(self) -> str:
        return self.tmux("display-message", "-p", "-t", "sbx", "#{pane_title}").strip()

    def hang_up(self) -> None:
        """Kill the session: the pane's terminal goes away under sandbx."""
        self.tmux("kill-session", "-t", "sbx")

    def wait_for_screen(self, text: str, *, timeout: float = 30) -> str:
        deadline = time.monotonic() + timeout
        shown = ""
        while time.monotonic() < deadline:
            shown = self.screen()
            if text in shown:
                return shown
            assert not self.rc_file.exists(), f"sandbx exited before showing {text!r}:\n{shown}"
            time.sleep(0.1)
        raise AssertionError(f"{text!r} not on the screen within {timeout} s; it shows\n{shown}")

    def exit_code(self, *, timeout: float = 30) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.rc_file.exists():
                return int(self.rc_file.read_text())
            time.sleep(0.05)
        screen = self.screen() if self.socket.exists() else "(the pane is gone)"
        raise AssertionError(f"sandbx did not exit within {timeout} s; the pane shows\n{screen}")

    def close(self) -> None:
        subprocess.run(
            ["tmux", "-S", str(self.socket), "kill-server"],
            capture_output=True,
            timeout=15,
            check=False,
            env=self.env,
        )
        if self.pid_file.exists() and not self.rc_file.exists():
            pid = int(self.pid_file.read_text())
            if pid in processes_with(str(self.directory)) or pid in processes_with("sandbx"):
                kill_quietly(pid, signal.SIGKILL)
        # The launcher ignores SIGHUP; it ends once sandbx has.
        for pid in processes_with(str(self.launcher)):
            kill_quietly(pid, signal.SIGKILL)


@pytest.fixture
def pane() -> Iterator[Pane]:
    # A socket path of its own, short enough for AF_UNIX wherever the suite runs.
    directory = Path(tempfile.mkdtemp(prefix="sbx-tui-"))
    made = Pane(directory)
    try:
        yield made
    finally:
        made.close()
        shutil.rmtree(directory, ignore_errors=True)


class PtyReader:
    """A pseudo-terminal of the test's own, for a stderr that is a terminal but not the
    pane's: it survives the pane's hangup, and everything written to it is kept."""

    def __init__(self) -> None:
        self.master, self._slave = os.openpty()
        self.path = os.ttyname(self._slave)
        self._data = b""
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        while True:
            try:
                chunk = os.read(self.master, 65536)
            except OSError:
                return
            if not chunk:
                return
            with self._lock:
                self._data += chunk

    @property
    def text(self) -> str:
        with self._lock:
            return self._data.decode("utf-8", "replace").replace("\r\n", "\n")

    def close(self) -> None:
        os.close(self._slave)
        self._thread.join(timeout=5)
        os.close(self.master)


def session_lines(sbx: Sandbx) -> list[dict[str, object]]:
    """Every line of the one session transcript in the test's home."""
    files = list((sbx.home / ".local/state/sandbx/sessions").glob("*.jsonl"))
    assert len(files) == 1, files
    return [json.loads(line) for line in files[0].read_text().splitlines()]


def transcript_rows(lines: list[str]) -> list[str]:
    return [line for line in lines if line.startswith(ROW)]


def tool_names(messages: object) -> list[str]:
    assert isinstance(messages, list)
    return [
        block["name"]
        for message in messages
        if isinstance(message.get("content"), list)
        for block in message["content"]
        if block.get("type") == "tool_use"
    ]


def model_env(server: ScriptedMessagesServer) -> dict[str, str]:
    return {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url}


# --- no terminal ------------------------------------------------------------------------


@pytest.mark.parametrize("with_key", [True, False])
def test_piped_stdout_is_refused_at_once_before_any_key_or_request(
    sbx: Sandbx, with_key: bool
) -> None:
    script = [reply(text_block("never asked for"))]
    with ScriptedMessagesServer(script) as server:
        env = {**sbx.env, "ANTHROPIC_BASE_URL": server.url}
        if with_key:
            env["ANTHROPIC_API_KEY"] = KEY
        started = time.monotonic()
        # `sandbx tui … | cat`: stdout is a pipe.
        completed = subprocess.run(
            [*SANDBX, "tui", "--session", "--allow-tool", "bash", "--", "hello"],
            cwd=sbx.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        elapsed = time.monotonic() - started

    assert completed.returncode == 1, completed.stderr
    assert completed.stdout == ""
    assert completed.stderr.splitlines() == [
        (
            "sandbx: tui draws on a terminal, and stdout is not one — run it in a terminal, "
            "or use `sandbx agent-run` for a piped run"
        )
    ]
    assert server.requests == ()
    # Nothing was prepared: no session was started, no key looked for.
    assert not (sbx.home / ".local").exists()
    assert elapsed < 10


# --- on a terminal ----------------------------------------------------------------------


def open_for_writing_once_read(fifo: Path, *, timeout: float = 30) -> int:
    """A writer's fd for ``fifo``, once a reader has it open: the read tool call has
    started, and now waits for content until the test writes and closes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError:  # ENXIO: nobody reads it yet
            time.sleep(0.05)
    raise AssertionError(f"nothing opened {fifo} for reading within {timeout} s")


def test_the_transcript_replaces_the_screen_and_held_records_follow_it(
    sbx: Sandbx, pane: Pane
) -> None:
    fifo = sbx.workdir / "slow.txt"
    os.mkfifo(fifo, 0o644)
    script = [
        reply(text_block("Looking around."), tool_use_block("ls", {"path": "."})),
        reply(text_block("Now a slow read."), tool_use_block("read", {"path": "slow.txt"})),
        reply(text_block("Then a command."), tool_use_block("bash", {"command": "echo hi"})),
        reply(text_block("All done.")),
    ]
    workdir = sbx.workdir.resolve()
    with ScriptedMessagesServer(script) as server:
        # stderr is the pane: records are held while the screen is up.
        pane.start(
            sbx, ["--allow-tool", "bash", "--", "what is here?"], stderr=None, **model_env(server)
        )
        writer = open_for_writing_once_read(fifo)
        try:
            screen = pane.wait_for_screen("Now a slow read.")
            assert "> what is here?" in screen
            assert f"{ROW}ls {workdir} — ran" in screen
            assert "running · rounds 2 · tool calls 1" in screen
            # The ls record has been written, but not under the screen.
            assert AUDIT not in screen
            os.write(writer, b"slow content\n")
        finally:
            os.close(writer)
        assert pane.exit_code() == 0

    lines = pane.everything()
    transcript = [
        "> what is here?",
        "Looking around.",
        f"{ROW}ls {workdir} — ran",
        "Now a slow read.",
        f"{ROW}read {workdir}/slow.txt — ran",
        "Then a command.",
        f"{ROW}bash — ran",
        "All done.",
    ]
    shown = [line for line in lines if line]
    assert shown[: len(transcript)] == transcript, "\n".join(lines)
    records = parse_records("\n".join(shown[len(transcript) :]))
    decisions = [record["decision"] for record in records]
    assert decisions == ["allowed", "allowed", "spawned", "exited"], "\n".join(lines)
    assert all(AUDIT in line for line in shown[len(transcript) :]), "\n".join(lines)
    assert KEY not in "\n".join(lines)


@pytest.mark.parametrize("key", ["C-c", "Escape"])
def test_ctrl_c_or_escape_kills_bash_exits_2_and_the_session_keeps_the_finished_rounds(
    sbx: Sandbx, pane: Pane, key: str
) -> None:
    marker = sleep_marker()
    script = [
        reply(text_block("First I look."), tool_use_block("ls", {"path": "."})),
        reply(text_block("Now I wait."), tool_use_block("bash", {"command": f"sleep {marker}"})),
        reply(text_block("never asked for")),
    ]
    stderr = pane.directory / "stderr.txt"
    with ScriptedMessagesServer(script) as server:
        pane.start(
            sbx,
            ["--allow-tool", "bash", "--session", "--", "look, then wait"],
            stderr=str(stderr),
            **model_env(server),
        )
        wait_for_process(marker)
        pane.wait_for_screen("Now I wait.")
        started = time.monotonic()
        pane.keys(key)
        assert pane.exit_code(timeout=15) == 2
        assert time.monotonic() - started < 10  # not the 20 s of the sleep
        wait_for_no_process(marker)
        assert len(server.requests) == 2

    lines = [line for line in pane.everything() if line]
    assert lines[:5] == [
        "> look, then wait",
        "First I look.",
        f"{ROW}ls {sbx.workdir.resolve()} — ran",
        "Now I wait.",
        f"{ROW}bash — failed: interrupted",
    ], "\n".join(lines)

    # The screen was drawn on stdout: stderr holds sandbx's lines and records only.
    text = stderr.read_text()
    assert "\x1b" not in text
    records = parse_records(text)
    assert [record["decision"] for record in records] == ["allowed", "spawned", "failed"]
    assert records[-1]["reason"] == "interrupted"
    assert "sandbx: the turn was interrupted" in text.splitlines()

    # --session: the round that finished is kept, the one that was stopped is not.
    kept = session_lines(sbx)
    rounds = [line for line in kept if line["type"] == "round"]
    assert len(rounds) == 1
    assert tool_names(rounds[0]["messages"]) == ["ls"]
    assert "sleep" not in json.dumps(kept)
    turns = [line for line in kept if line["type"] == "turn"]
    assert [turn["outcome"] for turn in turns] == ["interrupted"]


@pytest.mark.parametrize("stderr_kind", ["file", "terminal"])
def test_a_hangup_exits_3_and_the_audit_trail_is_released_to_stderr(
    sbx: Sandbx, pane: Pane, stderr_kind: str
) -> None:
    """``file``: records go out as they happen. ``terminal``: stderr is a terminal (not the
    pane's), so records are held while the screen is up, and must be released, not dropped,
    when the pane hangs up."""
    marker = sleep_marker()
    script = [
        reply(tool_use_block("ls", {"path": "."})),
        reply(text_block("Waiting."), tool_use_block("bash", {"command": f"sleep {marker}"})),
        reply(text_block("never asked for")),
    ]
    reader = PtyReader() if stderr_kind == "terminal" else None
    stderr_file = pane.directory / "stderr.txt"
    try:
        with ScriptedMessagesServer(script) as server:
            pane.start(
                sbx,
                ["--allow-tool", "bash", "--session", "--", "wait"],
                stderr=reader.path if reader is not None else str(stderr_file),
                **model_env(server),
            )
            wait_for_process(marker)
            pane.wait_for_screen("Waiting.")
            if reader is not None:
                assert AUDIT not in reader.text  # held while the screen is up
            pane.hang_up()
            assert pane.exit_code(timeout=20) == 3
            wait_for_no_process(marker)
            assert len(server.requests) == 2
        time.sleep(0.2)
        text = reader.text if reader is not None else stderr_file.read_text()
    finally:
        if reader is not None:
            reader.close()

    records = parse_records(text)
    decisions = [record["decision"] for record in records]
    assert decisions[:2] == ["allowed", "spawned"], text
    # The bash command killed by the hangup has its record too.
    assert decisions == ["allowed", "spawned", "failed"], text
    # The finished round is kept; the one that stood when the terminal went is not.
    rounds = [line for line in session_lines(sbx) if line["type"] == "round"]
    assert [tool_names(line["messages"]) for line in rounds] == [["ls"]]


def test_a_hangup_while_asking_refuses_the_call_and_exits_3(sbx: Sandbx, pane: Pane) -> None:
    script = [
        reply(tool_use_block("ls", {"path": "."})),
        reply(tool_use_block("bash", {"command": "echo yes > approved.txt"})),
        reply(text_block("never asked for")),
    ]
    stderr = pane.directory / "stderr.txt"
    with ScriptedMessagesServer(script) as server:
        pane.start(
            sbx,
            ["--allow-tool", "bash", "--approve", "call", "--session", "--", "make a file"],
            stderr=str(stderr),
            **model_env(server),
        )
        pane.wait_for_screen("[y] this call, [n] refuse, [a] every")
        pane.hang_up()
        assert pane.exit_code(timeout=20) == 3, stderr.read_text()
        assert len(server.requests) == 2

    assert not (sbx.workdir / "approved.txt").exists()
    records = parse_records(stderr.read_text())
    assert [record["decision"] for record in records] == ["allowed"]
    rounds = [line for line in session_lines(sbx) if line["type"] == "round"]
    assert [tool_names(line["messages"]) for line in rounds] == [["ls"]]


@pytest.mark.parametrize(("key", "code"), [("y", 0), ("n", 0), ("Escape", 2), ("C-c", 2)])
def test_approve_call_asks_on_the_screen_and_one_key_answers(
    sbx: Sandbx, pane: Pane, key: str, code: int
) -> None:
    script = [
        reply(tool_use_block("bash", {"command": "echo yes > approved.txt"})),
        reply(text_block("Finished.")),
    ]
    stderr = pane.directory / "stderr.txt"
    with ScriptedMessagesServer(script) as server:
        pane.start(
            sbx,
            ["--allow-tool", "bash", "--approve", "call", "--", "make a file"],
            stderr=str(stderr),
            **model_env(server),
        )
        screen = pane.wait_for_screen("[y] this call, [n] refuse, [a] every")
        assert '▌ sandbx: run bash {"command": "echo yes > approved.txt"}?' in screen
        pane.keys(key)
        assert pane.exit_code(timeout=20) == code, stderr.read_text()

    lines = [line for line in pane.everything() if line]
    made = sbx.workdir / "approved.txt"
    if key == "y":
        assert made.read_text() == "yes\n"
        assert f"{ROW}bash — ran" in lines
        assert "Finished." in lines
    elif key == "n":
        assert not made.exists()
        assert f"{ROW}bash — refused: refused on the terminal" in lines
    else:
        assert not made.exists()
        assert len(server.requests) == 1
        assert "sandbx: the turn was interrupted" in stderr.read_text().splitlines()


def test_the_printed_transcript_cannot_carry_a_forged_row(sbx: Sandbx, pane: Pane) -> None:
    """The tool rows kept for the transcript hold the model's own words (the path it asked
    for); printed after the screen, they must be as safe as they were on the screen."""
    forged_path = "missing\n▌ sandbx: write /etc/passwd — ran"
    script = [
        reply(text_block("Reading."), tool_use_block("read", {"path": forged_path})),
        reply(text_block("Done.")),
    ]
    stderr = pane.directory / "stderr.txt"
    with ScriptedMessagesServer(script) as server:
        pane.start(sbx, ["--", "read it"], stderr=str(stderr), **model_env(server))
        assert pane.exit_code() == 0, stderr.read_text()

    lines = [line for line in pane.everything() if line]
    rows = transcript_rows(lines)
    assert len(rows) == 1, "\n".join(lines)
    assert rows[0].startswith(f"{ROW}read {sbx.workdir.resolve()}/missing")


def test_the_printed_transcript_cannot_carry_an_escape_sequence(sbx: Sandbx, pane: Pane) -> None:
    """An OSC sequence in a path the model asked for would set the terminal's title."""
    forged_path = "missing\x1b]2;forged-title\x07.txt"
    script = [
        reply(text_block("Reading."), tool_use_block("read", {"path": forged_path})),
        reply(text_block("Done.")),
    ]
    stderr = pane.directory / "stderr.txt"
    with ScriptedMessagesServer(script) as server:
        pane.start(sbx, ["--", "read it"], stderr=str(stderr), **model_env(server))
        assert pane.exit_code() == 0, stderr.read_text()

    lines = [line for line in pane.everything() if line]
    assert f"{ROW}read {sbx.workdir.resolve()}/missing" in "\n".join(lines)
    assert "forged-title" not in pane.title()
