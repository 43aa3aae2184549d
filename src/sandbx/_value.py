"""``@value``: immutable, keyword-constructed value objects that cost nothing to define.

``dataclasses`` would serve, but importing it (it pulls in ``inspect``) and
generating each class's methods with ``exec`` cost tens of milliseconds, paid
on every ``sandbx sandbox-run`` before the command even starts. A value class
here is declared exactly like a frozen, keyword-only dataclass, and mypy
checks it as one (PEP 681, ``dataclass_transform``); at run time its methods
are shared, not generated. It refuses mutation, unknown fields and missing
ones.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from typing import TypeVar, dataclass_transform, overload

    _Class = TypeVar("_Class", bound=type)
_MISSING = object()


class FrozenInstanceError(AttributeError):
    """Raised on any attempt to change a value object after construction."""


def _init(self: object, *args: object, **kwargs: object) -> None:
    fields: tuple[tuple[str, object], ...] = type(self).__value_fields__  # type: ignore[attr-defined]
    if len(args) > len(fields):
        msg = f"{type(self).__name__} takes at most {len(fields)} values"
        raise TypeError(msg)
    for index, (name, default) in enumerate(fields):
        if index < len(args):
            if name in kwargs:
                msg = f"{type(self).__name__} got {name} twice"
                raise TypeError(msg)
            given = args[index]
        elif name in kwargs:
            given = kwargs.pop(name)
        elif default is not _MISSING:
            given = default
        else:
            msg = f"{type(self).__name__} needs {name}"
            raise TypeError(msg)
        object.__setattr__(self, name, given)
    if kwargs:
        msg = f"{type(self).__name__} has no field {', '.join(sorted(kwargs))}"
        raise TypeError(msg)
    post_init = getattr(self, "__post_init__", None)
    if post_init is not None:
        post_init()


def _values(self: object) -> tuple[object, ...]:
    return tuple(getattr(self, name) for name, _ in type(self).__value_fields__)  # type: ignore[attr-defined]


def _eq(self: object, other: object) -> bool:
    # Values of different classes are never equal, so there is no reflected
    # comparison to defer to.
    if type(other) is not type(self):
        return False
    same: bool = _values(self) == _values(other)
    return same


def _hash(self: object) -> int:
    return hash((type(self), _values(self)))


def _repr(self: object) -> str:
    fields = type(self).__value_fields__  # type: ignore[attr-defined]
    shown = ", ".join(f"{name}={getattr(self, name)!r}" for name, _ in fields)
    return f"{type(self).__name__}({shown})"


def _refuse_change(self: object, name: str, _value: object = None) -> None:
    msg = f"{type(self).__name__} is immutable; cannot change {name}"
    raise FrozenInstanceError(msg)


def _decorate(cls: _Class) -> _Class:
    # Not inspect.get_annotations: importing inspect is the cost this module avoids.
    annotations: dict[str, object] = cls.__dict__.get("__annotations__", {})  # noqa: RUF063
    inherited: tuple[tuple[str, object], ...] = getattr(cls, "__value_fields__", ())
    own = tuple(
        (name, cls.__dict__.get(name, _MISSING))
        for name, annotation in annotations.items()
        if not str(annotation).startswith("ClassVar")
    )
    for name, default in own:
        if default is not _MISSING:
            delattr(cls, name)  # the default lives in __value_fields__, not on the class
    fields = inherited + own
    methods = {
        "__value_fields__": fields,
        "__match_args__": tuple(name for name, _ in fields),
        "__init__": _init,
        "__eq__": _eq,
        "__hash__": _hash,
        "__repr__": _repr,
        "__setattr__": _refuse_change,
        "__delattr__": _refuse_change,
    }
    for name, method in methods.items():
        setattr(cls, name, method)
    return cls


if TYPE_CHECKING:

    @overload
    @dataclass_transform(kw_only_default=True, frozen_default=True)
    def value(cls: _Class, /) -> _Class: ...

    @overload
    @dataclass_transform(kw_only_default=True, frozen_default=True)
    def value(*, kw_only: bool = True) -> Callable[[_Class], _Class]: ...


def value(
    cls: _Class | None = None, /, *, kw_only: bool = True
) -> _Class | Callable[[_Class], _Class]:
    """Declare a value class; ``@value(kw_only=False)`` lets mypy accept positional values too."""
    del kw_only  # construction accepts both at run time; the flag only informs mypy
    return _decorate if cls is None else _decorate(cls)
