"""``sandbx agent-run [GRANT FLAGS] [AGENT FLAGS] -- "PROMPT"``: one question, seven tools.

Derives the same policy as sandbox-run from the same flags, starts the tool
box (its worker and spawner fork here, before any thread or SDK exists), then
runs one turn against the model. Exit: 0 answered, 2 a bound cut it short,
3 the terminal went away, 64 a command line sandbx would not take, 1 otherwise.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable

from sandbx import audit
from sandbx._fdio import write_text
from sandbx._value import value
from sandbx.agent import (
    ApproveWhen,
    Asker,
    Gate,
    History,
    Sink,
    Terminal,
    TerminalGone,
    Turn,
    TurnEnd,
    TurnResult,
    TurnSettings,
    system_prompt,
)
from sandbx.agent._display import shown_safely, shown_safely_lines
from sandbx.cli._agent_session import AgentSession, is_session_argument
from sandbx.cli._flags import Flag, Parsed, check, parse
from sandbx.cli._sandbox_run import GRANT_FLAGS, grant_flags_from, launch_environment
from sandbx.cli._sandbox_run import working_directory as current_directory
from sandbx.credentials import find_key
from sandbx.errors import HostError, UsageError
from sandbx.policy import Access, Command, Policy, derive_policy
from sandbx.providers import Endpoint, ProviderError, endpoint_from
from sandbx.tools import READ_ONLY_TOOLS, SPECS, TOOL_NAMES, ToolBox

PROG = "sandbx agent-run"
SUMMARY = (
    "Ask one question; the model answers using tools that run inside the boundary. "
    "read, ls, grep and find are approved; write, edit and bash need --allow-tool."
)
DEFAULT_MODEL = "claude-sonnet-5"
DEFAULT_MAX_TOKENS = 4096
DEFAULT_MAX_ROUNDS = 8

AGENT_FLAGS = (
    Flag(
        name="--allow-tool",
        metavar="TOOL",
        repeatable=True,
        takes_next_as_value=TOOL_NAMES.__contains__,
        help="approve a tool that does more than read; alone, approve all seven",
    ),
    Flag(
        name="--approve",
        metavar="WHEN",
        help="run (default): --allow-tool decides; call: ask on the terminal per write and command",
    ),
    Flag(name="--model", metavar="NAME", help=f"which model to ask (default {DEFAULT_MODEL})"),
    Flag(name="--max-tokens", metavar="N", help="cap what the model writes in one round"),
    Flag(name="--max-rounds", metavar="N", help="cap the rounds of tool calls (default 8)"),
    Flag(name="--no-wrap-up", help="do not ask for the answer so far after --max-rounds"),
    Flag(name="--system", metavar="TEXT", help="a system prompt, sent after sandbx's own lines"),
    Flag(name="--show-thinking", help="print a summary of the model's reasoning on stderr"),
    Flag(
        name="--session",
        metavar="ID",
        takes_next_as_value=is_session_argument,
        help="keep the conversation; alone, start one and print its id; with ID, resume it",
    ),
    Flag(
        name="--compact-at",
        metavar="TOKENS",
        help="with --session: stop sending the oldest turns once a request passes TOKENS",
    ),
)


@value
class AgentOptions:
    approve: ApproveWhen
    approved_tools: frozenset[str]
    model: str
    max_tokens: int
    max_rounds: int
    wrap_up: bool
    system: str
    show_thinking: bool
    session: bool
    session_id: str | None
    compact_at: int | None


@value
class Prepared:
    """Everything a turn needs that is settled before any process is forked."""

    prompt: str
    options: AgentOptions
    policy: Policy
    working_directory: str
    endpoint: Endpoint
    session: AgentSession | None

    @property
    def session_name(self) -> str:
        return audit.NO_SESSION if self.session is None else self.session.session_id


def prepare(argv: list[str], prog: str = PROG) -> Prepared:
    """Parse, vet and derive: the same policy and refusals as sandbox-run, then the key."""
    parsed = parse(prog, SUMMARY, (*GRANT_FLAGS, *AGENT_FLAGS), argv)
    check(
        bool(parsed.rest),
        prog,
        "no question to ask",
        f'put it after --, as in `{prog} -- "what does this project do?"`',
    )
    options = options_from(parsed)
    if "ANTHROPIC_API_KEY" in parsed.all("--allow-env"):
        raise UsageError(
            "--allow-env ANTHROPIC_API_KEY refused: sandbx makes the model call itself",
            "leave it out; a command never needs the key",
        )
    environ = launch_environment()
    cwd = current_directory()
    policy = derive_policy(
        grant_flags_from(parsed, prog),
        Command(argv=("/bin/sh",)),
        working_directory=cwd,
        environ=environ,
    )
    found = find_key(environ)
    endpoint = endpoint_from(environ, None if found is None else found.key)
    session = (
        AgentSession.open(options.session_id, model=options.model, environ=environ)
        if options.session
        else None
    )
    return Prepared(
        prompt=" ".join(parsed.rest),
        options=options,
        policy=policy,
        working_directory=cwd,
        endpoint=endpoint,
        session=session,
    )


def start_tools(prepared: Prepared, sink: audit.StderrSink) -> ToolBox:
    """Fork the worker and the spawner: call before any thread exists."""
    name = prepared.session_name
    return ToolBox.start(
        prepared.policy,
        working_directory=prepared.working_directory,
        sink=sink,
        session=lambda: name,
        commands_expected="bash" in prepared.options.approved_tools,
    )


def main(argv: list[str]) -> int:
    prepared = prepare(argv)
    terminal = Terminal.open() if prepared.options.approve is ApproveWhen.CALL else None
    if terminal is not None:
        # The terminal asked on may hang up: its read error ends the turn with exit 3,
        # which a SIGHUP would pre-empt by killing sandbx outright.
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    tools = start_tools(prepared, audit.StderrSink())
    say = _line_writer(terminal)
    try:
        approved = ", ".join(sorted(prepared.options.approved_tools))
        write_text(2, f"sandbx: approved tools: {approved}\n")
        turn = build_turn(
            prepared,
            tools=tools,
            sink=Sink(
                answer=lambda text: _write(1, text),
                reasoning=(lambda text: _write(2, audit.unforgeable(shown_safely_lines(text))))
                if prepared.options.show_thinking
                else None,
                line=say,
            ),
            asker=terminal,
        )
        result = run_turn(prepared, turn)
    finally:
        tools.close()
        if prepared.session is not None:
            prepared.session.close()
    if not turn.answer_ends_a_line:
        write_text(1, "\n")
    if result.note:
        say(result.note)
    return result.end.exit_code


def run_turn(
    prepared: Prepared, turn: Turn, *, hung_up: threading.Event | None = None
) -> TurnResult:
    """Run the turn and keep its record; under tui, a stop caused by a hangup is recorded
    as the terminal going away, not as an interrupt."""
    history = History() if prepared.session is None else prepared.session.history
    try:
        result = turn.run(history, prepared.prompt)
    except ProviderError as exc:
        raise HostError(str(exc), "check the key, the model and ANTHROPIC_BASE_URL") from exc
    if hung_up is not None and hung_up.is_set() and result.end is TurnEnd.INTERRUPTED:
        result = TurnResult(
            end=TurnEnd.TERMINAL_GONE,
            messages=result.messages,
            rounds=result.rounds,
            note="the terminal went away",
            input_tokens=result.input_tokens,
            output_tokens=result.output_tokens,
            last_input_tokens=result.last_input_tokens,
            withheld_turns=result.withheld_turns,
        )
    if prepared.session is not None:
        prepared.session.finish(result)
    return result


def options_from(parsed: Parsed) -> AgentOptions:
    approve = parsed.one("--approve") or "run"
    check(
        approve in ("run", "call"),
        PROG,
        f"--approve {approve!r} is neither run nor call",
        "pass --approve run or --approve call",
    )
    named = parsed.values.get("--allow-tool", [])
    approved = (
        frozenset(TOOL_NAMES)
        if None in named
        else READ_ONLY_TOOLS | set(parsed.all("--allow-tool"))
    )
    return AgentOptions(
        approve=ApproveWhen(approve),
        approved_tools=approved,
        model=parsed.one("--model") or DEFAULT_MODEL,
        max_tokens=_positive(parsed, "--max-tokens", DEFAULT_MAX_TOKENS),
        max_rounds=_positive(parsed, "--max-rounds", DEFAULT_MAX_ROUNDS),
        wrap_up=not parsed.given("--no-wrap-up"),
        system=parsed.one("--system") or "",
        show_thinking=parsed.given("--show-thinking"),
        session=parsed.given("--session"),
        session_id=parsed.one("--session"),
        compact_at=_compact_at(parsed),
    )


def _compact_at(parsed: Parsed) -> int | None:
    if not parsed.given("--compact-at"):
        return None
    check(
        parsed.given("--session"),
        PROG,
        "--compact-at needs --session: without one there are no earlier turns to leave out",
        "add --session, or leave out --compact-at",
    )
    return _positive(parsed, "--compact-at", 0)


def build_turn(
    prepared: Prepared,
    *,
    tools: ToolBox,
    sink: Sink,
    asker: Asker | None,
    stop: threading.Event | None = None,
) -> Turn:
    # Imported only now: the SDK takes a second to load, and the worker and the
    # spawner were forked while the process was still small.
    from sandbx.providers._anthropic import AnthropicProvider

    options = prepared.options
    policy = prepared.policy
    return Turn(
        provider=AnthropicProvider(prepared.endpoint),
        tools=tools,
        gate=Gate(approved=options.approved_tools, when=options.approve, terminal=asker),
        sink=sink,
        settings=TurnSettings(
            model=options.model,
            max_tokens=options.max_tokens,
            max_rounds=options.max_rounds,
            wrap_up=options.wrap_up,
            system=system_prompt(
                approved=options.approved_tools,
                readable=[grant.path for grant in policy.grants],
                writable=[grant.path for grant in policy.grants if grant.access is Access.WRITE],
                working_directory=prepared.working_directory,
                network=policy.network.kind.value,
                extra=options.system,
            ),
            tools=tuple(
                {
                    "name": spec.name,
                    "description": spec.description,
                    "input_schema": spec.input_schema,
                }
                for spec in SPECS
            ),
            thinking={"type": "adaptive", "display": "summarized"}
            if options.show_thinking
            else None,
        ),
        on_round=None if prepared.session is None else prepared.session.keep_round,
        compact_at=options.compact_at,
        stop=stop,
    )


def _positive(parsed: Parsed, flag: str, default: int) -> int:
    text = parsed.one(flag)
    if text is None:
        return default
    check(
        text.isascii() and text.isdigit() and int(text) > 0,
        PROG,
        f"{flag} {text!r} is not a whole number above zero",
        f"pass {flag} N with N at least 1",
    )
    return int(text)


def _write(fd: int, text: str) -> None:
    write_text(fd, text)


def _line_writer(terminal: Terminal | None) -> Callable[[str], None]:
    """Per-call lines go to stderr, or to the terminal that is asked on under --approve call
    (and to stderr once that terminal is gone)."""

    def write(line: str) -> None:
        text = f"sandbx: {audit.unforgeable(shown_safely(line, 2000))}\n"
        if terminal is not None:
            try:
                terminal.say(text)
            except TerminalGone:
                write_text(2, text)
        else:
            write_text(2, text)

    return write
