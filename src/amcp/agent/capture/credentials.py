"""Credential detection and redaction (R1 `credential`).

Three kinds of evidence, strongest first: a well-known key format (sk-, ghp_, AKIA, xoxb-,
JWT, PEM, connection strings with a password), an assignment (`password=…`, `token: …`),
and a phrase ("my password is …", "密码是…"). Placeholders ("sk-xxxx", "<your-key>",
"${TOKEN}") and lines that present an example are refused, because capturing docs as
the user's secrets is both noise and a false alarm for the encrypted store.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# (rule id, service, kind, pattern, prefix kept in the redacted form)
_KEY_FORMATS: tuple[tuple[str, str, str, re.Pattern[str]], ...] = tuple(
    (rule, service, kind, re.compile(pattern))
    for rule, service, kind, pattern in (
        ("key.anthropic", "Anthropic", "API key", r"\bsk-ant-[A-Za-z0-9_-]{20,}"),
        ("key.openai", "OpenAI", "API key", r"\bsk-(?!ant-)(?:proj-)?[A-Za-z0-9_-]{20,}"),
        ("key.github", "GitHub", "token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{40,})"),
        ("key.aws", "AWS", "access key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
        ("key.slack", "Slack", "token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
        ("key.jwt", "JWT", "token", r"\beyJ[\w-]{8,}\.eyJ[\w-]{8,}\.[\w-]{8,}"),
        ("key.google", "Google", "API key", r"\bAIza[\w-]{35}\b"),
        ("key.stripe", "Stripe", "secret key", r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}"),
        ("key.gitlab", "GitLab", "token", r"\bglpat-[\w-]{20,}"),
    )
)
_PREFIX = re.compile(
    r"^(?:sk-ant-|sk-proj-|sk-|gh[pousr]_|github_pat_|AKIA|ASIA|xox[abprs]-|eyJ|AIza|"
    r"[rs]k_(?:live|test)_|glpat-)"
)
_PEM = re.compile(
    r"-----BEGIN (?P<label>(?:[A-Z0-9]+ )*)PRIVATE KEY-----(?P<body>.*?)"
    r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",
    re.S,
)
_CONN = re.compile(
    r"\b(?P<scheme>[a-z][a-z0-9+.-]{1,20})://(?P<user>[^:/@\s]+):(?P<pw>[^@/\s]+)@(?P<host>[^\s/'\"]+)"
)
_ASSIGN = re.compile(
    r"(?P<name>\b(?:[A-Za-z][A-Za-z0-9]*[_-])*(?:password|passwd|pwd|secret|token|api[_-]?key|apikey|"
    r"access[_-]?key|secret[_-]?key|private[_-]?key|client[_-]?secret))\s*[:=]\s*['\"]?"
    r"(?P<val>[^\s'\",;]{4,})",
    re.I,
)
_PHRASE_EN = re.compile(
    r"\b(?:my|our|the)\s+(?:(?P<svc>[\w.-]+(?:\s[\w.-]+)?)\s+)??"
    r"(?P<kind>password|passcode|passphrase|pin|pin code|token|api key|access key|secret key|"
    r"private key|secret|key)\s+(?:for\s+(?P<svc2>[\w.-]+)\s+)?(?:is|=|:)\s+['\"]?"
    r"(?P<val>[!-~]{3,})",
    re.I,
)
_PHRASE_ZH = re.compile(
    r"(?:我的|我们的)?(?P<svc>[A-Za-z0-9\u4e00-\u9fff._-]{0,12}?)"
    r"(?P<kind>密码|口令|密钥|秘钥|令牌|[Tt]oken|API ?[Kk]ey)\s*(?:是|为|：|:|=)\s*"
    r"(?P<val>[!-~]{3,})"
)
# A line that presents an example or a pretend value is not the user's secret.
_EXAMPLE = re.compile(
    r"\b(?:e\.g\.|for example|for instance|example|such as|look(?:s)? like|format|placeholder|"
    r"sample|dummy|fake|template|like this|if|suppose|imagine|hypothetically|what if|were)\b|"
    r"示例|例如|比如|格式|样例|类似|举例|假的|假设|如果|假如|占位|模板",
    re.I,
)
_PLACEHOLDER_WORDS = re.compile(
    r"xxx|\*\*\*|\.\.\.|…|[<>{}$%]|your|example|placeholder|redacted|dummy|fake|sample|"
    r"changeme|insert|todo|environ|process\.env|123456789|abcdefgh|0{6}",
    re.I,
)
_NOT_VALUES = frozenset(
    [
        "none", "null", "nil", "true", "false", "required", "optional", "string", "str",
        "password", "token", "secret", "key", "value", "empty", "unset", "set", "here", "there",
        "what", "which",
    ]
)
_TRAILING = re.compile(r"[.,;:!?)\]}'\"，。；：！？）]+$")


# Everything below needs one of these substrings; checking for them first keeps the
# common case (no secret at all) to one scan of the text.
_HINT = (
    "sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "akia", "asia",
    "xox", "eyj", "aiza", "glpat", "private key", "://",
    "pass", "pwd", "pin", "secret", "token", "key", "密码", "口令", "密钥", "秘钥", "令牌",
)


def _hinted(text: str) -> bool:
    low = text.lower()
    for k in _HINT:  # noqa: SIM110 - any(genexpr) is slower on this hot path
        if k in low:
            return True
    return False


@dataclass(frozen=True, slots=True)
class CredentialHit:
    rule: str
    service: str
    kind: str
    value: str
    redacted: str
    start: int
    end: int
    strong: bool  # a well-known key format rather than a phrase or assignment


def redact_value(value: str) -> str:
    """`sk-…abcd` for long keys; a fixed mask for short ones so neither a suffix nor the
    length of a short password leaks."""
    if len(value) >= 16:
        m = _PREFIX.match(value)
        return f"{m.group(0) if m else ''}…{value[-4:]}"
    return "••••••"


def is_placeholder(value: str) -> bool:
    body = _PREFIX.sub("", value)
    if _PLACEHOLDER_WORDS.search(value) or value.lower() in _NOT_VALUES:
        return True
    # Real keys are high-entropy; "sk-aaaa…" or "ghp_0000…" are stand-ins.
    return len(set(body.lower())) < 5


def _looks_secret(value: str) -> bool:
    """For phrase/assignment values: a password-like token, not an English word."""
    if is_placeholder(value) or len(value) < 4:
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    mixed = value.lower() != value and value.upper() != value
    return has_digit or has_symbol or mixed or len(value) >= 12


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in text.split("\n"):
        spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


def find_credentials(text: str, *, guarded: bool = True) -> list[CredentialHit]:
    """All credential hits in `text`, non-overlapping, in order.

    `guarded=False` skips the example/hypothetical line filter; `redact` uses it so that a
    summary never shows anything key-shaped, even from an example.
    """
    if not _hinted(text):
        return []
    hits: list[CredentialHit] = []
    taken: list[tuple[int, int]] = []
    example_lines: list[tuple[int, int]] | None = None if guarded else []

    def free(a: int, b: int) -> bool:
        nonlocal example_lines
        if any(a < y and x < b for x, y in taken):
            return False
        if example_lines is None:  # computed once, and only when something matched
            example_lines = [(x, y) for x, y in _line_spans(text) if _EXAMPLE.search(text[x:y])]
        return not any(x <= a <= y for x, y in example_lines)

    def add(hit: CredentialHit) -> None:
        hits.append(hit)
        taken.append((hit.start, hit.end))

    for m in _PEM.finditer(text):
        body = re.sub(r"\s", "", m.group("body"))
        if len(body) >= 40 and not is_placeholder(body[:60]) and free(m.start(), m.end()):
            header = f"-----BEGIN {m.group('label')}PRIVATE KEY-----"
            add(CredentialHit("key.pem", "PEM", "private key", m.group(0), header + "…",
                              m.start(), m.end(), True))
    for m in _CONN.finditer(text):
        pw = m.group("pw")
        if not is_placeholder(pw) and free(m.start(), m.end()):
            url = m.group(0)
            masked = f"{m.group('scheme')}://{m.group('user')}:••••••@{m.group('host')}"
            add(CredentialHit("conn.url", m.group("scheme"), "connection string", url, masked,
                              m.start(), m.end(), True))
    for rule, service, kind, pat in _KEY_FORMATS:
        for m in pat.finditer(text):
            value = m.group(0)
            if not is_placeholder(value) and free(m.start(), m.end()):
                add(CredentialHit(rule, service, kind, value, redact_value(value),
                                  m.start(), m.end(), True))
    for m in _ASSIGN.finditer(text):
        value = _TRAILING.sub("", m.group("val"))
        a = m.start("val")
        if _looks_secret(value) and free(a, a + len(value)):
            name = m.group("name")
            add(CredentialHit("assign", name, "secret", value, redact_value(value),
                              a, a + len(value), False))
    for pat, rule in ((_PHRASE_EN, "phrase.en"), (_PHRASE_ZH, "phrase.zh")):
        for m in pat.finditer(text):
            value = _TRAILING.sub("", m.group("val"))
            a = m.start("val")
            if not _looks_secret(value) or not free(a, a + len(value)):
                continue
            svc = (m.groupdict().get("svc2") or m.group("svc") or "").strip()
            add(CredentialHit(rule, svc, m.group("kind").lower(), value, redact_value(value),
                              a, a + len(value), False))
    hits.sort(key=lambda h: h.start)
    return hits


def redact(text: str) -> str:
    """`text` with every key-shaped value replaced by its redacted form."""
    hits = find_credentials(text, guarded=False) if _hinted(text) else []
    for h in sorted(hits, key=lambda h: h.start, reverse=True):
        text = text[: h.start] + h.redacted + text[h.end :]
    return text
