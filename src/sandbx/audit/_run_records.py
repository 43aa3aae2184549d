"""The records of one sandboxed run: ``spawned``, then ``exited`` or ``failed``, and ``degraded``.

Built from the settled policy and the boundary's result; this module decides
what each field says, never whether the run may happen.
"""

from __future__ import annotations

from sandbx._exhaustive import unreachable
from sandbx.audit._records import NO_SESSION, FieldValue, Record, RecordKind, cut_args
from sandbx.boundary import Exited, Failed, RunResult
from sandbx.policy import Access, Command, Network, Policy


def spawned(spawn: str, policy: Policy, command: Command, session: str = NO_SESSION) -> Record:
    network = policy.network
    return Record(
        kind=RecordKind.SPAWNED,
        fields=(
            *_run_fields(spawn, session, command),
            ("args", cut_args(command.args)),
            ("readable", policy.count(Access.READ)),
            ("writable", policy.count(Access.WRITE)),
            ("executable", policy.count(Access.EXECUTE)),
            ("network", network.kind.value),
            ("network_ports", len(network.ports)),
            ("unix_sockets", network.unix_sockets),
            ("env", len(policy.granted_env_names)),
            ("dns_over_tcp", network.dns_over_tcp),
            ("dns_names", len(network.dns_names)),
            ("pinned", policy.pin is not None),
        ),
    )


def ended(spawn: str, command: Command, result: RunResult, session: str = NO_SESSION) -> Record:
    outcome = result.outcome
    match outcome:
        case Exited(code=code):
            return Record(
                kind=RecordKind.EXITED,
                fields=(*_run_fields(spawn, session, command), ("code", code)),
            )
        case Failed(reason=reason, detail=detail):
            return Record(
                kind=RecordKind.FAILED,
                fields=(
                    *_run_fields(spawn, session, command),
                    ("reason", reason.value),
                    ("detail", detail),
                ),
            )
        case _:
            raise unreachable(outcome)


def unresolved_names(network: Network) -> str:
    """A count, never the names: which names a run asked for is the command line's to tell."""
    return (
        f"{network.unresolved_names} of {len(network.dns_names)} --allow-dns names did not "
        "resolve; they fail inside the sandbox"
    )


def degraded(spawn: str, what: str, session: str = NO_SESSION) -> Record:
    return Record(
        kind=RecordKind.DEGRADED,
        fields=(("spawn", spawn), ("session", session), ("what", what)),
    )


def _run_fields(spawn: str, session: str, command: Command) -> tuple[tuple[str, FieldValue], ...]:
    return (("spawn", spawn), ("session", session), ("program", command.program))
