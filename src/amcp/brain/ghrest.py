"""The few GitHub REST v3 calls the issues backend makes, over httpx, with backoff.

Calls (and only these — the test stand-in implements exactly them, checked against
GitHub's published OpenAPI description): list/create labels, list/create issues, list/create
issue comments. Pagination follows the ``Link: <…>; rel="next"`` header.

Retries: 429, 5xx, and a 403 that is a rate limit (``x-ratelimit-remaining: 0`` or a
"secondary rate limit" message) are retried up to ``max_retries`` times, waiting what the
answer asks (``Retry-After``, else until ``x-ratelimit-reset``, capped) or an exponential
backoff. Anything else (401, 404, 422…) is raised at once with GitHub's message. A write
that gives up raises ``RemoteError``; the caller has recorded every write that succeeded.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from amcp.brain.errors import MissingToken, RemoteError
from amcp.errors import ValidationError

API = "https://api.github.com"
API_VERSION = "2022-11-28"
PER_PAGE = 100
MAX_WAIT_S = 60.0  # never sleep longer than this for one retry; give up instead
_REPO = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass(slots=True)
class GitHub:
    repo: str  # "owner/name"
    token: str | None
    base_url: str = API
    max_retries: int = 5
    sleep: Callable[[float], None] = time.sleep
    transport: httpx.BaseTransport | None = None
    retried: int = 0  # how many retries this client made (reported to the user)
    _client: httpx.Client | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.token:
            raise MissingToken("no GitHub token: set GITHUB_TOKEN (or pass --token) to a "
                               "fine-grained token with Issues read/write on " + self.repo)
        if not _REPO.match(self.repo):
            raise ValidationError("repo", f"{self.repo!r} is not owner/name")

    @property
    def client(self) -> httpx.Client:
        if self._client is None:
            self._client = httpx.Client(
                base_url=self.base_url, transport=self.transport, timeout=30.0,
                headers={"Authorization": f"Bearer {self.token}",
                         "Accept": "application/vnd.github+json",
                         "X-GitHub-Api-Version": API_VERSION,
                         "User-Agent": "amcp-brain"},
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # ------------------------------------------------------------------ transport

    def request(self, method: str, url: str, *, params: dict[str, Any] | None = None,
                json: dict[str, Any] | None = None) -> httpx.Response:
        for attempt in range(self.max_retries + 1):
            try:
                res = self.client.request(method, url, params=params, json=json)
            except httpx.HTTPError as exc:  # connection refused, reset, timed out
                if attempt == self.max_retries:
                    raise RemoteError(f"GitHub unreachable for {method} {url}: {exc}") from None
                self._wait(attempt, None)
                continue
            if not self._retryable(res):
                break
            if attempt == self.max_retries:
                raise RemoteError(f"GitHub answered {res.status_code} {self.max_retries + 1} "
                                  f"times for {method} {url} ({_message(res)}); what was "
                                  "written so far is recorded — run again to continue")
            self._wait(attempt, res)
        if res.status_code >= 400:
            raise RemoteError(f"GitHub refused {method} {url}: {res.status_code} "
                              f"{_message(res)}")
        return res

    @staticmethod
    def _retryable(res: httpx.Response) -> bool:
        if res.status_code in RETRY_STATUSES:
            return True
        return res.status_code == 403 and (
            res.headers.get("x-ratelimit-remaining") == "0"
            or "rate limit" in _message(res).lower())

    def _wait(self, attempt: int, res: httpx.Response | None) -> None:
        delay = min(2.0 ** attempt, MAX_WAIT_S)
        if res is not None:
            after = res.headers.get("retry-after")
            reset = res.headers.get("x-ratelimit-reset")
            if after and after.isdigit():
                delay = float(after)
            elif reset and reset.isdigit() and res.headers.get("x-ratelimit-remaining") == "0":
                delay = max(0.0, float(reset) - time.time()) + 1.0
        if delay > MAX_WAIT_S:
            raise RemoteError(f"GitHub asks to wait {delay:.0f} s (rate limit); nothing more "
                              "was written — run again later")
        self.retried += 1
        self.sleep(delay)

    def pages(self, url: str, params: dict[str, Any] | None = None) -> Iterator[Any]:
        query: dict[str, Any] | None = {**(params or {}), "per_page": PER_PAGE}
        next_url: str | None = url
        while next_url:
            res = self.request("GET", next_url, params=query)
            data = res.json()
            if not isinstance(data, list):
                raise RemoteError(f"GitHub answered {url} with {type(data).__name__}, not a "
                                  "list")
            yield from data
            m = _NEXT.search(res.headers.get("link", ""))
            next_url, query = (m.group(1), None) if m else (None, None)

    # ------------------------------------------------------------------ the calls

    def labels(self) -> list[str]:
        return [lb["name"] for lb in self.pages(f"/repos/{self.repo}/labels")]

    def create_label(self, name: str, color: str, description: str) -> None:
        self.request("POST", f"/repos/{self.repo}/labels",
                     json={"name": name, "color": color, "description": description})

    def issues(self, since: str | None = None) -> list[dict[str, Any]]:
        """Every issue (open and closed; pull requests left out), oldest first."""
        params: dict[str, Any] = {"state": "all", "sort": "created", "direction": "asc"}
        if since:
            params["since"] = since
        return [i for i in self.pages(f"/repos/{self.repo}/issues", params)
                if "pull_request" not in i]

    def create_issue(self, title: str, body: str, labels: list[str]) -> dict[str, Any]:
        res = self.request("POST", f"/repos/{self.repo}/issues",
                           json={"title": title, "body": body, "labels": labels})
        data: dict[str, Any] = res.json()
        return data

    def comments(self, number: int) -> list[dict[str, Any]]:
        return list(self.pages(f"/repos/{self.repo}/issues/{number}/comments"))

    def create_comment(self, number: int, body: str) -> dict[str, Any]:
        res = self.request("POST", f"/repos/{self.repo}/issues/{number}/comments",
                           json={"body": body})
        data: dict[str, Any] = res.json()
        return data


def _message(res: httpx.Response) -> str:
    try:
        data = res.json()
    except ValueError:
        return res.text[:200]
    return str(data.get("message", ""))[:200] if isinstance(data, dict) else ""


__all__ = ["API", "GitHub"]
