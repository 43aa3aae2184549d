"""What the agent-run end-to-end tests share: running ``sandbx agent-run`` as a process
against a scripted Messages server, reading what the server received, and driving
``--approve call`` through a real pseudo-terminal.

Nothing here mocks sandbx: the CLI runs as its own process, its tools in the real
boundary, its model calls over loopback to ``sandbx.testing.ScriptedMessagesServer``.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from sandbx.testing import ScriptedMessagesServer, scripted_tool_use_id
from tests.support import SANDBX, Run, Sandbx, parse_records

# Distinctive, so a leak anywhere in sandbx's output is found by a plain substring search.
KEY = "sk-ant-test-3f9c2b7e-never-printed"
PROMPT = "what does this project do?"
DEFAULT_TOOLS = "find, grep, ls, read"
ALL_TOOLS = "bash, edit, find, grep, ls, read, write"
SECRET = "outside-secret-5a1d: nobody may read this\n"  # noqa: S105 - a marker, not a password


def agent_run(
    sbx: Sandbx,
    server: ScriptedMessagesServer,
    *flags: str,
    prompt: str = PROMPT,
    cwd: Path | None = None,
    timeout: float = 30,
    **env: str,
) -> Run:
    """``sandbx agent-run FLAGS -- PROMPT`` with the key set and the scripted server's URL."""
    environment = {"ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url, **env}
    return sbx.run("agent-run", *flags, "--", prompt, cwd=cwd, timeout=timeout, **environment)


def bodies(server: ScriptedMessagesServer) -> list[dict[str, object]]:
    """Every request body the server received, in order."""
    found = []
    for request in server.requests:
        assert isinstance(request.body, dict), request
        found.append(request.body)
    return found


def messages_of(body: dict[str, object]) -> list[dict[str, object]]:
    messages = body["messages"]
    assert isinstance(messages, list)
    return messages


def tool_result(server: ScriptedMessagesServer, entry: int, block: int) -> dict[str, object]:
    """The tool_result sandbx sent for block ``block`` of script entry ``entry``."""
    wanted = scripted_tool_use_id(entry, block)
    for body in bodies(server):
        for message in messages_of(body):
            content = message["content"]
            if message["role"] != "user" or not isinstance(content, list):
                continue
            for item in content:
                if item.get("type") == "tool_result" and item.get("tool_use_id") == wanted:
                    return item
    raise AssertionError(f"no tool_result for {wanted} in {bodies(server)}")


def call_lines(run: Run) -> list[str]:
    """sandbx's per-call lines: its own stderr lines after the approved-tools line."""
    return [line for line in run.messages if not line.startswith("sandbx: approved tools: ")]


def records_of(run: Run, decision: str) -> list[dict[str, object]]:
    return [record for record in run.records if record["decision"] == decision]


def assert_key_never_shown(run: Run) -> None:
    assert KEY not in run.stdout
    assert KEY not in run.stderr


# --- a file nobody may open --------------------------------------------------------


class OpenWatch:
    """A FIFO standing in for a file outside every grant: any open of it for reading,
    by anyone, completes the open a thread here is blocked in, and is noticed.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        os.mkfifo(path, 0o644)
        self._releasing = False
        self.opened_by_someone = False
        self._thread = threading.Thread(target=self._wait_for_reader, daemon=True)
        self._thread.start()

    def _wait_for_reader(self) -> None:
        fd = os.open(self.path, os.O_WRONLY)  # blocks until a reader opens the FIFO
        if not self._releasing:
            self.opened_by_someone = True
            with contextlib.suppress(OSError):
                os.write(fd, b"the FIFO was opened\n")
        os.close(fd)

    def stop(self) -> bool:
        """Release the thread; whether anything but this opened the FIFO."""
        self._releasing = True
        reader = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            self._thread.join(timeout=10)
        finally:
            os.close(reader)
        assert not self._thread.is_alive()
        return self.opened_by_someone


# --- a pseudo-terminal ------------------------------------------------------------

# sandbx itself becomes the controlling process of a fresh session on the pty, as
# under `setsid --ctty`: /dev/tty is the pty, and a hangup signals sandbx directly.
_AS_CONTROLLING_PROCESS = (
    "import fcntl, os, sys, termios\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "os.execv(sys.executable, [sys.executable, *sys.argv[1:]])\n"
)
# A session leader that outlives the terminal without passing the hangup on (a shell
# under nohup, a terminal multiplexer's server), with sandbx in its foreground group:
# the terminal goes away and sandbx learns of it only from the terminal itself.
_BEHIND_A_LEADER = (
    "import fcntl, signal, subprocess, sys, termios\n"
    "fcntl.ioctl(0, termios.TIOCSCTTY, 0)\n"
    "signal.signal(signal.SIGHUP, lambda number, frame: None)\n"
    "sys.exit(subprocess.call([sys.executable, *sys.argv[1:]], stdin=subprocess.DEVNULL))\n"
)


@dataclass
class TerminalRun:
    """``sandbx agent-run`` with a pty as its terminal and pipes as stdout and stderr."""

    process: subprocess.Popen[bytes]
    master: int | None
    shown: bytes = b""
    questions_answered: list[str] = field(default_factory=list)

    @property
    def terminal(self) -> str:
        """Everything written to the terminal so far, as text, line ends as ``\\n``."""
        return self.shown.decode("utf-8", "replace").replace("\r\n", "\n")

    def type_ahead(self, text: str) -> None:
        assert self.master is not None
        os.write(self.master, text.encode())

    def wait_for(self, marker: str, *, timeout: float = 30) -> None:
        """Read the terminal until ``marker`` has appeared ``1 + answered`` times."""
        assert self.master is not None
        wanted = marker.encode()
        deadline = time.monotonic() + timeout
        while self.shown.count(wanted) <= len(self.questions_answered):
            left = deadline - time.monotonic()
            assert left > 0, f"no {marker!r} on the terminal; it shows {self.terminal!r}"
            assert self.process.poll() is None or self._read_now(), (
                f"sandbx ended ({self.process.returncode}) before asking; "
                f"the terminal shows {self.terminal!r}"
            )
            readable, _, _ = select.select([self.master], [], [], min(left, 0.2))
            if readable:
                self._read_now()

    def answer(self, key: str, *, question: str = "? [y] this call, [n] refuse") -> None:
        self.wait_for(question)
        assert self.master is not None
        os.write(self.master, key.encode())
        self.questions_answered.append(key)

    def hang_up(self) -> None:
        """Close the terminal's master side: the terminal goes away under sandbx."""
        assert self.master is not None
        os.close(self.master)
        self.master = None

    def finish(self, *, timeout: float = 30) -> Run:
        try:
            stdout, stderr = self.process.communicate(timeout=timeout)
        finally:
            if self.process.poll() is None:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=10)
        if self.master is not None:
            while self._read_now():
                pass
            os.close(self.master)
            self.master = None
        text = stderr.decode("utf-8", "replace")
        return Run(
            returncode=self.process.returncode,
            stdout=stdout.decode("utf-8", "replace"),
            stderr=text,
            records=parse_records(text),
        )

    def questions(self) -> list[str]:
        """Each question asked, with the key sandbx took as its answer appended.

        A key that arrives before sandbx has turned echo off is echoed too; the last
        character is the one sandbx itself wrote back.
        """
        asked = []
        for line in self.terminal.splitlines():
            question, marker, answer = line.rpartition(" call: ")
            if "? [y] this call" in question and marker:
                asked.append(f"{question}{marker}{answer[-1:]}")
        return asked

    def _read_now(self) -> bool:
        """Read whatever the terminal holds now; False once nothing more can come."""
        assert self.master is not None
        readable, _, _ = select.select([self.master], [], [], 0)
        if not readable:
            return False
        try:
            data = os.read(self.master, 65536)
        except OSError:  # EIO: every slave side is closed
            return False
        self.shown += data
        return bool(data)


@contextlib.contextmanager
def on_a_terminal(
    sbx: Sandbx,
    server: ScriptedMessagesServer,
    *flags: str,
    prompt: str = PROMPT,
    behind_a_leader: bool = False,
) -> Iterator[TerminalRun]:
    """Start agent-run on a fresh pty; yields while it runs, and kills it if still running."""
    master, slave = os.openpty()
    launcher = _BEHIND_A_LEADER if behind_a_leader else _AS_CONTROLLING_PROCESS
    env = {**sbx.env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url}
    try:
        process = subprocess.Popen(
            [SANDBX[0], "-c", launcher, *SANDBX[1:], "agent-run", *flags, "--", prompt],
            cwd=sbx.workdir,
            env=env,
            stdin=slave,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    finally:
        os.close(slave)
    run = TerminalRun(process=process, master=master)
    try:
        yield run
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate(timeout=10)
        if run.master is not None:
            os.close(run.master)
            run.master = None


def without_a_terminal(
    sbx: Sandbx, server: ScriptedMessagesServer, *flags: str, prompt: str = PROMPT
) -> Run:
    """agent-run in a session of its own with no controlling terminal at all."""
    env = {**sbx.env, "ANTHROPIC_API_KEY": KEY, "ANTHROPIC_BASE_URL": server.url}
    completed = subprocess.run(
        [*SANDBX, "agent-run", *flags, "--", prompt],
        cwd=sbx.workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=30,
        start_new_session=True,
        check=False,
    )
    return Run(
        returncode=completed.returncode,
        stdout=completed.stdout,
        stderr=completed.stderr,
        records=parse_records(completed.stderr),
    )


__all__ = [
    "ALL_TOOLS",
    "DEFAULT_TOOLS",
    "KEY",
    "PROMPT",
    "SECRET",
    "OpenWatch",
    "TerminalRun",
    "agent_run",
    "assert_key_never_shown",
    "bodies",
    "call_lines",
    "messages_of",
    "on_a_terminal",
    "records_of",
    "tool_result",
    "without_a_terminal",
]
