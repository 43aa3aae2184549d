"""The sandbox-run start path stays light: no model SDK, UI, HTTP client or event loop,
and none of the standard modules whose import alone costs a start milliseconds."""

import subprocess
import sys
from pathlib import Path

import sandbx

HEAVY = ("anthropic", "textual", "httpx", "requests", "urllib3", "http.client", "asyncio", "ssl")
# enum and signal (which builds enums) cost about 4 ms, collections and
# importlib about 1.5 ms more; argparse, re, typing and dataclasses were
# replaced by sandbx's own small modules for the same reason.
SLOW_STANDARD = (
    "enum",
    "signal",
    "collections",
    "functools",
    "importlib",
    "argparse",
    "re",
    "typing",
    "dataclasses",
)


def test_sandbox_run_imports_no_sdk_ui_or_http_client() -> None:
    probe = (
        "import sys, sandbx.cli, sandbx.cli._sandbox_run, sandbx.boundary, sandbx.audit;"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [name for name in loaded if name.split(".")[0] in HEAVY or name in HEAVY] == []


def test_sandbox_run_imports_none_of_the_slow_standard_modules() -> None:
    # -S: without site, whose .pth hooks import what they like before sandbx runs.
    package_root = str(Path(sandbx.__file__).parents[1])
    probe = (
        f"import sys; sys.path.insert(0, {package_root!r});"
        "import sandbx.cli, sandbx.cli._sandbox_run, sandbx.boundary, sandbx.audit;"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-S", "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [name for name in loaded if name.split(".")[0] in SLOW_STANDARD] == []
