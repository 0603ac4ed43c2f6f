"""A local stand-in for the part of GitHub's REST API the issues backend uses, and the
OpenAPI check that keeps it honest.

``octokit_spec()`` installs ``@octokit/openapi`` (GitHub's published OpenAPI description)
with npm into ``.cache/npm/`` of the repository — once; later sessions reuse it — and cuts
out the operations the backend calls, with every component they reference. ``FakeGitHub``
serves those operations over real HTTP on 127.0.0.1 and validates **every** request it
receives and every response it sends with ``openapi-core`` against that description;
whatever fails is collected in ``errors`` (the fixture fails the test on any). Faults
(429, 5xx) can be queued; GitHub's description does not list 429/500/502 for these
operations, so those bodies are checked against its ``basic-error`` schema instead.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
NPM_CACHE = ROOT / ".cache" / "npm"
OCTOKIT = "@octokit/openapi@23.0.2"
SPEC_FILE = NPM_CACHE / "octokit" / "node_modules" / "@octokit" / "openapi" / "generated" \
    / "api.github.com.json"
OPERATIONS = (
    ("/repos/{owner}/{repo}/labels", "get"),
    ("/repos/{owner}/{repo}/labels", "post"),
    ("/repos/{owner}/{repo}/issues", "get"),
    ("/repos/{owner}/{repo}/issues", "post"),
    ("/repos/{owner}/{repo}/issues/{issue_number}/comments", "get"),
    ("/repos/{owner}/{repo}/issues/{issue_number}/comments", "post"),
)
TOKEN = "ghp_test_token_for_the_fake"


def npm_install(specs: tuple[str, ...], prefix: Path, sentinel: Path) -> None:
    """``npm install --prefix`` unless ``sentinel`` exists (the cache survives sessions).
    An exclusive lock on the prefix: pytest-xdist workers may ask at the same moment."""
    import fcntl

    if shutil.which("npm") is None:
        import pytest

        pytest.skip("npm is not installed on this machine")
    prefix.mkdir(parents=True, exist_ok=True)
    with (prefix / ".install.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if sentinel.exists():
            return
        subprocess.run(["npm", "install", "--prefix", str(prefix), "--no-audit", "--no-fund",
                        "--loglevel=error", *specs], check=True, capture_output=True,
                       timeout=900)


def octokit_spec() -> dict[str, Any]:
    if not SPEC_FILE.exists():
        npm_install((OCTOKIT,), NPM_CACHE / "octokit", SPEC_FILE)
    full = json.loads(SPEC_FILE.read_text(encoding="utf-8"))
    return subset(full)


def subset(full: dict[str, Any]) -> dict[str, Any]:
    """The operations we use and, transitively, every component they reference."""
    paths: dict[str, Any] = {}
    for path, method in OPERATIONS:
        item = full["paths"][path]
        paths.setdefault(path, {k: v for k, v in item.items() if k == "parameters"})
        paths[path][method] = item[method]
    need: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref not in need:
                need.add(ref)
                target: Any = full
                for part in ref[2:].split("/"):
                    target = target[part]
                walk(target)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(paths)
    walk({"$ref": "#/components/schemas/basic-error"})
    components: dict[str, dict[str, Any]] = {}
    for ref in need:
        _, section, name = ref[2:].split("/")
        components.setdefault(section, {})[name] = full["components"][section][name]
    return {"openapi": full["openapi"], "info": full["info"], "paths": paths,
            "components": components}


class _Req:
    """An openapi-core request made from what the server received."""

    def __init__(self, base: str, method: str, target: str, headers: dict[str, str],
                 body: bytes | None) -> None:
        from openapi_core.datatypes import RequestParameters
        from werkzeug.datastructures import Headers, ImmutableMultiDict

        url = urlsplit(target)
        self.host_url = base
        self.path = url.path
        self.method = method.lower()
        self.body = body or None
        self.content_type = headers.get("content-type", "")
        self.parameters = RequestParameters(query=ImmutableMultiDict(parse_qs(url.query)),
                                            header=Headers(headers))


class _Res:
    def __init__(self, status: int, headers: dict[str, str], data: bytes) -> None:
        from werkzeug.datastructures import Headers

        self.status_code = status
        self.headers = Headers(headers)
        self.content_type = headers.get("Content-Type", "")
        self.data = data


def user(login: str = "amcp-bot") -> dict[str, Any]:
    base = f"https://api.github.com/users/{login}"
    return {
        "login": login, "id": 1, "node_id": "U_1", "avatar_url": "https://example.com/a.png",
        "gravatar_id": "", "url": base, "html_url": f"https://github.com/{login}",
        "followers_url": f"{base}/followers", "following_url": f"{base}/following{{/other}}",
        "gists_url": f"{base}/gists{{/gist_id}}", "starred_url": f"{base}/starred{{/o}}{{/r}}",
        "subscriptions_url": f"{base}/subscriptions", "organizations_url": f"{base}/orgs",
        "repos_url": f"{base}/repos", "events_url": f"{base}/events{{/privacy}}",
        "received_events_url": f"{base}/received_events", "type": "User", "site_admin": False,
    }


class FakeGitHub:
    def __init__(self, spec: dict[str, Any], repo: str = "octo/brain") -> None:
        self.spec = spec
        self.repo = repo
        self.labels: list[dict[str, Any]] = []
        self.issues: list[dict[str, Any]] = []
        self.comments: dict[int, list[dict[str, Any]]] = {}
        self.faults: list[tuple[int, dict[str, str]]] = []  # next answers, then normal
        self.errors: list[str] = []  # OpenAPI validation failures (must stay empty)
        self.log: list[tuple[str, str, int]] = []
        self.validated = 0
        self.clock = 1_796_083_200
        self._ids = 1000
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        from openapi_core import OpenAPI

        self.openapi = OpenAPI.from_dict({**spec, "servers": [{"url": self.base}]})
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    # ------------------------------------------------------------------ helpers for tests

    def now(self) -> str:
        import datetime as dt

        self.clock += 1
        return dt.datetime.fromtimestamp(self.clock, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    def add_issue(self, title: str, body: str, labels: list[str] | None = None,
                  login: str = "someone-else") -> dict[str, Any]:
        with self._lock:
            return self._new_issue(title, body, labels or [], login)

    def add_comment(self, number: int, body: str, login: str = "someone-else"
                    ) -> dict[str, Any]:
        with self._lock:
            return self._new_comment(number, body, login)

    def requests(self, method: str, pattern: str) -> int:
        return sum(1 for m, p, _ in self.log if m == method and re.search(pattern, p))

    # ------------------------------------------------------------------ the resources

    def _next_id(self) -> int:
        self._ids += 1
        return self._ids

    def _label(self, name: str, color: str = "ededed", description: str | None = None
               ) -> dict[str, Any]:
        return {"id": self._next_id(), "node_id": f"LA_{name}", "name": name,
                "url": f"https://api.github.com/repos/{self.repo}/labels/{name}",
                "description": description, "color": color, "default": False}

    def _new_issue(self, title: str, body: str, labels: list[str], login: str
                   ) -> dict[str, Any]:
        number = len(self.issues) + 1
        api = f"https://api.github.com/repos/{self.repo}/issues/{number}"
        stamp = self.now()
        known = {lb["name"]: lb for lb in self.labels}
        issue = {
            "id": self._next_id(), "node_id": f"I_{number}", "url": api,
            "repository_url": f"https://api.github.com/repos/{self.repo}",
            "labels_url": f"{api}/labels{{/name}}", "comments_url": f"{api}/comments",
            "events_url": f"{api}/events", "html_url": f"https://github.com/{self.repo}/"
            f"issues/{number}", "number": number, "state": "open", "title": title,
            "body": body, "user": user(login),
            "labels": [known.get(n) or self._label(n) for n in labels],
            "assignee": None, "assignees": [], "milestone": None, "locked": False,
            "comments": 0, "closed_at": None, "created_at": stamp, "updated_at": stamp,
            "author_association": "OWNER",
        }
        self.issues.append(issue)
        self.comments[number] = []
        return issue

    def _new_comment(self, number: int, body: str, login: str) -> dict[str, Any]:
        issue = self.issues[number - 1]
        cid = self._next_id()
        stamp = self.now()
        comment = {
            "id": cid, "node_id": f"IC_{cid}",
            "url": f"https://api.github.com/repos/{self.repo}/issues/comments/{cid}",
            "html_url": f"{issue['html_url']}#issuecomment-{cid}", "body": body,
            "user": user(login), "created_at": stamp, "updated_at": stamp,
            "issue_url": issue["url"], "author_association": "OWNER",
        }
        self.comments[number].append(comment)
        issue["comments"] += 1
        issue["updated_at"] = stamp
        return comment

    # ------------------------------------------------------------------ HTTP

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _serve(self) -> None:
                size = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(size) if size else None
                headers = {k.lower(): v for k, v in self.headers.items()}
                status, extra, payload = fake.answer(self.command, self.path, headers, body)
                data = json.dumps(payload).encode()
                out = {"Content-Type": "application/json; charset=utf-8", **extra}
                fake.check(self.command, self.path, headers, body, status, out, data)
                self.send_response(status)
                for k, v in out.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PATCH = _serve

        return Handler

    def answer(self, method: str, target: str, headers: dict[str, str], body: bytes | None
               ) -> tuple[int, dict[str, str], Any]:
        url = urlsplit(target)
        with self._lock:
            if self.faults:
                status, extra = self.faults.pop(0)
                self.log.append((method, url.path, status))
                return status, extra, {"message": "Service unavailable" if status >= 500
                                       else "API rate limit exceeded",
                                       "documentation_url": "https://docs.github.com/rest"}
            if headers.get("authorization") != f"Bearer {TOKEN}":
                self.log.append((method, url.path, 401))
                return 401, {}, {"message": "Bad credentials",
                                 "documentation_url": "https://docs.github.com/rest"}
            status, extra, payload = self._route(method, url.path, parse_qs(url.query),
                                                 json.loads(body) if body else None)
            self.log.append((method, url.path, status))
            return status, extra, payload

    def _route(self, method: str, path: str, query: dict[str, list[str]], data: Any
               ) -> tuple[int, dict[str, str], Any]:
        base = f"/repos/{self.repo}"
        if path == f"{base}/labels":
            if method == "POST":
                label = self._label(data["name"], data.get("color", "ededed"),
                                    data.get("description"))
                self.labels.append(label)
                return 201, {"Location": label["url"]}, label
            return self._page(self.labels, query, path)
        if path == f"{base}/issues":
            if method == "POST":
                for name in data.get("labels", []):
                    if name not in {lb["name"] for lb in self.labels}:
                        self.labels.append(self._label(name))
                issue = self._new_issue(data["title"], data.get("body") or "",
                                        data.get("labels", []), "amcp-bot")
                return 201, {"Location": issue["url"]}, issue
            since = (query.get("since") or [""])[0]
            items = [i for i in self.issues if not since or i["updated_at"] >= since]
            return self._page(items, query, path)
        m = re.fullmatch(rf"{re.escape(base)}/issues/(\d+)/comments", path)
        if m and 0 < int(m.group(1)) <= len(self.issues):
            number = int(m.group(1))
            if method == "POST":
                comment = self._new_comment(number, data["body"], "amcp-bot")
                return 201, {"Location": comment["url"]}, comment
            return self._page(self.comments[number], query, path)
        return 404, {}, {"message": "Not Found",
                         "documentation_url": "https://docs.github.com/rest"}

    def _page(self, items: list[Any], query: dict[str, list[str]], path: str
              ) -> tuple[int, dict[str, str], Any]:
        per = int((query.get("per_page") or ["30"])[0])
        page = int((query.get("page") or ["1"])[0])
        chunk = items[(page - 1) * per: page * per]
        extra = {}
        if page * per < len(items):
            rest = {k: v[0] for k, v in query.items()}
            rest["page"] = str(page + 1)
            extra["Link"] = f'<{self.base}{path}?{urlencode(rest)}>; rel="next"'
        return 200, extra, chunk

    # ------------------------------------------------------------------ the OpenAPI check

    def check(self, method: str, target: str, headers: dict[str, str], body: bytes | None,
              status: int, out: dict[str, str], data: bytes) -> None:
        from openapi_core.templating.responses.exceptions import ResponseNotFound

        req = _Req(self.base, method, target, headers, body)
        try:
            self.openapi.validate_request(req)
        except Exception as exc:
            self.errors.append(f"request {method} {target}: {_why(exc)}")
            return
        try:
            self.openapi.validate_response(req, _Res(status, out, data))
        except ResponseNotFound:
            # Not in the description for this operation (429/500/502): GitHub answers
            # those with its basic-error shape; check that instead.
            try:
                jsonschema.validate(json.loads(data),
                                    self.spec["components"]["schemas"]["basic-error"])
            except jsonschema.ValidationError as exc:
                self.errors.append(f"response {status} {method} {target}: {exc.message}")
                return
        except Exception as exc:
            self.errors.append(f"response {status} {method} {target}: {_why(exc)}")
            return
        self.validated += 1


def _why(exc: Exception) -> str:
    inner = getattr(exc, "schema_errors", None) or getattr(exc, "__cause__", None)
    if isinstance(inner, list | tuple):
        return f"{exc}: " + "; ".join(str(getattr(e, "message", e))[:200] for e in inner[:3])
    return f"{exc}: {inner}" if inner else str(exc)


def serve(spec: dict[str, Any]) -> Iterator[FakeGitHub]:
    fake = FakeGitHub(spec)
    try:
        yield fake
    finally:
        fake.close()


__all__ = ["TOKEN", "FakeGitHub", "npm_install", "octokit_spec", "serve", "user"]
