"""The sandbox-run start path stays light: no model SDK, UI, HTTP client or event loop."""

import subprocess
import sys

HEAVY = ("anthropic", "textual", "httpx", "requests", "urllib3", "http.client", "asyncio", "ssl")


def test_sandbox_run_imports_no_sdk_ui_or_http_client() -> None:
    probe = (
        "import sys, sandbx.cli, sandbx.cli._sandbox_run, sandbx.boundary, sandbx.audit;"
        "print('\\n'.join(sorted(sys.modules)))"
    )
    loaded = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout.split()
    assert [name for name in loaded if name.split(".")[0] in HEAVY or name in HEAVY] == []
