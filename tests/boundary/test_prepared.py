"""A prepared sandbox (the spawner's next call) is confined before its command arrives.

It runs the command it is sent later under the same boundary as ``run_sandboxed``,
refuses what that refuses, reports a failure of its preparation as the call's outcome,
and leaves no process behind when it is discarded or its owner dies.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from sandbx.boundary import Exited, Failed, FailureReason, RunResult, Spawner
from sandbx.boundary._spawn import PreparedSandbox
from sandbx.policy import Command, GrantFlags, Policy, derive_policy

pytestmark = pytest.mark.boundary

LIMIT = 64 * 1024
KEPT_READY = 2  # the spawner keeps this many sandboxes prepared


def _policy(tmp_path: Path, *, write: tuple[str, ...] = (), read: tuple[str, ...] = ()) -> Policy:
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    project = tmp_path / "project"  # the default grant when no path is granted
    project.mkdir(exist_ok=True)
    return derive_policy(
        GrantFlags(write=write, read=read),
        Command(argv=("/bin/sh",)),
        working_directory=str(project),
        environ={"PATH": "/usr/bin:/bin", "HOME": str(home)},
    )


def _sh(prepared: PreparedSandbox, script: str, timeout: float = 10) -> RunResult:
    return prepared.run(("/bin/sh", "-c", script), timeout_seconds=timeout, output_limit=LIMIT)


def _children() -> list[int]:
    found: list[int] = []
    for task in os.listdir("/proc/self/task"):
        found += [int(pid) for pid in Path(f"/proc/self/task/{task}/children").read_text().split()]
    return found


def test_the_command_sent_later_runs_as_pid_1_and_writes_inside_its_grant(
    tmp_path: Path,
) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    prepared = PreparedSandbox(_policy(tmp_path, write=(str(granted),)))
    time.sleep(0.05)  # the child confines itself and waits, as between two model rounds
    result = _sh(prepared, f"echo $$; echo ran > {granted}/marker.txt")
    assert result.outcome == Exited(0), result
    assert result.output == b"1\n"
    assert (granted / "marker.txt").read_text() == "ran\n"


def test_a_write_outside_the_grants_is_refused_and_the_host_file_unchanged(
    tmp_path: Path,
) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("original\n")
    prepared = PreparedSandbox(_policy(tmp_path, write=(str(granted),)))
    result = _sh(prepared, f"echo changed > {outside}")
    assert result.outcome != Exited(0), result
    assert outside.read_text() == "original\n"
    control = PreparedSandbox(_policy(tmp_path, write=(str(granted),)))
    assert _sh(control, f"echo changed > {granted}/inside.txt").outcome == Exited(0)
    assert (granted / "inside.txt").read_text() == "changed\n"


def test_it_runs_under_seccomp_and_no_new_privileges_with_no_capability(tmp_path: Path) -> None:
    prepared = PreparedSandbox(_policy(tmp_path, read=("/proc",)))
    result = _sh(prepared, "grep -E '^(NoNewPrivs|Seccomp|CapEff|CapBnd):' /proc/self/status")
    assert result.outcome == Exited(0), result
    fields = dict(line.split(":\t") for line in result.output.decode().splitlines())
    assert fields == {
        "NoNewPrivs": "1",
        "Seccomp": "2",
        "CapEff": "0000000000000000",
        "CapBnd": "0000000000000000",
    }


def test_a_command_longer_than_a_pipe_holds_arrives_whole(tmp_path: Path) -> None:
    padding = "x" * (100 * 1024)
    prepared = PreparedSandbox(_policy(tmp_path))
    result = _sh(prepared, f": {padding}; echo done")
    assert result.outcome == Exited(0), result
    assert result.output == b"done\n"


def test_a_word_holding_a_nul_is_refused_and_nothing_runs(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    prepared = PreparedSandbox(_policy(tmp_path))
    result = prepared.run(
        ("/bin/sh", "-c", f"echo ran > {marker}", "\0"), timeout_seconds=10, output_limit=LIMIT
    )
    assert isinstance(result.outcome, Failed), result
    assert result.outcome.reason is FailureReason.EXEC_FAILED
    assert not marker.exists()
    assert _children() == []


def test_the_timeout_counts_from_the_command_not_from_the_preparation(tmp_path: Path) -> None:
    prepared = PreparedSandbox(_policy(tmp_path))
    time.sleep(0.6)
    result = _sh(prepared, "sleep 0.3; echo finished", timeout=0.5)
    assert result.outcome == Exited(0), result
    slow = PreparedSandbox(_policy(tmp_path))
    result = _sh(slow, "sleep 5; echo finished", timeout=0.5)
    assert isinstance(result.outcome, Failed), result
    assert result.outcome.reason is FailureReason.TIMEOUT
    assert result.output == b""


def test_a_grant_replaced_before_preparation_is_the_calls_refusal(tmp_path: Path) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    policy = _policy(tmp_path, write=(str(granted),))
    granted.rename(tmp_path / "moved")
    granted.mkdir()
    prepared = PreparedSandbox(policy)
    result = _sh(prepared, f"echo ran > {granted}/marker.txt")
    assert isinstance(result.outcome, Failed), result
    assert result.outcome.reason is FailureReason.GRANT_REPLACED
    assert not (granted / "marker.txt").exists()


def test_a_discarded_sandbox_leaves_no_process(tmp_path: Path) -> None:
    prepared = PreparedSandbox(_policy(tmp_path))
    assert len(_children()) == 1
    prepared.discard()
    assert _children() == []


def test_a_signal_to_the_idle_spawner_leaves_it_serving(tmp_path: Path) -> None:
    spawner = Spawner.start(_policy(tmp_path))
    try:
        time.sleep(0.1)
        os.kill(spawner_pid(spawner), signal.SIGINT)
        time.sleep(0.1)
        result = spawner.run(
            ("/bin/sh", "-c", "echo alive"), timeout_seconds=10, output_limit=LIMIT
        )
        assert result.outcome == Exited(0), result
        assert result.output == b"alive\n"
    finally:
        spawner.close()


def test_an_interrupt_during_a_call_kills_the_command_and_says_so(tmp_path: Path) -> None:
    marker = tmp_path / "marker.txt"
    spawner = Spawner.start(_policy(tmp_path))
    interrupter = threading.Timer(0.3, spawner.interrupt)
    try:
        interrupter.start()
        started = time.monotonic()
        result = spawner.run(
            ("/bin/sh", "-c", f"sleep 5; echo late > {marker}"),
            timeout_seconds=30,
            output_limit=LIMIT,
        )
        assert time.monotonic() - started < 4
        assert isinstance(result.outcome, Failed), result
        assert result.outcome.reason is FailureReason.INTERRUPTED
        assert result.outcome.signal_number == signal.SIGINT
        time.sleep(0.2)
        assert not marker.exists()
        control = spawner.run(
            ("/bin/sh", "-c", "echo next"), timeout_seconds=10, output_limit=LIMIT
        )
        assert control.output == b"next\n"
    finally:
        interrupter.join()
        spawner.close()


def test_the_waiting_children_die_with_their_spawner(tmp_path: Path) -> None:
    spawner = Spawner.start(_policy(tmp_path))
    pid = spawner_pid(spawner)
    waiting = _wait_for_children_of(pid)
    assert len(waiting) == KEPT_READY
    os.kill(pid, signal.SIGKILL)
    spawner.close()
    deadline = time.monotonic() + 5
    while any(Path(f"/proc/{child}").exists() for child in waiting):
        assert time.monotonic() < deadline, "a prepared sandbox outlived its spawner"
        time.sleep(0.01)


def spawner_pid(spawner: Spawner) -> int:
    return spawner._helper.pid


def _wait_for_children_of(pid: int, count: int = KEPT_READY) -> list[int]:
    deadline = time.monotonic() + 5
    children: list[str] = []
    while time.monotonic() < deadline:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        if len(children) >= count:
            break
        time.sleep(0.01)
    return [int(child) for child in children]


def test_a_spawner_not_expecting_commands_keeps_no_child_and_still_runs_one(
    tmp_path: Path,
) -> None:
    spawner = Spawner.start(_policy(tmp_path), prepare_ahead=False)
    try:
        time.sleep(0.2)
        pid = spawner_pid(spawner)
        assert Path(f"/proc/{pid}/task/{pid}/children").read_text().split() == []
        result = spawner.run(("/bin/sh", "-c", "echo $$"), timeout_seconds=10, output_limit=LIMIT)
        assert result.outcome == Exited(0), result
        assert result.output == b"1\n"
        assert Path(f"/proc/{pid}/task/{pid}/children").read_text().split() == []
    finally:
        spawner.close()


def test_a_signal_to_the_waiting_sandbox_does_not_end_it(tmp_path: Path) -> None:
    # Until its command comes the child ignores what a terminal sends: a ctrl-c
    # meant for the agent must not cost the next call its sandbox.
    spawner = Spawner.start(_policy(tmp_path))
    try:
        waiting = _wait_for_children_of(spawner_pid(spawner))
        time.sleep(0.2)
        for child in waiting:
            os.kill(child, signal.SIGINT)
            os.kill(child, signal.SIGTERM)
        time.sleep(0.1)
        assert all(Path(f"/proc/{child}").exists() for child in waiting)
        result = spawner.run(("/bin/sh", "-c", "echo $$"), timeout_seconds=10, output_limit=LIMIT)
        assert result.outcome == Exited(0), result
        assert result.output == b"1\n"
    finally:
        spawner.close()


def test_the_command_starts_with_no_signal_ignored(tmp_path: Path) -> None:
    # Python ignores SIGPIPE and SIGXFSZ, the waiting child four more; an ignored
    # signal would survive execve, so each is back to its default by then.
    prepared = PreparedSandbox(_policy(tmp_path, read=("/proc",)))
    result = _sh(prepared, "grep '^SigIgn:' /proc/self/status")
    assert result.output == b"SigIgn:\t0000000000000000\n", result
    control = PreparedSandbox(_policy(tmp_path, read=("/proc",)))
    shown = _sh(control, "trap '' INT; grep '^SigIgn:' /proc/self/status")
    assert shown.output == b"SigIgn:\t0000000000000002\n", shown


def test_a_grant_replaced_while_a_sandbox_waits_refuses_the_call_as_a_new_one_would(
    tmp_path: Path,
) -> None:
    granted = tmp_path / "granted"
    granted.mkdir()
    spawner = Spawner.start(_policy(tmp_path, write=(str(granted),)))
    try:
        first = spawner.run(
            ("/bin/sh", "-c", f"echo first > {granted}/first.txt"),
            timeout_seconds=10,
            output_limit=LIMIT,
        )
        assert first.outcome == Exited(0), first
        assert (granted / "first.txt").read_text() == "first\n"
        _wait_for_children_of(spawner_pid(spawner))
        time.sleep(0.1)  # the next sandbox holds the directory by its mount now
        granted.rename(tmp_path / "old")
        granted.mkdir()
        result = spawner.run(
            ("/bin/sh", "-c", f"echo ran > {granted}/marker.txt"),
            timeout_seconds=10,
            output_limit=LIMIT,
        )
        assert isinstance(result.outcome, Failed), result
        assert result.outcome.reason is FailureReason.GRANT_REPLACED
        assert not (granted / "marker.txt").exists()
        assert not (tmp_path / "old" / "marker.txt").exists()
    finally:
        spawner.close()


def test_two_commands_asked_at_once_each_find_a_sandbox_ready(tmp_path: Path) -> None:
    spawner = Spawner.start(_policy(tmp_path))
    try:
        pid = spawner_pid(spawner)
        assert len(_wait_for_children_of(pid)) == KEPT_READY
        time.sleep(0.2)  # both confined and waiting
        for word in ("first", "second"):
            result = spawner.run(
                ("/bin/sh", "-c", f"echo {word} $$"), timeout_seconds=10, output_limit=LIMIT
            )
            assert result.output == f"{word} 1\n".encode(), result
        # Idle again, the spawner prepares as many as it keeps.
        assert len(_wait_for_children_of(pid)) == KEPT_READY
    finally:
        spawner.close()
