"""``python -m sandbx.testing --script FILE [--port N] [--record FILE]``: the scripted
Messages server as a process of its own, for tests that run sandbx as a user would.

It prints its URL as the first line of stdout, appends each request to the record file
as one JSON line, and serves until SIGTERM or SIGINT. It never listens beyond loopback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import signal
import sys

from sandbx.testing._exchange import RecordedRequest
from sandbx.testing._script import ScriptInvalid
from sandbx.testing._script_json import load_script
from sandbx.testing._server import ScriptedMessagesServer

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sandbx.testing",
        description="Serve a scripted Anthropic Messages API on 127.0.0.1.",
    )
    parser.add_argument("--script", required=True, help="a JSON list of script entries")
    parser.add_argument("--port", type=int, default=0, help="the port (default: any free one)")
    parser.add_argument("--record", help="append each request to this file, one JSON line each")
    arguments = parser.parse_args(argv)
    try:
        script = load_script(arguments.script)
    except (OSError, ScriptInvalid) as exc:
        parser.error(str(exc))
    # Blocked before any thread exists: every thread inherits the mask, so the signals
    # wait for sigwait() below instead of interrupting a handler mid-answer.
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    with contextlib.ExitStack() as stack:
        on_request = None
        if arguments.record:
            record = stack.enter_context(open(arguments.record, "a", encoding="utf-8"))

            def on_request(request: RecordedRequest) -> None:
                record.write(json.dumps(request.to_json(), ensure_ascii=False) + "\n")
                record.flush()  # another process reads it while the server runs

        server = ScriptedMessagesServer(script, port=arguments.port, on_request=on_request)
        try:
            stack.enter_context(server)
        except OSError as exc:
            sys.stderr.write(f"{parser.prog}: cannot listen on port {arguments.port}: {exc}\n")
            return 1
        sys.stdout.write(f"{server.url}\n")
        sys.stdout.flush()
        signal.sigwait(STOP_SIGNALS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
