"""``amcp.lean``: NamedTuple without ``typing`` behaves as ``typing.NamedTuple`` does, and
the hook path really stays off ``typing``."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import typing
from pathlib import Path

import pytest

from amcp.lean import NamedTuple

ROOT = Path(__file__).resolve().parents[1]


class Point(NamedTuple):
    """A point."""

    x: int
    y: int = 0
    label: str | None = None
    UNIT = "px"  # a class attribute, not a field

    def norm1(self) -> int:
        return abs(self.x) + abs(self.y)

    @property
    def swapped(self) -> Point:
        return self._replace(x=self.y, y=self.x)

    @classmethod
    def origin(cls) -> Point:
        return cls(0)


class TypedPoint(typing.NamedTuple):
    x: int
    y: int = 0
    label: str | None = None


def test_same_shape_as_typing_namedtuple() -> None:
    p = Point(3, -4)
    assert Point._fields == TypedPoint._fields == ("x", "y", "label")
    assert Point._field_defaults == TypedPoint._field_defaults == {"y": 0, "label": None}
    assert p == TypedPoint(3, -4) == (3, -4, None)
    assert p._asdict() == {"x": 3, "y": -4, "label": None}
    assert p._replace(label="a") == Point(3, -4, "a")
    assert Point._make([1, 2, "b"]) == Point(1, 2, "b")
    assert isinstance(p, tuple) and hash(p) == hash((3, -4, None))
    assert repr(p) == "Point(x=3, y=-4, label=None)"
    assert Point.__doc__ == "A point." and Point.__module__ == __name__
    assert Point.__qualname__ == "Point"
    assert set(Point.__annotations__) == {"x", "y", "label"}
    with pytest.raises(AttributeError):
        p.x = 1  # type: ignore[misc]


def test_methods_properties_classmethods_and_class_attributes() -> None:
    p = Point(3, -4)
    assert p.norm1() == 7 and p.swapped == Point(-4, 3) and Point.origin() == Point(0, 0)
    assert Point.UNIT == "px" and "UNIT" not in Point._fields


def test_pickles_like_a_namedtuple() -> None:
    p = Point(1, 2, "z")
    assert pickle.loads(pickle.dumps(p)) == p


def test_refuses_what_typing_refuses() -> None:
    with pytest.raises(TypeError, match="follows a default"):
        class Bad(NamedTuple):
            a: int = 1
            b: int  # type: ignore[misc]

    with pytest.raises(AttributeError, match="_replace"):
        class Worse(NamedTuple):
            a: int

            def _replace(self, **kw: int) -> None:  # type: ignore[override]
                pass


def test_refuses_mixins() -> None:
    class Mixin:
        pass

    with pytest.raises(TypeError, match="alone"):
        class Mixed(NamedTuple, Mixin):  # type: ignore[misc]
            a: int


def test_the_noop_hook_imports_none_of_the_heavy_stdlib(tmp_path: Path) -> None:
    """The point of this module: the installed hook command, on a tool call that is not a
    commit, loads none of the heavy stdlib modules (a structural check, not a timing)."""
    probe = ("import sys; from amcp.agent.hooks.__main__ import main; main(['post-tool']); "
             "print(sorted(m for m in ('typing', 'dataclasses', 'subprocess', 'inspect', "
             "'runpy', 'sqlite3', 'msgpack', 'pathlib', 'urllib.parse') if m in sys.modules), "
             "file=sys.stderr)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("AMCP_")}
    env.update({"AMCP_HOME": str(tmp_path / "home"), "AMCP_NODE": "off",
                "PYTHONPATH": str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", "")})
    res = subprocess.run(
        [sys.executable, "-P", "-c", probe], cwd=tmp_path, env=env, capture_output=True,
        text=True, timeout=60, check=False,
        input='{"session_id": "s", "cwd": ".", "tool_name": "Bash", '
              '"tool_input": {"command": "ls"}, "tool_response": {"stdout": "x"}}')
    assert res.returncode == 0, res.stderr
    assert res.stdout == ""  # a no-op hook says nothing
    assert res.stderr.strip().splitlines()[-1] == "[]"
