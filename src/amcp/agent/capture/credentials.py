"""Credential detection and redaction (R1 `credential`).

Three kinds of evidence, strongest first: a well-known key format (sk-, ghp_, AKIA, xoxb-,
JWT, PEM, connection strings with a password, an AWS secret key beside an AWS key id), an
assignment (`password=…`, `token: …`), and a phrase ("my password is …", "密码是…").

One scan (`_candidates`) serves two uses with opposite biases. Capture is conservative:
placeholders ("sk-xxxx", "<your-key>", "${TOKEN}") and lines that present an example are
not the user's secrets, and capturing docs is noise in the encrypted store. Redaction
(`redact_turn`) is liberal: it masks every candidate, placeholders and examples included,
because a plaintext record or a printed line must never show anything key-shaped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from itertools import pairwise

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
# An AWS secret access key is 40 base64 characters with no prefix of its own: only an AWS
# context on the same line (the key id, `aws_secret_access_key`, "AWS") makes one a key
# rather than any hash. Checked for mixed case and digits in `_aws_secret`.
_AWS_SECRET = re.compile(r"(?<![A-Za-z0-9/+=])[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=])")
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
    r"\b(?P<scheme>[a-z][a-z0-9+.-]{1,20})://(?P<user>[^:/@\s]*):(?P<pw>[^/\s]+)@"
    r"(?P<host>[^\s/'\"@]+)"
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
# A line that presents an example or a pretend value is not the user's secret. The words
# must stand alone: "db.example" or "example.com" in a URL is a hostname, not an example.
_EXAMPLE = re.compile(
    r"(?<![\w./@-])(?:e\.g\.|for example|for instance|example|such as|look(?:s)? like|format|"
    r"placeholder|sample|dummy|fake|template|like this|if|suppose|imagine|hypothetically|"
    r"what if|were)(?![\w/-]|\.\w)|"
    r"示例|例如|比如|格式|样例|类似|举例|假的|假设|如果|假如|占位|模板",
    re.I,
)
# What makes a value a placeholder (see `is_placeholder` for why "mostly").
# A reference or an elision, not a value: `<your-key>`, `{token}`, `${GITHUB_TOKEN}`, `$TOKEN`,
# `$(pass show x)`, `%s`, `process.env.X`, `os.environ[...]`, `sk-…abcd`, our own `••••••`.
_REFERENCE = re.compile(
    r"<[^<>]*>|\{[^{}]*\}|\$\{|^\$(?:[A-Z_][A-Z0-9_]*|\(.*\))$|%[sd(]|process\.env|environ|"
    r"\.\.\.|[…•]",
)
_PLACEHOLDER_WORDS = re.compile(
    r"your|key|api|token|secret|here|example|sample|placeholder|redacted|dummy|fake|changeme|"
    r"insert|todo|replace|xxx",
    re.I,
)
_SEPARATORS = re.compile(r"[_\W]")
_FILLER = frozenset("xX*#0.-_")
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
    """A value that is *mostly* a stand-in: a reference, filler, placeholder words, or a
    low-entropy run.

    "Mostly", not "contains": a real key is random, so a common substring inside it
    ("…abcdefgh…", "…EXAMPLE…", "key") is chance. The old substring test called such keys
    fake, so they were neither captured encrypted nor masked and went into plaintext
    snapshots (issue 14, finding 10). Redaction now masks placeholders too, but a false
    "fake" still loses the user's credential record while a false "real" costs one extra
    encrypted record, so the rule errs towards real.
    """
    if value.lower() in _NOT_VALUES or _REFERENCE.search(value):
        return True
    body = _PREFIX.sub("", value) or value
    if sum(c in _FILLER for c in body) * 2 > len(body):  # sk-xxxx…, ghp_****…, 000000
        return True
    chars = _SEPARATORS.sub("", body)
    rest = len(_PLACEHOLDER_WORDS.sub("", chars))  # YOUR_API_KEY, your-token-here
    if rest < len(chars) and (rest < 6 or rest * 2 < len(chars)):
        return True
    return len(set(body.lower())) < 5 or _mostly_ascending(body)  # sk-aaaa…, abcdef123456


def _mostly_ascending(body: str) -> bool:
    """Three quarters of the characters sit in runs like abcdef or 12345 (4+ long): a typed
    stand-in. In a random key a 4-run starts at a given place with odds of about 1 in
    50 000, so a real key is never mostly runs; a hand-typed "…kLmN…StUv…" (a common test
    value) is not flagged either, since it is under three quarters runs."""
    low = body.lower()
    in_runs, run = 0, 1
    for a, b in pairwise(low):
        if ord(b) - ord(a) == 1:
            run += 1
            continue
        in_runs += run if run >= 4 else 0
        run = 1
    in_runs += run if run >= 4 else 0
    return in_runs * 4 >= len(low) * 3


def _password_shaped(value: str) -> bool:
    """For phrase/assignment values: a password-like token, not an English word."""
    if len(value) < 4 or value.lower() in _NOT_VALUES:
        return False
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    mixed = value.lower() != value and value.upper() != value
    return has_digit or has_symbol or mixed or len(value) >= 12


def _aws_secret(value: str, line: str) -> bool:
    low = line.lower()
    return (("aws" in low or "akia" in low or "asia" in low)
            and any(c.isdigit() for c in value) and value.lower() != value
            and value.upper() != value)


def _line_spans(text: str) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for line in text.split("\n"):
        spans.append((pos, pos + len(line)))
        pos += len(line) + 1
    return spans


@dataclass(frozen=True, slots=True)
class _Candidate:
    hit: CredentialHit
    example: bool  # on a line that presents an example ("for example", "if", "示例")
    placeholder: bool  # the value is a stand-in (`is_placeholder`)


def _candidates(text: str) -> list[_Candidate]:
    """Every key-shaped span of `text`, non-overlapping, in order, stronger evidence first.

    One scan serves both uses: capture keeps the real, non-example ones; redaction masks
    all of them, because a plaintext summary must not show a key even from an example.
    """
    if not _hinted(text):
        return []
    found: list[_Candidate] = []
    example_lines: list[tuple[int, int]] | None = None

    def add(hit: CredentialHit, placeholder: bool) -> None:
        nonlocal example_lines
        if any(hit.start < c.hit.end and c.hit.start < hit.end for c in found):
            return
        if example_lines is None:  # computed once, and only when something matched
            example_lines = [(x, y) for x, y in _line_spans(text) if _EXAMPLE.search(text[x:y])]
        example = any(x <= hit.start <= y for x, y in example_lines)
        found.append(_Candidate(hit, example, placeholder))

    _strong_candidates(text, add)
    _weak_candidates(text, add)
    found.sort(key=lambda c: c.hit.start)
    return found


def _strong_candidates(text: str, add: Callable[[CredentialHit, bool], None]) -> None:
    """Well-known key formats, PEM blocks, URLs with a password, AWS secret keys."""
    for m in _PEM.finditer(text):
        body = re.sub(r"\s", "", m.group("body"))
        if len(body) >= 8:
            header = f"-----BEGIN {m.group('label')}PRIVATE KEY-----"
            add(CredentialHit("key.pem", "PEM", "private key", m.group(0), header + "…",
                              m.start(), m.end(), True),
                len(body) < 40 or is_placeholder(body[:60]))
    for m in _CONN.finditer(text):
        masked = f"{m.group('scheme')}://{m.group('user')}:••••••@{m.group('host')}"
        add(CredentialHit("conn.url", m.group("scheme"), "connection string", m.group(0),
                          masked, m.start(), m.end(), True), is_placeholder(m.group("pw")))
    for rule, service, kind, pat in _KEY_FORMATS:
        for m in pat.finditer(text):
            value = m.group(0)
            add(CredentialHit(rule, service, kind, value, redact_value(value),
                              m.start(), m.end(), True), is_placeholder(value))
    low = text.lower()
    if "aws" in low or "akia" in low or "asia" in low:
        for m in _AWS_SECRET.finditer(text):
            if _aws_secret(m.group(0), _line_at(text, m.start())):
                add(CredentialHit("key.aws_secret", "AWS", "secret key", m.group(0),
                                  redact_value(m.group(0)), m.start(), m.end(), True),
                    is_placeholder(m.group(0)))


# Where a phrase can start, found cheaply. Every ZH phrase holds a kind word followed by its
# separator; the full pattern, unanchored with a lazy service prefix, costs ~220 µs on a
# 400-character line, so it runs only from just before the first such spot (a match starts
# at most _ZH_LEAD characters before its kind word: "我们的" plus a 12-character service).
_ZH_HINT = re.compile(r"(?:密码|口令|密钥|秘钥|令牌|[Tt]oken|API ?[Kk]ey)\s*(?:是|为|：|:|=)")
_ZH_LEAD = 15
_EN_KINDS = ("pass", "pin", "token", "key", "secret")  # every EN phrase holds one


def _phrase_starts(text: str) -> list[tuple[re.Pattern[str], str, int]]:
    """(pattern, rule, position to search from) for the phrases that can match ``text``."""
    out: list[tuple[re.Pattern[str], str, int]] = []
    low = text.lower()
    if any(k in low for k in _EN_KINDS):
        out.append((_PHRASE_EN, "phrase.en", 0))
    hint = _ZH_HINT.search(text)
    if hint is not None:
        out.append((_PHRASE_ZH, "phrase.zh", max(0, hint.start() - _ZH_LEAD)))
    return out


def _weak_candidates(text: str, add: Callable[[CredentialHit, bool], None]) -> None:
    """Assignments (`password=…`) and phrases ("my password is …", "密码是…")."""
    assign = ":" in text or "=" in text  # _ASSIGN needs one
    for m in _ASSIGN.finditer(text) if assign else ():
        value = _TRAILING.sub("", m.group("val"))
        a = m.start("val")
        if _password_shaped(value):
            add(CredentialHit("assign", m.group("name"), "secret", value, redact_value(value),
                              a, a + len(value), False), is_placeholder(value))
    for pat, rule, start in _phrase_starts(text):
        for m in pat.finditer(text, start):
            value = _TRAILING.sub("", m.group("val"))
            a = m.start("val")
            if _password_shaped(value):
                svc = (m.groupdict().get("svc2") or m.group("svc") or "").strip()
                add(CredentialHit(rule, svc, m.group("kind").lower(), value,
                                  redact_value(value), a, a + len(value), False),
                    is_placeholder(value))


def find_credentials(text: str, *, guarded: bool = True) -> list[CredentialHit]:
    """The user's secrets in `text`: real-looking (not placeholders), non-overlapping, in
    order. `guarded=False` also returns those on example lines."""
    return [c.hit for c in _candidates(text)
            if not c.placeholder and not (guarded and c.example)]


@dataclass(frozen=True, slots=True)
class Redaction:
    """A turn after the one redaction step: `text` is safe to split, summarise, store in
    plaintext and print; `hits` are the secrets to capture (offsets into the original)."""

    text: str
    hits: tuple[CredentialHit, ...]
    # (start, end, masked) spans of the original that `text` replaced, in order
    spans: tuple[tuple[int, int, str], ...] = ()

    def position(self, pos: int) -> int:
        """Where offset `pos` of the original text is in `text`."""
        shift = 0
        for a, b, masked in self.spans:
            if a >= pos:
                break
            shift += len(masked) - (b - a) if b <= pos else a + len(masked) - pos
        return pos + shift


def secret_parts(hit: CredentialHit) -> tuple[str, ...]:
    """The values worth masking wherever they reappear: the whole value, and for a
    connection string also its password, which is the part a user types again alone."""
    if hit.rule == "conn.url" and (m := _CONN.match(hit.value)):
        return (hit.value, m.group("pw"))
    return (hit.value,)


def redact_turn(text: str, known: Iterable[str] = ()) -> Redaction:
    """Mask every key-shaped value of `text`, and every other occurrence of a value found
    (repeated later in the turn without its cue) or `known` (a secret captured earlier in
    the session). Values under 8 characters are not searched for: they would mask words."""
    cands = _candidates(text)
    spans = [(c.hit.start, c.hit.end, c.hit.redacted) for c in cands]
    repeats = {*known, *(v for c in cands for v in secret_parts(c.hit) if len(v) >= 8)}
    for value in sorted(repeats, key=len, reverse=True):  # longest first: no partial masks
        start = text.find(value)
        while start >= 0:
            end = start + len(value)
            if not any(start < b and a < end for a, b, _ in spans):
                spans.append((start, end, redact_value(value)))
            start = text.find(value, end)
    spans.sort()
    parts, pos = [], 0
    for a, b, masked in spans:
        parts += [text[pos:a], masked]
        pos = b
    parts.append(text[pos:])
    hits = tuple(c.hit for c in cands if not c.placeholder and not c.example)
    return Redaction("".join(parts), hits, tuple(spans))


def redact(text: str) -> str:
    """`text` with every key-shaped value replaced by its redacted form."""
    return redact_turn(text).text


def _line_at(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    end = text.find("\n", pos)
    return text[start : end if end >= 0 else len(text)]
