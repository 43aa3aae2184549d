"""What a scripted server's handler threads share: the record of every request received
and the cursor into the script.

It hands out script entries strictly in order, one per call; it never decides whether a
request deserves one.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Mapping

from sandbx._value import value
from sandbx.testing._script import ScriptEntry


@value
class RecordedRequest:
    """One request as received: header names lower-cased, the body parsed (None if not JSON)."""

    method: str
    path: str
    headers: dict[str, str]
    body: object

    def to_json(self) -> dict[str, object]:
        return {
            "method": self.method,
            "path": self.path,
            "headers": self.headers,
            "body": self.body,
        }

    @classmethod
    def from_json(cls, recorded: Mapping[str, object]) -> RecordedRequest:
        headers = recorded["headers"]
        if not isinstance(headers, dict):
            raise TypeError("a recorded request's headers are a JSON object")
        return cls(
            method=str(recorded["method"]),
            path=str(recorded["path"]),
            headers={str(name): str(header) for name, header in headers.items()},
            body=recorded["body"],
        )


def load_recorded_requests(path: str) -> list[RecordedRequest]:
    """The requests a ``python -m sandbx.testing --record PATH`` server wrote, in order."""
    with open(path, encoding="utf-8") as record:
        return [RecordedRequest.from_json(json.loads(line)) for line in record if line.strip()]


class Exchange:
    """What the handler threads share: the script's cursor and the record of requests."""

    def __init__(
        self,
        script: tuple[ScriptEntry, ...],
        on_request: Callable[[RecordedRequest], None] | None,
    ) -> None:
        self.script = script
        self._on_request = on_request
        self._lock = threading.Lock()
        self._next_entry = 0
        self._requests: list[RecordedRequest] = []

    def record(self, request: RecordedRequest) -> int:
        """Record ``request``; its number, from 1, in arrival order."""
        with self._lock:
            self._requests.append(request)
            if self._on_request is not None:
                self._on_request(request)
            return len(self._requests)

    def take_next(self) -> tuple[int, ScriptEntry] | None:
        with self._lock:
            if self._next_entry >= len(self.script):
                return None
            index = self._next_entry
            self._next_entry += 1
            return index, self.script[index]

    @property
    def requests(self) -> tuple[RecordedRequest, ...]:
        with self._lock:
            return tuple(self._requests)

    @property
    def remaining(self) -> int:
        with self._lock:
            return len(self.script) - self._next_entry
