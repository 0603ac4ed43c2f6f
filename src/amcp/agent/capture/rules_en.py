"""English R1 rules (credentials are in `credentials.py`).

Every pattern is anchored on the user speaking about themself or their team ("I", "my",
"we", an imperative): that anchor is what keeps third-person chit-chat out.
"""

# ruff: noqa: E501 - pattern tables (with double-width CJK) read better unwrapped than split mid-regex
from __future__ import annotations

import re

from amcp.agent.capture.model import Category, Importance, KnowledgeType, Predicate
from amcp.agent.capture.rules import Builder, Extract, Rule
from amcp.agent.capture.text import clip_object, sentence_case, slug, third_person

_I = re.I

# Imperative verbs after "always"/"never": "never mind", "always the same bug" are not rules.
_VERBS = (
    r"(?:use|run|write|add|include|ask|check|keep|put|format|reply|respond|answer|call|commit|"
    r"test|make|do|give|show|explain|start|end|cite|mention|double-check|wrap|label|document|"
    r"name|type|sort|confirm|spell|push|delete|remove|store|log|print|share|expose|reveal|send|"
    r"deploy|merge|rename|disable|enable|force|modify|change|touch|install|upgrade|guess|assume|"
    r"leave|skip|hardcode|hard-code|translate|speak|indent|lint|review|squash|rebase|sign|ping|"
    r"email|copy|paste|open|close|create|generate|return|summari[sz]e|list|quote|capitali[sz]e|"
    r"append|prefix|mark|tag|set|follow|stick|be|refactor|prefer|talk|suggest|recommend|edit|"
    r"drop|auto-format|pin|comment|mock|stub|bump|lock|tell|read|save|back up|backup)"
)
_LEAD = r"^(?:(?:please|and|also|so|oh|ok|okay|and also|from now on|going forward|in (?:the )?future)[,\s]+)*"
_DEADLINE = re.compile(
    r"\b(?:by|before|until|no later than)\s+(?:the\s+)?(?:end of (?:the )?(?:day|week|month|sprint)|"
    r"eod|eow|noon|midnight|tomorrow|tonight|next \w+|monday|tuesday|wednesday|thursday|friday|"
    r"saturday|sunday|\d{1,2}(?::\d\d)?\s*(?:am|pm)?|\d{4}-\d\d-\d\d|[a-z]+ \d{1,2}(?:st|nd|rd|th)?)|"
    r"\b(?:tomorrow|tonight|today|this (?:morning|afternoon|evening|week|weekend|friday|monday)|"
    r"next (?:week|month|monday|tuesday|wednesday|thursday|friday)|on (?:monday|tuesday|"
    r"wednesday|thursday|friday|saturday|sunday)|at \d{1,2}(?::\d\d)?\s*(?:am|pm)?|"
    r"in \d+ (?:minutes|hours|days|weeks))\b",
    _I,
)
_TASK_VERBS = re.compile(
    r"^(?:send|finish|review|fix|write|submit|call|email|update|deploy|prepare|deliver|ship|"
    r"merge|push|book|pay|file|schedule|draft|complete|test|migrate|upgrade|document|follow up|"
    r"get back|reply|check in|clean up|set up|look into|investigate|refactor|rewrite|release|"
    r"publish|share|upload|renew|cancel|order|buy|sign|read|finalize|finalise)\b",
    _I,
)
_VAGUE = re.compile(
    r"^(?:be honest|think about|see\b|try\b|admit|say|take (?:it|that)|bet|be back|be right back|"
    r"have (?:the|a|an)\b|pass|keep that in mind|never forget)",
    _I,
)
_LIKE_VETO = re.compile(
    r"^(?:it|this|that|these|those|your|the idea|how|what|when|you|him|her|them|him|to think|"
    r"the way you|where)\b",
    _I,
)
_PROJ = (
    r"(?:migration|deployment|deploy|release|build|pr|pull request|branch|feature|refactor(?:ing)?|"
    r"tests?|test suite|ci|pipeline|v\d[\w.]*|version [\w.]+|milestone|sprint|ticket|issue|bug|"
    r"fix|hotfix|mvp|prototype|backend|frontend|api|endpoint|schema|database|db|service|module|"
    r"integration|rollout|launch|upgrade|setup|design doc|spec|docs|documentation|server|"
    r"cluster|staging|production|prod|app|website|site|rc\d*|poc|demo|benchmark|experiment|"
    r"model|training run|training|dataset|job|script|repo|repository|package|library|sdk|cli|"
    r"dashboard|beta|alpha|project|epic|patch|index|cache|queue|worker|infra|"
    r"infrastructure|release candidate|refactor|port)"
)
_STATE = (
    r"(?P<state>done|finished|complete|completed|merged|deployed|released|shipped|live|out|broken|"
    r"failing|blocked|green|red|passing|on hold|paused|cancell?ed|ready|fixed|resolved|rolled back|"
    r"in review|approved|down|flaky|stuck|behind schedule|delayed)"
)
_PROJ_RE = re.compile(rf"\b{_PROJ}\b", _I)
_ROLE = (
    r"(?:engineer|developer|programmer|scientist|designer|manager|student|teacher|professor|"
    r"doctor|nurse|researcher|analyst|consultant|founder|co-founder|lawyer|architect|writer|cto|"
    r"ceo|pm|intern|accountant|freelancer|devops|sre|administrator|admin|editor|journalist|"
    r"artist|musician|photographer|chef|lecturer|postdoc|recruiter|marketer|dentist|pharmacist|"
    r"veterinarian|pilot|mechanic|electrician|contractor|tester|lead|director|maintainer|"
    r"contributor|hobbyist|vegetarian|vegan|parent|mom|dad|retiree|entrepreneur|coder)"
)


def _u(text: str) -> str:
    """Rewrite to third person and clip to one fact."""
    return third_person(text, "en")


def _prefer(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    return Extract(f"User prefers {obj}", f"User.Preference.{slug(obj)}", obj)


def _rather(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    return Extract(f"User would rather {_u(obj)}", f"User.Preference.{slug(obj)}", obj)


def _like(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    if _LIKE_VETO.match(obj):
        return None
    verb = m.group("verb").lower()
    if verb in {"hate", "dislike", "can't stand", "cannot stand", "detest"}:
        return Extract(f"User dislikes {obj}", f"User.Preference.{slug(obj)}", obj,
                       predicate=Predicate.CONFLICTS_WITH)
    return Extract(f"User likes {obj}", f"User.Preference.{slug(obj)}", obj)


def _favourite(m: re.Match[str]) -> Extract | None:
    what, obj = m.group("what").strip(), clip_object(m.group("obj"))
    return Extract(f"User's preferred {what} is {obj}", f"User.Preference.{slug(what)}", obj)


def _always(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    return Extract(f"User rule: always {_u(obj)}", f"User.Rule.{slug(obj)}", obj,
                   predicate=Predicate.REQUIRES, importance=Importance.CRITICAL,
                   amf_type=KnowledgeType.PRINCIPLE)


def _i_always(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    word = m.group(0).split()[1].lower()  # always / never / only
    return Extract(f"User habit: {word} {obj}", f"User.Habit.{slug(obj)}", obj,
                   predicate=Predicate.REQUIRES, importance=Importance.CRITICAL,
                   amf_type=KnowledgeType.PRINCIPLE)


def _never(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    return Extract(f"User rule: never {_u(obj)}", f"User.Rule.{slug(obj)}", obj,
                   predicate=Predicate.CONFLICTS_WITH, importance=Importance.CRITICAL,
                   amf_type=KnowledgeType.PRINCIPLE)


def _from_now_on(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    if _STARTS_I_WE.match(obj):  # "from now on I'll…" is a commitment, not a rule
        return None
    return Extract(f"User rule: from now on, {_u(obj)}", f"User.Rule.{slug(obj)}", obj,
                   predicate=Predicate.REQUIRES, importance=Importance.CRITICAL,
                   amf_type=KnowledgeType.PRINCIPLE)


def _decision(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    old = m.groupdict().get("old")
    if old:
        old = clip_object(old)
        return Extract(f"Decision: switch from {old} to {obj}", f"Project.Decision.{slug(obj)}",
                       old, predicate=Predicate.SUPERSEDES)
    head, sep, purpose = obj.partition(" for ")
    if sep and purpose:
        return Extract(f"Decision: use {head} for {purpose}", f"Project.Config.{slug(purpose)}",
                       head)
    verb = (m.groupdict().get("verb") or "use").lower()
    return Extract(f"Decision: {verb} {obj}", f"Project.Decision.{slug(obj)}", obj)


def _decided(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    return Extract(f"Decision: {_u(obj)}", f"Project.Decision.{slug(obj)}", obj)


def _config(m: re.Match[str]) -> Extract | None:
    raw = m.groupdict().get("attr") or _THE.sub("", _lookback(m, 4))
    attr, val = clip_object(raw), clip_object(m.group("obj"))
    if not attr:
        return None
    if _STARTS_MY_A.match(attr):  # "set my alarm", "set a reminder": not config
        return None
    return Extract(f"Config: {attr} = {val}", f"Project.Config.{slug(attr)}", val)


def _will(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    deadline = _DEADLINE.search(obj)
    modal = m.group("modal").lower().strip()
    if _VAGUE.match(obj) or (not deadline and (modal in {"need to", "have to", "must", "should"}
                                               or not _TASK_VERBS.match(obj))):
        return None
    return Extract(f"User will {_u(obj)}", f"User.Task.{slug(obj)}", obj,
                   importance=Importance.HIGH if deadline else None)


def _remind(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    return Extract(f"Remind user {_u(obj)}", f"User.Task.{slug(obj)}", obj,
                   importance=Importance.HIGH)


def _identity(attr: str, template: str) -> Builder:
    def build(m: re.Match[str]) -> Extract | None:
        obj = clip_object(m.group("obj"))
        if attr == "name" and obj.lower() in _NOT_NAMES:
            return None
        return Extract(template.format(obj), f"User.Identity.{attr}", obj)

    return build


def _role(m: re.Match[str]) -> Extract | None:
    if _ROLE_VETO.search(m.group("obj")):
        return None
    obj = clip_object(m.group("obj") + (m.group("rest") or ""))
    return Extract(f"User is {m.group('art').lower()} {obj}", "User.Identity.role", obj)


def _contact(m: re.Match[str]) -> Extract | None:
    what, obj = m.group("what").lower(), clip_object(m.group("obj"))
    return Extract(f"User's {what} is {obj}", f"User.Identity.{slug(what)}", obj)


def _lookback(m: re.Match[str], words: int) -> str:
    """The last `words` words before the match, within its clause. Patterns anchor on the
    verb and look back, because a pattern that starts with an optional subject is tried at
    every position of the sentence (that was 90% of the matching time)."""
    before = _CLAUSE_START.split(m.string[: m.start()])[-1]
    return " ".join(before.split()[-words:])


def _state(m: re.Match[str]) -> Extract | None:
    window = _lookback(m, 6)
    found = list(_PROJ_RE.finditer(window))
    if not found:
        return None
    subj, state = clean_subject(window), m.group("state").lower()
    if subj is None:
        return None
    rest = clip_object(m.group("rest") or "")
    obj = f"{state} {rest}".strip()
    blocked = state in {"blocked", "stuck", "broken", "failing", "down", "delayed"}
    return Extract(sentence_case(_u(f"{subj} is {obj}")), f"Project.State.{slug(subj)}", obj,
                   importance=Importance.HIGH if blocked else None)


def _blocked(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    return Extract(sentence_case(_u(f"{m.group('who')} blocked on {obj}")), f"Project.Blocker.{slug(obj)}", obj,
                   predicate=Predicate.REQUIRES, importance=Importance.HIGH)


def _did(m: re.Match[str]) -> Extract | None:
    obj = clip_object(m.group("obj"))
    if not _PROJ_RE.search(obj):  # "I finished my dinner" is not project state
        return None
    verb = m.group("verb").lower()
    return Extract(sentence_case(_u(f"{m.group('who')} {verb} {obj}")), f"Project.State.{slug(obj)}",
                   f"{verb}: {obj}")


def clean_subject(subj: str) -> str | None:
    """Keep the noun phrase from its last determiner ("I think the migration" → "the
    migration"); None when it belongs to someone else ("their build")."""
    words = subj.split()
    if any(w.lower() in _OTHERS for w in words):
        return None
    starts = [i for i, w in enumerate(words) if w.lower() in _DETERMINERS]
    return " ".join(words[starts[-1] :] if starts else words[-3:])


_CLAUSE_START = re.compile(r"[,;:()]|\b(?:and|but|so|because|then|that|which)\b", _I)
_THE = re.compile(r"^.*\bthe\s+", _I)
_DETERMINERS = frozenset(["the", "our", "my", "this"])
_OTHERS = frozenset(["their", "his", "her", "your", "its", "someone's"])
_STARTS_I_WE = re.compile(r"(?:i|we)\b", _I)
_STARTS_MY_A = re.compile(r"(?:my|an?)\b", _I)
_ROLE_VETO = re.compile(r"\b(?:fan|of|bit)\b", _I)
_NOT_NAMES = frozenset(
    ["not", "what", "is", "the", "a", "an", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday", "tomorrow", "later", "tonight", "back"]
)

_OBJ = r"(?P<obj>.{2,160})"
_HINTS: dict[str, tuple[str, ...]] = {
    "pref.always": ("always",),
    "pref.never": ("never", "ever"),
    "pref.i_always": ("always", "never", "only"),
    "pref.never_mid": ("ever",),
    "pref.from_now_on": ("from now on", "going forward", "henceforth", "future"),
    "pref.prefer": ("prefer",),
    "pref.rather": ("rather",),
    "pref.favourite": ("favourite", "favorite", "preferred"),
    "pref.like": ("like", "love", "enjoy", "hate", "dislike", "stand", "detest"),
    "commit.remind": ("remind", "forget"),
    "commit.will": ("i'", "i "),
    "decide.switch": ("switch", "mov", "migrat"),
    "decide.use": ("we", "let", "lets", "i"),
    "decide.decided": ("decided", "agreed", "settled", "chose", "picked"),
    "decide.label": ("decision",),
    "config.set": ("set", "configure", "change", "bump", "raise", "lower", "increase", "decrease",
                   "cap", "limit"),
    "config.should_be": ("be set", "configured", "capped", "limited", "fixed at"),
    "id.name": ("name",),
    "id.call_me": ("all me",),
    "id.role": ("i'm", "i am"),
    "id.work": ("work",),
    "id.live": ("live", "reside", "based", "living"),
    "id.from": ("from",),
    "id.moved": ("moved",),
    "id.age": ("years old", "yo", "y/o"),
    "id.contact": ("my",),
    "state.blocked": ("blocked", "stuck"),
    "state.is": ("is", "are", "been", "got"),
    "state.did": ("shipped", "released", "deployed", "merged", "finished", "completed", "launched",
                  "fixed", "migrated", "rolled", "wrapped", "closed"),
}

RULES_EN: tuple[Rule, ...] = tuple(
    Rule(rid, cat, re.compile(pat, flags), build, _HINTS[rid])
    for rid, cat, pat, flags, build in (
        # preference ------------------------------------------------------------------
        ("pref.always", Category.PREFERENCE, rf"{_LEAD}(?:you should |you must |make sure (?:to|you) |"
         rf"remember to |be sure to |i want you to )?always (?P<obj>{_VERBS}\b.{{1,160}})", _I, _always),
        ("pref.never", Category.PREFERENCE, rf"{_LEAD}(?:you should |you must |i want you to )?"
         rf"(?:never|never ever|don'?t ever|do not ever|please don'?t ever) (?P<obj>{_VERBS}\b.{{1,160}})",
         _I, _never),
        # "I always use tabs, never spaces": a habit stated in the first person is a rule
        # for the assistant too. Only with an imperative-class verb ("I always forget" is not).
        ("pref.i_always", Category.PREFERENCE, rf"^\s*I\s+(?:always|never|only)\s+"
         rf"(?P<obj>{_VERBS}\b.{{1,160}})", _I, _i_always),
        ("pref.never_mid", Category.PREFERENCE, rf"\b(?:don'?t|do not) ever (?P<obj>{_VERBS}\b.{{1,160}})",
         _I, _never),
        ("pref.from_now_on", Category.PREFERENCE, rf"\b(?:from now on|going forward|henceforth|"
         rf"in (?:the )?future),?\s+(?:please\s+)?{_OBJ}", _I, _from_now_on),
        ("pref.prefer", Category.PREFERENCE, r"\bI\s+(?:(?:really|much|generally|usually|strongly|"
         rf"definitely|personally|always|do|still|mostly)\s+)?prefer\s+{_OBJ}", _I, _prefer),
        ("pref.rather", Category.PREFERENCE, rf"\bI(?:'d| would)\s+(?:much\s+)?rather\s+{_OBJ}", _I,
         _rather),
        ("pref.favourite", Category.PREFERENCE, r"\bmy\s+(?:favou?rite|preferred)\s+(?P<what>[\w -]{1,30}?)"
         rf"\s+(?:is|are)\s+{_OBJ}", _I, _favourite),
        ("pref.like", Category.PREFERENCE, r"\bI\s+(?:really\s+|absolutely\s+|just\s+|do\s+)?"
         r"(?P<verb>like|love|enjoy|hate|dislike|can't stand|cannot stand|detest)\s+" + _OBJ, _I, _like),
        # commitment ------------------------------------------------------------------
        ("commit.remind", Category.COMMITMENT, r"\b(?:remind me|don'?t let me forget)\s+" + _OBJ, _I,
         _remind),
        ("commit.will", Category.COMMITMENT, r"\bI(?P<modal>'ll|\s+will|'m going to|\s+am going to|"
         r"\s+promise to|\s+plan to|\s+need to|\s+have to|\s+must|\s+should)\s+"
         r"(?:definitely\s+|also\s+|probably\s+|then\s+)?" + _OBJ, _I, _will),
        # config_decision -------------------------------------------------------------
        ("decide.switch", Category.CONFIG_DECISION, r"\b(?:we(?:'ll| will| are|'re)?|let's|I(?:'ll| will)?)"
         r"\s+(?:going to\s+)?(?:switch(?:ing)?|mov(?:e|ing)|migrat(?:e|ing))\s+from\s+(?P<old>.{1,60}?)"
         r"\s+to\s+" + _OBJ, _I, _decision),
        ("decide.use", Category.CONFIG_DECISION, r"\b(?:we(?:'ll| will| are going to|'re going to|"
         r"'re going|'re gonna)|let's|lets|we(?:'re| are) going|I(?:'ll| will|'m going to))\s+"
         r"(?P<verb>use|go with|stick with|adopt|switch to|move to|migrate to|standardi[sz]e on|"
         r"pick|choose|deploy on|host on|run on)\s+" + _OBJ, _I, _decision),
        ("decide.decided", Category.CONFIG_DECISION, r"\b(?:we|I)(?:'ve| have)?\s+(?:finally\s+)?"
         r"(?:decided|agreed|settled|chose|picked)\s+(?:on|to|that|upon)?\s*" + _OBJ, _I, _decided),
        ("decide.label", Category.CONFIG_DECISION, r"^(?:final\s+)?decision\s*(?::|-|is|was)\s*(?:to\s+)?"
         + _OBJ, _I, _decided),
        ("config.set", Category.CONFIG_DECISION, r"^(?:please\s+|let's\s+|we(?:'ll| will| should)\s+|"
         r"I(?:'ll| will)\s+)?(?:set|configure|change|bump|raise|lower|increase|decrease|cap|limit)\s+"
         r"(?:the\s+)?(?P<attr>[\w .-]{1,40}?)\s+(?:to|as|=|at)\s+" + _OBJ, _I, _config),
        ("config.should_be", Category.CONFIG_DECISION, r"\s(?:should|must|will|needs to)\s+be\s+(?:set\s+to|configured\s+(?:to|as)|capped\s+at|"
         r"limited\s+to|fixed\s+at)\s+" + _OBJ, _I, _config),
        # identity --------------------------------------------------------------------
        ("id.name", Category.IDENTITY, r"\b[Mm]y\s+(?:full\s+)?name\s+is\s+"
         r"(?P<obj>[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*){0,3})", 0, _identity("name", "User's name is {}")),
        ("id.call_me", Category.IDENTITY, r"\b(?:[Pp]lease\s+)?[Cc]all\s+me\s+(?P<obj>[A-Z][\w'-]+)"
         , 0, _identity("name", "User goes by {}")),
        ("id.role", Category.IDENTITY, r"\bI(?:'m| am)\s+(?P<art>an?|the)\s+(?P<obj>(?:[\w-]+\s+){0,3}?"
         + _ROLE + r")\b(?P<rest>(?:\s+(?:at|for|in|with|on)\s+[\w .&-]{1,40})?)", _I, _role),
        ("id.work", Category.IDENTITY, r"\bI\s+(?:currently\s+)?work\s+(?:as|at|for)\s+" + _OBJ, _I,
         _identity("employer", "User works {}")),
        ("id.live", Category.IDENTITY, r"\bI(?:\s+currently)?\s*(?:live|reside|'m based|am based|"
         r"'m living|am living)\s+in\s+(?P<obj>[\w .,'-]{2,60})", _I,
         _identity("location", "User lives in {}")),
        ("id.from", Category.IDENTITY, r"\bI(?:'m| am| come)\s+from\s+(?P<obj>[A-Z][\w .,'-]{1,40})", 0,
         _identity("origin", "User is from {}")),
        ("id.moved", Category.IDENTITY, r"\bI\s+(?:just\s+|recently\s+)?moved\s+to\s+"
         r"(?P<obj>[A-Z][\w .,'-]{1,40})", 0, _identity("location", "User moved to {}")),
        ("id.age", Category.IDENTITY, r"\bI(?:'m| am)\s+(?P<obj>\d{1,3})\s+(?:years old|yo|y/o)\b", _I,
         _identity("age", "User is {} years old")),
        ("id.contact", Category.IDENTITY, r"\bmy\s+(?P<what>email(?: address)?|e-mail|phone number|"
         r"github (?:handle|username)|username|handle|birthday|time ?zone|pronouns|native language|"
         r"first language|nationality)\s+(?:is|are)\s+" + _OBJ, _I, _contact),
        # project_state ---------------------------------------------------------------
        ("state.blocked", Category.PROJECT_STATE, r"\b(?P<who>we(?:'re| are)|I(?:'m| am))\s+(?:still\s+|"
         r"currently\s+|now\s+)?(?:blocked|stuck)\s+(?:on|by)\s+" + _OBJ, _I, _blocked),
        ("state.is", Category.PROJECT_STATE, r"\s(?:is|are|has been|have been|got|just got)\s+"
         r"(?:now\s+|finally\s+|already\s+|just\s+|fully\s+|officially\s+|still\s+)?"
         + _STATE + r"\b(?P<rest>.{0,80})", _I, _state),
        ("state.did", Category.PROJECT_STATE, r"\b(?P<who>we|I)(?:'ve| have)?\s+(?:just\s+|finally\s+|"
         r"already\s+)?(?P<verb>shipped|released|deployed|merged|finished|completed|launched|fixed|"
         r"migrated|rolled out|rolled back|wrapped up|closed)\s+" + _OBJ, _I, _did),
    )
)
