"""The scripted Messages server, talked to as a client would: http.client on loopback, the
event stream parsed here by hand, nothing mocked.

It is test equipment the rest of the suite trusts, so its wire protocol, its errors,
its validation and its command-line form are proven here.
"""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from sandbx.testing import (
    ScriptedMessagesServer,
    ScriptInvalid,
    StopReason,
    Usage,
    connection_cut,
    error_reply,
    load_recorded_requests,
    parse_script,
    reply,
    script_to_json,
    scripted_tool_use_id,
    stream_error,
    text_block,
    thinking_block,
    tool_use_block,
)

MODEL = "claude-scripted-test"
LONG_TEXT = "The quick brown fox jumps over the lazy dog, twice: the quick brown fox."
TOOL_INPUT = {"path": "src/main.py", "lines": [1, 40], "follow": True, "note": "ünïcode ✓"}


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    complete: bool

    def json(self) -> dict[str, object]:
        parsed: dict[str, object] = json.loads(self.body)
        return parsed

    def events(self) -> list[tuple[str, dict[str, object]]]:
        return parse_events(self.body)


def parse_events(stream: bytes) -> list[tuple[str, dict[str, object]]]:
    """Each server-sent event as (name, data); every frame must be exactly two lines."""
    events = []
    for frame in stream.decode().split("\n\n"):
        if not frame:
            continue
        event_line, data_line = frame.split("\n")
        assert event_line.startswith("event: ")
        assert data_line.startswith("data: ")
        name = event_line.removeprefix("event: ")
        data = json.loads(data_line.removeprefix("data: "))
        assert data["type"] == name
        events.append((name, data))
    return events


def body_of(
    messages: list[dict[str, object]] | None = None, *, stream: bool = True, **fields: object
) -> dict[str, object]:
    return {
        "model": MODEL,
        "max_tokens": 1024,
        "messages": messages or [{"role": "user", "content": "hello"}],
        "stream": stream,
        **fields,
    }


def send(
    server: ScriptedMessagesServer,
    body: object,
    *,
    method: str = "POST",
    path: str = "/v1/messages",
    headers: dict[str, str] | None = None,
    connection: http.client.HTTPConnection | None = None,
) -> Answer:
    own = connection is None
    connection = connection or http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request(
            method,
            path,
            body=json.dumps(body).encode(),
            headers={"content-type": "application/json", **(headers or {})},
        )
        response = connection.getresponse()
        try:
            data, complete = response.read(), True
        except http.client.IncompleteRead as exc:
            data, complete = exc.partial, False
        answer_headers = {name.lower(): value for name, value in response.getheaders()}
        return Answer(response.status, answer_headers, data, complete)
    finally:
        if own:
            connection.close()


def deltas_of(events: list[tuple[str, dict[str, object]]], index: int) -> list[dict[str, object]]:
    return [
        data["delta"]  # type: ignore[misc]
        for name, data in events
        if name == "content_block_delta" and data["index"] == index
    ]


# --- streaming ------------------------------------------------------------------------------


def test_streamed_text_arrives_in_several_deltas_that_reassemble_to_the_scripted_text() -> None:
    with ScriptedMessagesServer([reply(text_block(LONG_TEXT))]) as server:
        answer = send(server, body_of())
    deltas = deltas_of(answer.events(), 0)
    assert len(deltas) > 2
    assert {delta["type"] for delta in deltas} == {"text_delta"}
    assert "".join(str(delta["text"]) for delta in deltas) == LONG_TEXT


def test_a_stream_is_served_as_text_event_stream_in_chunks() -> None:
    with ScriptedMessagesServer([reply(text_block("hi"))]) as server:
        answer = send(server, body_of())
    assert answer.status == 200
    assert answer.headers["content-type"].startswith("text/event-stream")
    assert answer.headers["transfer-encoding"] == "chunked"
    assert answer.headers["request-id"].startswith("req_")
    assert answer.complete


def test_a_stream_opens_with_message_start_echoing_the_model_and_ends_with_message_stop() -> None:
    usage = Usage(input_tokens=321, output_tokens=45)
    with ScriptedMessagesServer([reply(text_block("hi"), usage=usage)]) as server:
        events = send(server, body_of()).events()
    name, start = events[0]
    assert name == "message_start"
    message = start["message"]
    assert isinstance(message, dict)
    assert str(message["id"]).startswith("msg_")
    assert {key: message[key] for key in message if key != "id"} == {
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 321, "output_tokens": 1},
    }
    assert events[-1] == ("message_stop", {"type": "message_stop"})
    assert ("ping", {"type": "ping"}) in events


def test_tool_use_input_arrives_as_partial_json_pieces_that_reassemble_to_the_input() -> None:
    with ScriptedMessagesServer([reply(tool_use_block("read", TOOL_INPUT))]) as server:
        events = send(server, body_of()).events()
    deltas = deltas_of(events, 0)
    assert len(deltas) > 2
    assert {delta["type"] for delta in deltas} == {"input_json_delta"}
    assert json.loads("".join(str(delta["partial_json"]) for delta in deltas)) == TOOL_INPUT


def test_a_tool_use_block_starts_with_its_id_its_name_and_an_empty_input() -> None:
    with ScriptedMessagesServer([reply(text_block("Reading."), tool_use_block("read"))]) as server:
        events = send(server, body_of()).events()
    starts = [data for name, data in events if name == "content_block_start"]
    assert starts[1] == {
        "type": "content_block_start",
        "index": 1,
        "content_block": {
            "type": "tool_use",
            "id": scripted_tool_use_id(0, 1),
            "name": "read",
            "input": {},
        },
    }
    assert scripted_tool_use_id(0, 1).startswith("toolu_")


def test_a_tool_use_block_keeps_an_id_the_script_gives_it() -> None:
    script = [reply(tool_use_block("ls", {}, tool_use_id="toolu_chosen"))]
    with ScriptedMessagesServer(script) as server:
        message = send(server, body_of(stream=False)).json()
    assert message["content"] == [
        {"type": "tool_use", "id": "toolu_chosen", "name": "ls", "input": {}}
    ]


def test_thinking_arrives_as_thinking_deltas_then_one_signature_delta() -> None:
    thinking = "First I should read the file, then decide what to change in it."
    script = [reply(thinking_block(thinking, "c2lnbmF0dXJl"), text_block("Done."))]
    with ScriptedMessagesServer(script) as server:
        events = send(server, body_of()).events()
    deltas = deltas_of(events, 0)
    assert [delta["type"] for delta in deltas[:-1]] == ["thinking_delta"] * (len(deltas) - 1)
    assert len(deltas) > 2
    assert "".join(str(delta["thinking"]) for delta in deltas[:-1]) == thinking
    assert deltas[-1] == {"type": "signature_delta", "signature": "c2lnbmF0dXJl"}
    start = next(data for name, data in events if name == "content_block_start")
    assert start["content_block"] == {"type": "thinking", "thinking": "", "signature": ""}


def test_blocks_are_indexed_in_order_each_started_then_stopped() -> None:
    script = [reply(thinking_block("hm", "sig"), text_block("ok"), tool_use_block("ls"))]
    with ScriptedMessagesServer(script) as server:
        events = send(server, body_of()).events()
    frames = [(name, data.get("index")) for name, data in events if name.startswith("content")]
    assert [frame for frame in frames if frame[0] != "content_block_delta"] == [
        ("content_block_start", 0),
        ("content_block_stop", 0),
        ("content_block_start", 1),
        ("content_block_stop", 1),
        ("content_block_start", 2),
        ("content_block_stop", 2),
    ]
    for index in range(3):
        start = frames.index(("content_block_start", index))
        stop = frames.index(("content_block_stop", index))
        deltas = [i for i, frame in enumerate(frames) if frame == ("content_block_delta", index)]
        assert deltas
        assert all(start < i < stop for i in deltas)


def test_message_delta_carries_the_stop_reason_and_the_output_tokens() -> None:
    script = [
        reply(
            text_block("cut"),
            stop_reason="max_tokens",
            usage=Usage(input_tokens=10, output_tokens=512),
        )
    ]
    with ScriptedMessagesServer(script) as server:
        events = send(server, body_of()).events()
    assert events[-2] == (
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
            "usage": {"output_tokens": 512},
        },
    )


def test_the_stop_reason_is_tool_use_when_a_tool_is_called_and_end_turn_otherwise() -> None:
    assert reply(text_block("a"), tool_use_block("ls")).stop_reason is StopReason.TOOL_USE
    assert reply(text_block("a")).stop_reason is StopReason.END_TURN


def test_a_request_without_stream_gets_the_whole_message_as_json() -> None:
    script = [
        reply(
            text_block("Hi."),
            tool_use_block("read", TOOL_INPUT),
            usage=Usage(input_tokens=7, output_tokens=9),
        )
    ]
    with ScriptedMessagesServer(script) as server:
        answer = send(server, body_of(stream=False))
    assert answer.status == 200
    assert answer.headers["content-type"] == "application/json"
    message = answer.json()
    assert str(message.pop("id")).startswith("msg_")
    assert message == {
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": [
            {"type": "text", "text": "Hi."},
            {
                "type": "tool_use",
                "id": scripted_tool_use_id(0, 1),
                "name": "read",
                "input": TOOL_INPUT,
            },
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 7, "output_tokens": 9},
    }


# --- errors ----------------------------------------------------------------------------------


def test_a_rate_limit_answers_429_with_retry_after_and_an_error_body() -> None:
    script = [error_reply(429, message="slow down", retry_after=3)]
    with ScriptedMessagesServer(script) as server:
        answer = send(server, body_of())
    assert answer.status == 429
    assert answer.headers["retry-after"] == "3"
    assert answer.headers["content-type"] == "application/json"
    body = answer.json()
    assert str(body.pop("request_id")).startswith("req_")
    assert body == {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}}


def test_an_error_without_retry_after_sends_no_retry_after_header() -> None:
    with ScriptedMessagesServer([error_reply(429)]) as server:
        answer = send(server, body_of())
    assert answer.status == 429
    assert "retry-after" not in answer.headers


def test_overloaded_answers_529_overloaded_error() -> None:
    with ScriptedMessagesServer([{"error": {"status": 529}}]) as server:
        answer = send(server, body_of())
    assert answer.status == 529
    assert answer.json()["error"] == {
        "type": "overloaded_error",
        "message": "scripted overloaded_error",
    }


def test_api_error_answers_500_api_error() -> None:
    with ScriptedMessagesServer([{"error": {"type": "api_error", "message": "boom"}}]) as server:
        answer = send(server, body_of())
    assert answer.status == 500
    assert answer.json()["error"] == {"type": "api_error", "message": "boom"}


def test_a_stream_error_sends_its_events_then_an_error_event_and_no_message_stop() -> None:
    script = [stream_error(3, message="Overloaded", interrupting=reply(text_block(LONG_TEXT)))]
    with ScriptedMessagesServer(script) as server:
        answer = send(server, body_of())
    events = answer.events()
    assert answer.status == 200
    assert answer.complete
    assert [name for name, _ in events] == [
        "message_start",
        "content_block_start",
        "ping",
        "error",
    ]
    assert events[-1][1] == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_a_stream_error_met_without_stream_answers_as_an_http_error() -> None:
    with ScriptedMessagesServer([stream_error(3, status=529)]) as server:
        answer = send(server, body_of(stream=False))
    assert answer.status == 529
    assert answer.json()["error"] == {
        "type": "overloaded_error",
        "message": "scripted overloaded_error",
    }


def test_a_cut_connection_leaves_the_client_with_an_incomplete_stream() -> None:
    with ScriptedMessagesServer(
        [{"cut_after": 4, "content": [{"type": "text", "text": LONG_TEXT}]}]
    ) as server:
        answer = send(server, body_of())
        assert server.remaining == 0
    assert answer.status == 200
    assert not answer.complete
    events = answer.events()
    assert len(events) == 4
    assert "message_stop" not in [name for name, _ in events]


def test_a_cut_past_the_last_event_still_withholds_message_stop() -> None:
    with ScriptedMessagesServer([connection_cut(1000)]) as server:
        answer = send(server, body_of())
    names = [name for name, _ in answer.events()]
    assert not answer.complete
    assert names[-1] == "message_delta"


def test_a_cut_whole_message_leaves_the_client_with_an_incomplete_body() -> None:
    with ScriptedMessagesServer([connection_cut(0)]) as server:
        answer = send(server, body_of(stream=False))
    assert answer.status == 200
    assert not answer.complete


# --- the record of requests -----------------------------------------------------------------


def test_every_request_is_recorded_with_lower_case_headers_and_its_parsed_body() -> None:
    body = body_of(system="be brief")
    with ScriptedMessagesServer([reply(text_block("ok"))]) as server:
        send(server, body, headers={"X-Api-Key": "sk-test", "Anthropic-Version": "2023-06-01"})
        recorded = server.requests
    assert len(recorded) == 1
    request = recorded[0]
    assert (request.method, request.path, request.body) == ("POST", "/v1/messages", body)
    assert request.headers["x-api-key"] == "sk-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["content-type"] == "application/json"


def test_a_chunked_request_body_is_read_whole() -> None:
    body = body_of(stream=False)
    encoded = json.dumps(body).encode()
    pieces = [encoded[:10], encoded[10:25], encoded[25:]]
    with ScriptedMessagesServer([reply(text_block("ok"))]) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("POST", "/v1/messages", body=iter(pieces), encode_chunked=True)
        response = connection.getresponse()
        response.read()
        connection.close()
        recorded = server.requests
    assert response.status == 200
    assert recorded[0].headers["transfer-encoding"] == "chunked"
    assert recorded[0].body == body


def test_a_get_is_recorded_and_answered_404() -> None:
    with ScriptedMessagesServer([reply(text_block("kept"))]) as server:
        answer = send(server, None, method="GET", path="/v1/messages")
        assert server.remaining == 1
        assert [(r.method, r.body) for r in server.requests] == [("GET", None)]
    assert answer.status == 404


def test_requests_on_one_keep_alive_connection_each_get_the_next_reply() -> None:
    script = [reply(text_block("first")), reply(text_block("second"))]
    with ScriptedMessagesServer(script) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        try:
            first = send(server, body_of(stream=False), connection=connection)
            second = send(server, body_of(), connection=connection)
        finally:
            connection.close()
    assert first.json()["content"] == [{"type": "text", "text": "first"}]
    assert "".join(str(d["text"]) for d in deltas_of(second.events(), 0)) == "second"


def test_an_exhausted_script_answers_500_saying_so() -> None:
    with ScriptedMessagesServer([reply(text_block("only"))]) as server:
        assert send(server, body_of()).status == 200
        answer = send(server, body_of())
        assert len(server.requests) == 2
    assert answer.status == 500
    error = answer.json()["error"]
    assert isinstance(error, dict)
    assert error["type"] == "api_error"
    assert "script is exhausted" in error["message"]


def test_an_unknown_path_answers_404_and_consumes_nothing() -> None:
    with ScriptedMessagesServer([reply(text_block("kept"))]) as server:
        answer = send(server, body_of(), path="/v1/complete")
        assert server.remaining == 1
        assert [request.path for request in server.requests] == ["/v1/complete"]
    assert answer.status == 404
    assert answer.json()["error"] == {
        "type": "not_found_error",
        "message": "Not found: POST /v1/complete",
    }


def test_the_server_stops_listening_when_its_block_ends() -> None:
    with ScriptedMessagesServer([]) as server:
        port = server.port
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=5)


def test_the_server_stops_even_while_a_client_holds_a_connection_open() -> None:
    with ScriptedMessagesServer([reply(text_block("ok"))]) as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        send(server, body_of(), connection=connection)
    connection.close()


# --- validation ----------------------------------------------------------------------------

USE = {"type": "tool_use", "id": "toolu_a", "name": "read", "input": {"path": "x"}}
RESULT = {"type": "tool_result", "tool_use_id": "toolu_a", "content": "text of x"}
USER: dict[str, object] = {"role": "user", "content": "read x"}


def turns(*contents: object) -> list[dict[str, object]]:
    """Messages alternating user, assistant, user…, one per content."""
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": content} for i, content in enumerate(contents)]


INVALID_BODIES = {
    "roles that do not alternate": (
        body_of([USER, {"role": "user", "content": "again"}]),
        "roles must alternate",
    ),
    "a first message from the assistant": (
        body_of([{"role": "assistant", "content": "hi"}]),
        'first message must use the "user" role',
    ),
    "an orphan tool_result": (
        body_of(turns([RESULT])),
        "unexpected `tool_use_id` found in `tool_result` blocks: toolu_a",
    ),
    "a tool_result answering an older message": (
        body_of(turns("a", [USE], [RESULT], "ok", [RESULT])),
        "messages.4.content.0: unexpected `tool_use_id`",
    ),
    "an unanswered tool_use": (
        body_of(turns("read x", [USE], "never mind")),
        "`tool_use` ids were found without `tool_result` blocks immediately after: toolu_a",
    ),
    "a tool_result after text": (
        body_of(turns("read x", [USE], [{"type": "text", "text": "here"}, RESULT])),
        "`tool_result` blocks must come first",
    ),
    "a missing model": (
        {key: value for key, value in body_of().items() if key != "model"},
        "model: Field required",
    ),
    "a missing max_tokens": (
        {key: value for key, value in body_of().items() if key != "max_tokens"},
        "max_tokens: Field required",
    ),
    "no messages": ({**body_of(), "messages": []}, "at least one message"),
    "an unknown tool_choice": (body_of(tool_choice={"type": "some"}), "tool_choice.type"),
    "a tool without input_schema": (
        body_of(tools=[{"name": "read", "description": "read a file"}]),
        "tools.0.input_schema: Field required",
    ),
    "a thinking block without its signature": (
        body_of(turns("a", [{"type": "thinking", "thinking": "hm"}, USE], [RESULT])),
        "messages.1.content.0.thinking.signature: Field required",
    ),
    "an empty user message": (body_of(turns("a", "b", [])), "non-empty content"),
    "a body that is not JSON": ("{not json", "not a JSON object"),
}


@pytest.mark.parametrize("case", INVALID_BODIES, ids=list(INVALID_BODIES))
def test_an_invalid_request_answers_400_and_consumes_no_reply(case: str) -> None:
    invalid_body, problem = INVALID_BODIES[case]
    with ScriptedMessagesServer([reply(text_block("kept for the valid request"))]) as server:
        if isinstance(invalid_body, str):
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            connection.request("POST", "/v1/messages", body=invalid_body.encode())
            response = connection.getresponse()
            answer = Answer(response.status, {}, response.read(), complete=True)
            connection.close()
        else:
            answer = send(server, invalid_body)
        assert server.remaining == 1
        assert len(server.requests) == 1
        valid = send(server, body_of(stream=False))
    assert answer.status == 400
    error = answer.json()["error"]
    assert isinstance(error, dict)
    assert error["type"] == "invalid_request_error"
    assert problem in error["message"]
    assert valid.json()["content"] == [{"type": "text", "text": "kept for the valid request"}]


def test_a_full_tool_round_trip_with_tools_thinking_and_tool_choice_is_accepted() -> None:
    thinking = {"type": "thinking", "thinking": "hm", "signature": "sig"}
    messages = turns("read x", [thinking, USE], [RESULT, {"type": "text", "text": "go on"}])
    tools = [{"name": "read", "input_schema": {"type": "object"}}]
    body = body_of(messages, tools=tools, tool_choice={"type": "tool", "name": "read"})
    with ScriptedMessagesServer([reply(text_block("x is text"))]) as server:
        answer = send(server, body)
    assert answer.status == 200


def test_a_final_assistant_message_may_prefill_without_being_answered() -> None:
    with ScriptedMessagesServer([reply(text_block("more"))]) as server:
        answer = send(server, body_of(turns("read x", [USE])))
    assert answer.status == 200


# --- the script -------------------------------------------------------------------------------


def test_a_script_survives_its_json_form_unchanged() -> None:
    script = (
        reply(thinking_block("hm", "sig"), text_block("a"), tool_use_block("ls", {"path": "."})),
        reply(text_block("stopped"), stop_reason="stop_sequence", stop_sequence="END"),
        error_reply(429, retry_after=2),
        stream_error(2, status=500),
        connection_cut(5, interrupting=reply(text_block("partial"))),
    )
    assert parse_script(json.loads(json.dumps(script_to_json(script)))) == script


@pytest.mark.parametrize(
    "entry",
    [
        {"content": [], "stop_reasons": "end_turn"},
        {"content": [{"type": "image"}]},
        {"content": [], "stop_reason": "finished"},
        {"error": {"status": 418}},
        {"cut_after": -1},
        {"nothing": True},
    ],
)
def test_a_script_entry_that_cannot_be_followed_exactly_is_refused(entry: object) -> None:
    with pytest.raises(ScriptInvalid):
        parse_script([entry])


# --- the command line ----------------------------------------------------------------------


def test_the_command_line_serves_a_script_and_records_each_request(tmp_path: Path) -> None:
    script_path = tmp_path / "script.json"
    record_path = tmp_path / "requests.jsonl"
    script_path.write_text(json.dumps(script_to_json([reply(text_block("from a process"))])))
    server_process = subprocess.Popen(
        [sys.executable, "-m", "sandbx.testing", "--script", script_path, "--record", record_path],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server_process.stdout is not None
        url = server_process.stdout.readline().strip()
        host, port = url.removeprefix("http://").split(":")
        assert host == "127.0.0.1"
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        connection.request("POST", "/v1/messages", body=json.dumps(body_of(stream=False)))
        response = connection.getresponse()
        message = json.loads(response.read())
        connection.close()
        recorded = load_recorded_requests(str(record_path))
    finally:
        server_process.terminate()
        _, stderr = server_process.communicate(timeout=10)
    assert response.status == 200
    assert message["content"] == [{"type": "text", "text": "from a process"}]
    assert [(request.method, request.path, request.body) for request in recorded] == [
        ("POST", "/v1/messages", body_of(stream=False))
    ]
    assert server_process.returncode == 0, stderr
    assert stderr == ""


def test_the_command_line_refuses_a_script_it_cannot_follow(tmp_path: Path) -> None:
    script_path = tmp_path / "script.json"
    unfollowable: list[dict[str, object]] = [{"content": "not a list"}]
    script_path.write_text(json.dumps(unfollowable))
    finished = subprocess.run(
        [sys.executable, "-m", "sandbx.testing", "--script", script_path],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert finished.returncode == 2
    assert finished.stdout == ""
    assert "content is a list of blocks" in finished.stderr
