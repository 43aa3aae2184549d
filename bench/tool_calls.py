"""What one tool call adds inside a running agent, beside a bare bwrap run.

Starts the agent's tool box (its confined worker and its spawner, as agent-run
does), then prints the median time of a `bash` call running `true`, of a `read`
call, and of `bwrap` running `/bin/sh -c true` with an equivalent policy, when
bwrap is installed. Target of issue 4: a tool call costs no more than bwrap.

The spawner keeps two sandboxes prepared, made while the agent waits for the
model, so a call finds one ready: "a model round apart" leaves 20 ms (untimed)
before each call, far less than any model round; "back to back" times the
second of two calls made at once after such a pause, as when one reply asks
for two commands.

    .venv/bin/python bench/tool_calls.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.spawn import bwrap_argv
from sandbx import audit
from sandbx.policy import Command, GrantFlags, derive_policy
from sandbx.tools import ToolBox

BASH_APART = "bash tool call: true, a model round apart"
BASH_BACK_TO_BACK = "bash tool call: true, back to back"
MODEL_ROUND_SECONDS = 0.02


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    runs = parser.parse_args().runs
    with tempfile.TemporaryDirectory(prefix="sandbx-bench-") as scratch:
        workdir = Path(scratch)
        (workdir / "notes.txt").write_text("a line to read\n" * 20)
        os.chdir(workdir)
        policy = derive_policy(
            GrantFlags(),
            Command(argv=("/bin/sh",)),
            working_directory=str(workdir),
            environ=os.environ,
        )
        # Records go nowhere: the benchmark measures the call, not the terminal.
        sink = audit.StderrSink(os.open(os.devnull, os.O_WRONLY))
        tools = ToolBox.start(
            policy, working_directory=str(workdir), sink=sink, session=lambda: "-"
        )

        def bash_call() -> object:
            return tools.run("bash", {"command": "true"})

        actions: dict[str, Callable[[], object]] = {
            BASH_APART: bash_call,
            BASH_BACK_TO_BACK: bash_call,
            "read tool call": lambda: tools.run("read", {"path": "notes.txt"}),
        }
        bwrap = bwrap_argv(workdir)
        if bwrap is not None:
            argv = [*bwrap[:-1], "/bin/sh", "-c", "true"]
            actions["bwrap /bin/sh -c true"] = lambda: subprocess.run(argv, check=True)
        samples: dict[str, list[float]] = {label: [] for label in actions}
        for round_number in range(runs + 3):
            for label, action in actions.items():
                if label == BASH_APART:
                    time.sleep(MODEL_ROUND_SECONDS)
                elif label == BASH_BACK_TO_BACK:
                    time.sleep(MODEL_ROUND_SECONDS)  # the reply asking for both came after one
                    bash_call()
                started = time.perf_counter()
                action()
                if round_number >= 3:
                    samples[label].append(time.perf_counter() - started)
        tools.close()
    print(f"median of {runs} calls each, milliseconds")
    medians = {label: statistics.median(values) * 1000 for label, values in samples.items()}
    for label, value in medians.items():
        print(f"  {value:8.2f}  {label}")
    if "bwrap /bin/sh -c true" in medians:
        reference = medians["bwrap /bin/sh -c true"]
        print(f"\nbash call / bwrap: {medians[BASH_APART] / reference:5.2f}x (target <= 1.00x)")
        print(f"  back to back:     {medians[BASH_BACK_TO_BACK] / reference:5.2f}x")
        print(f"read call / bwrap: {medians['read tool call'] / reference:5.2f}x")


if __name__ == "__main__":
    main()
