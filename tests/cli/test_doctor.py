"""`sandbx doctor` says what this host enforces; its exit code says whether sandbox-run works."""

import os

import pytest

from sandbx.boundary import _landlock as landlock
from tests.support import Sandbx

pytestmark = pytest.mark.boundary


def test_doctor_reports_the_kernel_and_landlock_abi_and_exits_zero_where_runs_work(
    sbx: Sandbx,
) -> None:
    run = sbx.run("doctor")
    assert run.returncode == 0, run.stdout + run.stderr
    assert f"Linux {os.uname().release}" in run.stdout
    assert f"Landlock: ABI {landlock.abi_version()}" in run.stdout
    assert "runs       the default policy (/bin/true, end to end)" in run.stdout
    for probe in (
        "unprivileged user namespaces",
        "mount inside a user namespace",
        "seccomp filters",
        "apparmor_restrict_unprivileged_userns",
        "cgroup v2 delegation",
    ):
        assert probe in run.stdout


def test_doctor_agrees_with_a_real_run(sbx: Sandbx) -> None:
    doctor = sbx.run("doctor")
    real = sbx.sandbox_run("/bin/true")
    assert (doctor.returncode == 0) == (real.returncode == 0)


def test_doctor_takes_no_arguments(sbx: Sandbx) -> None:
    run = sbx.run("doctor", "extra")
    assert run.returncode == 64
    assert run.messages == ["sandbx: sandbx doctor: takes no arguments — run `sandbx doctor`"]
