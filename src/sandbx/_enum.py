"""Closed sets of named values: the part of ``enum.Enum`` sandbx uses, without its import.

``import enum`` (with the functools and collections it pulls in) costs every
start of the CLI about 3 ms, a fifth of its budget. Type checkers see the real
``enum.Enum``, so matches over members are still checked for exhaustiveness;
at run time a small metaclass makes each plain value of the class body a
member: a singleton with ``name`` and ``value``, looked up by value with
``Kind(value)``, iterated in definition order, compared by identity. It refuses
what sandbx does not use (``auto()``, flags, aliases, subclassing a class that
has members), so nothing silently behaves unlike ``enum``.
"""

from __future__ import annotations

__all__ = ["Enum"]

TYPE_CHECKING = False
if TYPE_CHECKING:
    from enum import Enum
else:

    class _EnumType(type):
        def __new__(
            cls, name: str, bases: tuple[type, ...], namespace: dict[str, object]
        ) -> _EnumType:
            values = {
                key: item
                for key, item in namespace.items()
                if not key.startswith("_") and not _is_descriptor(item)
            }
            body = {key: item for key, item in namespace.items() if key not in values}
            enum_class = super().__new__(cls, name, bases, body)
            if any(getattr(base, "_members_", None) for base in bases):
                msg = f"{name}: a class with members cannot be extended"
                raise TypeError(msg)
            members: dict[str, object] = {}
            by_value: dict[object, object] = {}
            for key, item in values.items():
                if item in by_value:
                    msg = f"{name}.{key}: the value {item!r} is taken"
                    raise TypeError(msg)
                member = object.__new__(enum_class)
                member._name_ = key
                member._value_ = item
                type.__setattr__(enum_class, key, member)
                members[key] = by_value[item] = member
            enum_class._members_ = members
            enum_class._by_value_ = by_value
            return enum_class

        def __call__(cls, value: object) -> object:
            if isinstance(value, cls):
                return value
            try:
                return cls._by_value_[value]
            except (KeyError, TypeError):
                msg = f"{value!r} is not a valid {cls.__name__}"
                raise ValueError(msg) from None

        def __getitem__(cls, name: str) -> object:
            return cls._members_[name]

        def __iter__(cls):  # noqa: ANN204 - typed by enum.Enum for checkers
            return iter(cls._members_.values())

        def __len__(cls) -> int:
            return len(cls._members_)

        def __setattr__(cls, name: str, value: object) -> None:
            if name in cls.__dict__.get("_members_", {}):
                msg = f"{cls.__name__}.{name} cannot be reassigned"
                raise AttributeError(msg)
            super().__setattr__(name, value)

    def _is_descriptor(item: object) -> bool:
        return any(hasattr(item, attribute) for attribute in ("__get__", "__set__", "__delete__"))

    class Enum(metaclass=_EnumType):
        __slots__ = ("_name_", "_value_")

        @property
        def name(self) -> str:
            return self._name_

        @property
        def value(self) -> object:
            return self._value_

        def __repr__(self) -> str:
            return f"<{type(self).__name__}.{self._name_}: {self._value_!r}>"

        def __str__(self) -> str:
            return f"{type(self).__name__}.{self._name_}"

        def __format__(self, spec: str) -> str:
            return format(str(self), spec)

        def __hash__(self) -> int:
            return hash(self._name_)

        def __reduce__(self) -> tuple[object, tuple[object]]:
            return type(self), (self._value_,)

        def __copy__(self) -> Enum:
            return self

        def __deepcopy__(self, _memo: object) -> Enum:
            return self
