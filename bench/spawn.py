"""What one sandboxed /bin/true costs, beside what it is measured against.

Prints the median wall time of: `sandbx sandbox-run -- /bin/true` (the whole
CLI), the same run as a library call (no interpreter start), bare /bin/true,
`python3 -c pass` with the interpreter sandbx runs on, and bwrap with an
equivalent policy when bwrap is installed. Then the two targets of issue 2:
library spawn <= bwrap, CLI <= interpreter start + 15 ms.

    .venv/bin/python bench/spawn.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sandbx.boundary import Exited, run_sandboxed
from sandbx.policy import Command, GrantFlags, derive_policy

CLI_BUDGET_MS = 15.0


def medians_ms(actions: dict[str, Callable[[], object]], runs: int) -> dict[str, float]:
    """Round-robin: each round runs every action once, so a noisy moment of the
    machine falls on all of them alike and the ratios stay meaningful."""
    samples: dict[str, list[float]] = {label: [] for label in actions}
    for round_number in range(runs + 3):
        for label, action in actions.items():
            started = time.perf_counter()
            action()
            if round_number >= 3:  # the first rounds warm caches
                samples[label].append(time.perf_counter() - started)
    return {label: statistics.median(values) * 1000 for label, values in samples.items()}


def run_quietly(argv: list[str], cwd: Path) -> Callable[[], object]:
    def action() -> object:
        completed = subprocess.run(
            argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
        )
        if completed.returncode != 0:
            msg = f"{argv[0]} exited {completed.returncode}"
            raise SystemExit(msg)
        return completed

    return action


def bwrap_argv(workdir: Path) -> list[str] | None:
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return None
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--clearenv"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for name in ("bin", "lib", "lib64", "sbin"):
        path = Path("/", name)
        if path.is_symlink():
            argv += ["--symlink", os.readlink(path), str(path)]
        elif path.exists():
            argv += ["--ro-bind", str(path), str(path)]
    argv += ["--bind", str(workdir), str(workdir), "--chdir", str(workdir), "--", "/bin/true"]
    return argv


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    interpreter = os.path.realpath(sys.executable)
    sandbx_cli = Path(sys.executable).with_name("sandbx")
    with tempfile.TemporaryDirectory(prefix="sandbx-bench-") as scratch:
        workdir = Path(scratch)
        command = Command(argv=("/bin/true",))
        policy = derive_policy(
            GrantFlags(), command, working_directory=str(workdir), environ=os.environ
        )
        os.chdir(workdir)

        def library_call() -> object:
            result = run_sandboxed(policy, command)
            if result.outcome != Exited(0):
                raise SystemExit(str(result.outcome))
            return result

        actions: dict[str, Callable[[], object]] = {
            "sandbx sandbox-run -- /bin/true": run_quietly(
                [str(sandbx_cli), "sandbox-run", "--", "/bin/true"], workdir
            ),
            "run_sandboxed() library call": library_call,
            "bare /bin/true": run_quietly(["/bin/true"], workdir),
            f"{interpreter} -c pass": run_quietly([interpreter, "-c", "pass"], workdir),
        }
        bwrap = bwrap_argv(workdir)
        if bwrap is not None:
            actions["bwrap, equivalent policy"] = run_quietly(bwrap, workdir)
        times = medians_ms(actions, runs)
    print(f"median of {runs} runs each, milliseconds")
    for label, value in times.items():
        print(f"  {value:8.2f}  {label}")
    cli = times["sandbx sandbox-run -- /bin/true"]
    library = times["run_sandboxed() library call"]
    start = times[f"{interpreter} -c pass"]
    print()
    print(f"CLI - interpreter start: {cli - start:6.2f} ms (target <= {CLI_BUDGET_MS:.0f} ms)")
    if "bwrap, equivalent policy" in times:
        bwrap_ms = times["bwrap, equivalent policy"]
        print(f"library / bwrap:         {library / bwrap_ms:6.2f}x (target <= 1.00x)")
    else:
        print("bwrap is not installed (apt-get install bubblewrap) — no comparison")


if __name__ == "__main__":
    main()
