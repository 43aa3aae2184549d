"""The records of a file tool's accesses: ``allowed``, ``absent``, ``denied`` (with its reason).

They carry ``session=`` and no ``spawn=``, having no run. ``absent`` is a missing
name inside a granted root; outside every root an access is ``denied`` without
a file system call, so the trail never says which outside paths exist.
"""

from __future__ import annotations

from sandbx.audit._records import NO_SESSION, FieldValue, Record, RecordKind

ACCESS_KINDS = {
    "allowed": RecordKind.ALLOWED,
    "absent": RecordKind.ABSENT,
    "denied": RecordKind.DENIED,
}


def file_access(
    kind: str, *, tool: str, path: str, access: str, reason: str = "", session: str = NO_SESSION
) -> Record:
    fields: tuple[tuple[str, FieldValue], ...] = (
        ("session", session),
        ("tool", tool),
        ("path", path),
        ("access", access),
    )
    if ACCESS_KINDS[kind] is RecordKind.DENIED:
        fields = (*fields, ("reason", reason))
    return Record(kind=ACCESS_KINDS[kind], fields=fields)
