"""``typing`` stand-ins for modules on a coding-agent hook's path (docs/hooks.md, Latency).

A hook is a new interpreter per event, so every import is paid on every prompt, and
``import typing`` alone costs ~7-10 ms of CPU (its own body plus the generic-alias machinery
it builds). The hook path needs two things from it at run time: ``TYPE_CHECKING`` (import
type-only names) and ``NamedTuple`` class syntax (small immutable values). Both are here
without importing ``typing``; type checkers see the real ``typing`` names (mypy resolves the
re-export below to ``typing.NamedTuple`` and special-cases it as usual).

Usage, in a hook-path module::

    from amcp.lean import TYPE_CHECKING, NamedTuple

    if TYPE_CHECKING:
        from typing import Any

    class Point(NamedTuple):
        x: int
        y: int = 0

The class is a plain ``collections.namedtuple`` with the class body's methods, properties
and class attributes copied on: the same object ``typing.NamedTuple`` would build, minus
``__orig_bases__``. Field annotations stay strings (``from __future__ import annotations``).
"""

from __future__ import annotations

import collections

TYPE_CHECKING = False  # mypy and pyright treat any ``TYPE_CHECKING`` name as True

if TYPE_CHECKING:
    from typing import NamedTuple
else:
    # What a NamedTuple class body may not define (typing refuses the same names).
    _PROHIBITED = frozenset({"__new__", "__init__", "__slots__", "__getnewargs__", "_fields",
                             "_field_defaults", "_make", "_replace", "_asdict", "_source"})
    # Set by the class statement itself: not copied onto the namedtuple.
    _SPECIAL = frozenset({"__module__", "__qualname__", "__annotations__", "__doc__",
                          "__classcell__", "__orig_bases__"})

    class _NamedTupleMeta(type):
        def __new__(mcs, name, bases, ns):
            if ns.get("_lean_root"):
                return super().__new__(mcs, name, bases, ns)
            if bases != (NamedTuple,):
                raise TypeError(f"{name}: a NamedTuple class derives from NamedTuple alone")
            fields = list(ns.get("__annotations__", {}))
            defaults = []
            for field in fields:
                if field in ns:
                    defaults.append(ns[field])
                elif defaults:
                    raise TypeError(f"{name}: non-default field {field!r} follows a default")
            cls = collections.namedtuple(name, fields, defaults=defaults,
                                         module=ns.get("__module__"))
            cls.__annotations__ = dict(ns.get("__annotations__", {}))
            cls.__qualname__ = ns.get("__qualname__", name)
            if ns.get("__doc__"):
                cls.__doc__ = ns["__doc__"]
            for key, value in ns.items():
                if key in _PROHIBITED:
                    raise AttributeError(f"{name}: cannot overwrite NamedTuple attribute {key}")
                if key not in _SPECIAL and key not in cls._fields:
                    setattr(cls, key, value)
            return cls

    class NamedTuple(metaclass=_NamedTupleMeta):
        _lean_root = True


__all__ = ["TYPE_CHECKING", "NamedTuple"]
