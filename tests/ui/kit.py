"""Helpers for the inspector's tests: stores, clients on a loopback Host, form tokens."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from amcp.api.http import create_app
from amcp.memory import Memory

BASE = "http://127.0.0.1"
XSS = '<script>alert("x")</script><img src=x onerror=alert(1)>"\'&'


def make_memory(tmp_path: Path, name: str = "m.db") -> Memory:
    return Memory(tmp_path / name, embedder="hashing")


@contextlib.contextmanager
def ui_client(memory: Memory, **kwargs: Any) -> Iterator[TestClient]:
    with TestClient(create_app(memory, **kwargs), base_url=BASE) as client:
        yield client


def field(html: str, name: str) -> str:
    """The value of the first hidden input ``name`` in a page."""
    m = re.search(rf'name="{name}" value="([^"]*)"', html)
    assert m is not None, f"no {name} field in the page"
    return m.group(1)


def sign_in(client: TestClient, token: str) -> None:
    page = client.get("/ui/login")
    r = client.post("/ui/login", data={"csrf": field(page.text, "csrf"), "token": token},
                    follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/ui", r.text


__all__ = ["BASE", "XSS", "field", "make_memory", "sign_in", "ui_client"]
