"""Process lifetime and hardening through the real CLI: nothing the command starts outlives the
run, how it ended is relayed and recorded, and the command runs as PID 1 without a terminal.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shlex
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence

import pytest

from tests.support import SANDBX, Run, Sandbx, parse_records, running_as_root

pytestmark = pytest.mark.boundary

# A run that has not closed its pipes by then is a hang, whatever it was asked to do.
HANG = 10.0
# The --timeout of these runs: long enough for the test to see every sleep start on the host.
LIMIT = 1.5
# How long past --timeout a run may take to end: start-up, the kill, the namespace teardown.
SLACK = 3.0
# `sh` puts a background job's stdin on /dev/null and gives up on the job if it cannot open it.
BACKGROUND_JOBS = ("--allow-read", "/dev/null")


class Sleeps:
    """Unique ``sleep`` durations, so each test finds its own processes on the host."""

    def __init__(self) -> None:
        self._issued: list[str] = []

    def new(self) -> str:
        marker = f"30.{secrets.randbelow(10**9):09d}7"
        self._issued.append(marker)
        return marker

    def alive(self, marker: str) -> list[int]:
        """Host pids of the ``sleep`` processes carrying ``marker`` (sandbx's own argv excluded)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                    argv = cmdline.read().decode(errors="replace").split("\0")
            except OSError:
                continue  # it ended while we looked
            if os.path.basename(argv[0]) == "sleep" and marker in argv[1:]:
                found.append(int(entry))
        return found

    def wait_until_alive(self, process: subprocess.Popen[str], *markers: str) -> dict[str, int]:
        """The host pid of each marker's sleep, once every one of them runs."""
        deadline = time.monotonic() + HANG
        while time.monotonic() < deadline:
            pids = {marker: self.alive(marker) for marker in markers}
            if all(pids.values()):
                return {marker: found[0] for marker, found in pids.items()}
            if process.poll() is not None:
                break
            time.sleep(0.02)
        pytest.fail(f"the sleeps {markers} never ran together on the host")

    def kill_leftovers(self) -> None:
        for marker in self._issued:
            for pid in self.alive(marker):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


@pytest.fixture
def sleeps() -> Iterator[Sleeps]:
    issued = Sleeps()
    try:
        yield issued
    finally:
        issued.kill_leftovers()


def start(
    sbx: Sandbx, *command: str, flags: Sequence[str] = (), stdin: int | None = None
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*SANDBX, "sandbox-run", *flags, "--", *command],
        cwd=sbx.workdir,
        env=sbx.env,
        stdin=subprocess.DEVNULL if stdin is None else stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(process: subprocess.Popen[str], sleeps: Sleeps) -> Run:
    """Wait for sandbx to exit *and* for every holder of its stdout and stderr to let go."""
    try:
        stdout, stderr = process.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        sleeps.kill_leftovers()
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
        pytest.fail(f"sandbx or something it started held the pipes for over {HANG} s")
    return Run(process.returncode, stdout, stderr, parse_records(stderr))


def one_run(run: Run, ending: str) -> dict[str, object]:
    """The run's records are exactly `spawned`, then ``ending``, both of the same spawn."""
    assert [record["decision"] for record in run.records] == ["spawned", ending], run.stderr
    spawned, ended = run.records
    assert spawned["spawn"] == ended["spawn"], run.records
    return ended


def timed_out(run: Run) -> None:
    assert run.returncode == 1, run.stderr
    ended = one_run(run, "failed")
    assert ended["reason"] == "timeout", ended


# --- --timeout -----------------------------------------------------------------------------------


def test_timeout_kills_the_command_at_the_limit_not_at_its_own_end(
    sbx: Sandbx, sleeps: Sleeps
) -> None:
    marker = sleeps.new()
    began = time.monotonic()
    process = start(sbx, "sleep", marker, flags=["--timeout", str(LIMIT)])
    sleeps.wait_until_alive(process, marker)
    run = finish(process, sleeps)
    elapsed = time.monotonic() - began
    timed_out(run)
    assert LIMIT <= elapsed < LIMIT + SLACK, elapsed
    assert sleeps.alive(marker) == []


def test_timeout_kills_a_background_grandchild_that_holds_the_pipes(
    sbx: Sandbx, sleeps: Sleeps
) -> None:
    background, foreground = sleeps.new(), sleeps.new()
    began = time.monotonic()
    process = start(
        sbx,
        "sh",
        "-c",
        f"sleep {background} & sleep {foreground}",
        flags=[*BACKGROUND_JOBS, "--timeout", str(LIMIT)],
    )
    sleeps.wait_until_alive(process, background, foreground)
    run = finish(process, sleeps)
    assert time.monotonic() - began < LIMIT + SLACK
    timed_out(run)
    assert sleeps.alive(background) == []
    assert sleeps.alive(foreground) == []


def test_timeout_kills_a_setsid_grandchild(sbx: Sandbx, sleeps: Sleeps) -> None:
    escapee, foreground = sleeps.new(), sleeps.new()
    began = time.monotonic()
    process = start(
        sbx,
        "sh",
        "-c",
        f"setsid sh -c 'sleep {escapee}' & sleep {foreground}",
        flags=[*BACKGROUND_JOBS, "--timeout", str(LIMIT)],
    )
    pids = sleeps.wait_until_alive(process, escapee, foreground)
    assert os.getsid(pids[escapee]) != os.getsid(_sandbox_init_of(pids[escapee]))
    run = finish(process, sleeps)
    assert time.monotonic() - began < LIMIT + SLACK
    timed_out(run)
    assert sleeps.alive(escapee) == []


def test_timeout_kills_a_double_forked_daemon(sbx: Sandbx, sleeps: Sleeps) -> None:
    daemon, foreground = sleeps.new(), sleeps.new()
    process = start(
        sbx,
        "sh",
        "-c",
        f"(setsid sh -c 'sleep {daemon} &' &); sleep {foreground}",
        flags=[*BACKGROUND_JOBS, "--timeout", str(LIMIT)],
    )
    pids = sleeps.wait_until_alive(process, daemon, foreground)
    # A daemon: once its parents are gone, it is handed to the sandbox's PID 1.
    _wait_for_reparenting(pids[daemon])
    assert os.getsid(pids[daemon]) != os.getsid(_sandbox_init_of(pids[daemon]))
    run = finish(process, sleeps)
    timed_out(run)
    assert sleeps.alive(daemon) == []


# --- no timeout: the end of the command is the end of the run ------------------------------------


def test_a_background_process_dies_when_the_command_exits(sbx: Sandbx, sleeps: Sleeps) -> None:
    marker = sleeps.new()
    process = start(
        sbx,
        "sh",
        "-c",
        f"sleep {marker} & read _; echo leaving",
        flags=BACKGROUND_JOBS,
        stdin=subprocess.PIPE,
    )
    sleeps.wait_until_alive(process, marker)
    # Closing stdin lets the command end while its background sleep still has 30 s to go.
    run = finish(process, sleeps)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "leaving\n"
    assert one_run(run, "exited")["code"] == 0
    assert sleeps.alive(marker) == []


def test_a_setsid_process_dies_when_the_command_exits(sbx: Sandbx, sleeps: Sleeps) -> None:
    marker = sleeps.new()
    process = start(
        sbx,
        "sh",
        "-c",
        f"setsid sh -c 'sleep {marker}' & read _; echo leaving",
        flags=BACKGROUND_JOBS,
        stdin=subprocess.PIPE,
    )
    pids = sleeps.wait_until_alive(process, marker)
    assert os.getsid(pids[marker]) != os.getsid(_sandbox_init_of(pids[marker]))
    run = finish(process, sleeps)
    assert run.returncode == 0, run.stderr
    assert one_run(run, "exited")["code"] == 0
    assert sleeps.alive(marker) == []


# --- exit codes ----------------------------------------------------------------------------------


def test_the_commands_exit_code_is_relayed(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "exit 7", timeout=HANG)
    assert run.returncode == 7, run.stderr
    assert one_run(run, "exited")["code"] == 7


def test_a_command_killed_by_a_fault_exits_128_plus_the_signal(sbx: Sandbx) -> None:
    # A fault's signal is forced on PID 1 too (its default action cannot be declined).
    run = sbx.sandbox_run("python3", "-c", "import ctypes; ctypes.string_at(0)", timeout=HANG)
    assert run.returncode == 128 + signal.SIGSEGV, run.stderr
    assert one_run(run, "exited")["code"] == 128 + signal.SIGSEGV


def test_a_command_killed_from_the_host_exits_128_plus_the_signal(
    sbx: Sandbx, sleeps: Sleeps
) -> None:
    # pid_namespaces(7): SIGKILL sent from an ancestor namespace is delivered to PID 1.
    marker = sleeps.new()
    process = start(sbx, "sleep", marker)
    pids = sleeps.wait_until_alive(process, marker)
    os.kill(pids[marker], signal.SIGKILL)
    run = finish(process, sleeps)
    assert run.returncode == 128 + signal.SIGKILL, run.stderr
    assert one_run(run, "exited")["code"] == 128 + signal.SIGKILL


def test_the_command_as_pid_1_survives_a_kill_it_sends_itself(sbx: Sandbx) -> None:
    # pid_namespaces(7): PID 1 gets from its own namespace only signals it handles; not SIGKILL.
    run = sbx.sandbox_run("sh", "-c", "kill -KILL $$; echo survived", timeout=HANG)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "survived\n"
    assert one_run(run, "exited")["code"] == 0


# --- interrupts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "signal_number",
    [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT],
    ids=["INT", "TERM", "HUP", "QUIT"],
)
def test_a_signal_to_sandbx_ends_the_run_and_everything_in_it(
    sbx: Sandbx, sleeps: Sleeps, signal_number: signal.Signals
) -> None:
    background, foreground = sleeps.new(), sleeps.new()
    process = start(
        sbx, "sh", "-c", f"sleep {background} & sleep {foreground}", flags=BACKGROUND_JOBS
    )
    sleeps.wait_until_alive(process, background, foreground)
    began = time.monotonic()
    process.send_signal(signal_number)
    run = finish(process, sleeps)
    assert time.monotonic() - began < SLACK
    assert run.returncode == 128 + signal_number, run.stderr
    ended = one_run(run, "failed")
    assert ended["reason"] == "interrupted", ended
    assert sleeps.alive(background) == []
    assert sleeps.alive(foreground) == []


# --- what the command is, and what it inherits ---------------------------------------------------


def test_the_command_is_pid_1(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "echo $$", timeout=HANG)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "1\n"
    one_run(run, "exited")


def test_the_command_cannot_see_a_host_process(sbx: Sandbx) -> None:
    itself = sbx.sandbox_run("sh", "-c", "kill -0 1", timeout=HANG)
    assert itself.returncode == 0, itself.stderr  # the positive control: kill -0 works in there
    one_run(itself, "exited")
    host = sbx.sandbox_run("sh", "-c", f"kill -0 {os.getpid()}", timeout=HANG)
    assert host.returncode != 0
    assert "No such process" in host.stderr
    assert one_run(host, "exited")["code"] == host.returncode


def test_the_command_runs_with_no_new_privs(sbx: Sandbx) -> None:
    run = sbx.sandbox_run(
        "grep", "NoNewPrivs", "/proc/self/status", flags=["--allow-read", "/proc"], timeout=HANG
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout == "NoNewPrivs:\t1\n"
    one_run(run, "exited")


def test_the_command_cannot_dump_core(sbx: Sandbx) -> None:
    run = sbx.sandbox_run("sh", "-c", "ulimit -c; ulimit -H -c", timeout=HANG)
    assert run.returncode == 0, run.stderr
    assert run.stdout == "0\n0\n"  # soft and hard: the command cannot raise it again
    one_run(run, "exited")


def test_the_command_has_no_controlling_terminal(sbx: Sandbx) -> None:
    script = shutil.which("script", path=sbx.env["PATH"])
    if script is None:
        pytest.skip("util-linux `script` is missing: no pty to give sandbx a controlling terminal")
    opens_tty = "exec 3</dev/tty && echo opened"
    # The positive control: under the same pty, outside sandbx, the open works.
    control = _under_a_pty(sbx, script, ["sh", "-c", opens_tty])
    assert control.returncode == 0, control.stdout
    assert control.stdout == "opened\n"
    # /dev/tty granted, so Landlock lets the open through to the tty layer, which finds no
    # controlling terminal (ENXIO): the command was put in a session of its own.
    sandboxed = _under_a_pty(
        sbx,
        script,
        [*SANDBX, "sandbox-run", "--allow-write", "/dev/tty", "--", "sh", "-c", opens_tty],
    )
    # On a pty, the command's output and sandbx's records share one stream.
    run = Run(sandboxed.returncode, "", sandboxed.stdout, parse_records(sandboxed.stdout))
    output = [line for line in sandboxed.stdout.splitlines() if "sandbx::audit" not in line]
    assert len(output) == 1, run.stderr
    assert "/dev/tty" in output[0], run.stderr
    assert output[0].endswith("No such device or address"), run.stderr  # ENXIO, not EACCES
    assert run.returncode == 2, run.stderr
    assert one_run(run, "exited")["code"] == 2


# --- sandbx itself -------------------------------------------------------------------------------


@pytest.mark.skipif(running_as_root(), reason="a root process owns its /proc files either way")
def test_sandbx_is_not_dumpable_while_the_command_runs(sbx: Sandbx, sleeps: Sleeps) -> None:
    # A non-dumpable process's /proc/PID files belong to root, not to the user running it.
    marker = sleeps.new()
    process = start(sbx, "sleep", marker)
    try:
        sleeps.wait_until_alive(process, marker)
        owner = os.stat(f"/proc/{process.pid}/environ").st_uid
    finally:
        process.kill()
        finish(process, sleeps)
    assert owner == 0, "sandbx's /proc files belong to its user: it is dumpable (ptrace-able)"


def test_the_command_is_a_direct_child_of_sandbx_with_no_interpreter_between(
    sbx: Sandbx, sleeps: Sleeps
) -> None:
    marker = sleeps.new()
    process = start(sbx, "sleep", marker)
    try:
        pids = sleeps.wait_until_alive(process, marker)
        parent = _parent_of(pids[marker])
    finally:
        process.kill()
        finish(process, sleeps)
    assert parent == process.pid


# --- helpers -------------------------------------------------------------------------------------


def _status_field(pid: int, name: str) -> str:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(f"{name}:"):
                return line.split(":", 1)[1].strip()
    raise AssertionError(f"/proc/{pid}/status has no {name}")


def _parent_of(pid: int) -> int:
    return int(_status_field(pid, "PPid"))


def _namespace_pid(pid: int) -> int:
    """The pid a process has in its own, innermost pid namespace."""
    return int(_status_field(pid, "NSpid").split()[-1])


def _wait_for_reparenting(pid: int) -> None:
    deadline = time.monotonic() + HANG
    while _namespace_pid(_parent_of(pid)) != 1:
        assert time.monotonic() < deadline, f"{pid} was never handed to the sandbox's PID 1"
        time.sleep(0.02)


def _sandbox_init_of(pid: int) -> int:
    """The host pid of the PID 1 of the sandbox that ``pid`` runs in."""
    while _namespace_pid(pid) != 1:
        pid = _parent_of(pid)
    return pid


def _under_a_pty(sbx: Sandbx, script: str, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as a session leader with a fresh pty as its controlling terminal."""
    completed = subprocess.run(
        [script, "--quiet", "--return", "--command", shlex.join(argv), "/dev/null"],
        cwd=sbx.workdir,
        env=sbx.env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG,
        check=False,
    )
    completed.stdout = completed.stdout.replace("\r\n", "\n")
    return completed
