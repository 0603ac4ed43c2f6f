"""The instruction-shaped content rules: data, one table per language.

A rule names a shape of text that addresses the *agent* rather than stating something
about the world: an override of its instructions, a role-play or system marker, a tool
invocation, a shell pipe that runs downloaded code, or a request to send data somewhere.
Each is a compiled pattern; ``detector.scan`` reports which matched and where.

To extend: append a ``Rule`` to ``EN``/``ZH`` (or pass your own tuple to ``scan``); keep
each pattern anchored on words an honest memory does not use together. The flag rate on
honest data is measured by ``bench/firewall_flags.py`` (LoCoMo turns, the capture-eval
set): keep it under 0.5 %.
"""

from __future__ import annotations

import re
from typing import NamedTuple


class Rule(NamedTuple):
    name: str  # the label a flagged record carries: "instruction:<name>"
    lang: str
    pattern: re.Pattern[str]
    why: str


def _r(name: str, lang: str, pattern: str, why: str) -> Rule:
    return Rule(name, lang, re.compile(pattern, re.IGNORECASE), why)


# Where data would be sent: an e-mail address or a URL. Also masked in a flagged text.
TARGET = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+|\bhttps?://\S+|\bwww\.\S+", re.IGNORECASE)

_SENSITIVE = (r"(?:all|every|the|your|my|our|their|his|her|this)?\s*(?:full\s+|whole\s+|entire\s+)?"
              r"(?:data|conversation|chat|history|transcript|keys?|api\s*keys?|passwords?|"
              r"credentials?|secrets?|tokens?|customer\s+list|contacts?|files?|emails?|"
              r"messages?|memor(?:y|ies)|context|everything|it|them)")

EN: tuple[Rule, ...] = (
    _r("override", "en",
       r"\b(?:ignore|disregard|forget|override)\s+(?:all\s+|any\s+|the\s+|your\s+)*"
       r"(?:previous|prior|above|earlier|preceding|original|system|existing)\s+"
       r"(?:instructions?|guidance|rules|prompts?|directions?|context)"
       r"|\bdisregard\s+(?:your|all\s+previous|the\s+above)\b",
       "tells the agent to drop its instructions"),
    _r("role_marker", "en",
       r"\b(?:system\s+(?:note|prompt|message|override|instruction)s?\s*[:\-]"
       r"|admin(?:istrator)?\s+override|developer\s+mode|jailbreak|"
       r"(?:note|reminder|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?"
       r"(?:assistant|model|ai|agent|llm|chatbot)\b|new\s+instructions\s*:"
       r"|you\s+are\s+now\s+(?:in\s+|an?\s+|the\s+)?(?:dan|developer|admin|root|system|"
       r"unrestricted|jailbroken|evil))"
       r"|\[(?:system|inst)\]|<\|?(?:system|im_start)\|?>|^#+\s*(?:system|instructions?)\s*$",
       "a role-play or system-message marker"),
    _r("standing_order", "en",
       # Style preferences ("from now on, answer in British English") are the user's to
       # give and are not flagged: only orders that move data or drop instructions are.
       r"\bfrom\s+now\s+on\s*,?\s+(?:you\s+(?:must|will|should|shall)\s+)?"
       r"(?:always\s+|never\s+)?(?:include|send|forward|ignore|disregard|reveal|append|"
       r"email|post|upload|share|leak|copy)\b",
       "a standing order to the agent to move data or drop its instructions"),
    _r("agent_imperative", "en",
       r"\b(?:the\s+)?(?:assistant|ai|model|agent|llm|chatbot)\s+(?:must|should|shall|"
       r"is\s+to|needs\s+to)\s+(?:now\s+|always\s+|never\s+)?(?:ignore|send|forward|reveal|"
       r"run|execute|email|post|upload|obey|comply|delete|exfiltrate)\b",
       "an order addressed to the assistant"),
    _r("shell_pipe", "en",
       r"\b(?:curl|wget|iwr|invoke-webrequest)\b[^|\n;]{0,200}\|\s*(?:sudo\s+)?"
       r"(?:ba|z|da|k)?sh\b|\b(?:curl|wget)\b[^|\n;]{0,200}\|\s*(?:sudo\s+)?python[23]?\b"
       r"|\bbase64\s+(?:-d|--decode)\b[^|\n]{0,80}\|\s*(?:ba)?sh\b|\brm\s+-rf\s+[/~]",
       "runs downloaded or destructive shell code"),
    _r("tool_call", "en",
       r"<\s*tool_call\s*>|\"tool_calls?\"\s*:|\bfunction_call\b"
       r"|\b(?:call|invoke|execute|trigger)\s+(?:the\s+)?(?:tool|function)\s+`?[\w.-]+"
       r"|\b(?:call|invoke|use)\s+(?:the\s+)?`?memory_(?:remember|forget|invalidate|purge)`?",
       "asks for a tool invocation"),
    _r("exfiltration", "en",
       r"\b(?:send|forward|e-?mail|post|upload|exfiltrate|transmit|leak|paste|reveal|"
       r"share|copy)\s+" + _SENSITIVE + r"\b[^.\n]{0,60}?\b(?:to|at|on|into)\s+"
       r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+|www\.\S+)",
       "asks for data to be sent to an address"),
)

ZH: tuple[Rule, ...] = (
    _r("override", "zh",
       r"(?:忽略|无视|忘记|忘掉|不要理会|跳过)(?:掉)?(?:你)?(?:之前|以前|先前|上面|以上|前面|原来|所有|全部)"
       r"(?:的)?(?:所有|全部)?(?:的)?(?:指令|指示|说明|规则|提示|设定|要求)",
       "tells the agent to drop its instructions"),
    _r("role_marker", "zh",
       r"系统(?:提示|通知|指令|消息|备注|说明)\s*[:：]|管理员(?:覆盖|指令|模式|权限覆盖)|开发者模式"
       r"|你现在(?:是|处于)(?:一个)?(?:不受限制|开发者|管理员|系统|越狱)|给(?:助手|模型|AI|智能体)的(?:备注|提醒|指令)"
       r"|新(?:的)?指令\s*[:：]",
       "a role-play or system-message marker"),
    _r("standing_order", "zh",
       r"从现在(?:开始|起)\s*[，,]?\s*(?:你)?(?:必须|要|应该)?(?:始终|总是|永远|每次|一律)"
       r"(?:都)?(?:回复|发送|转发|包含|附上|忽略|执行|透露)",
       "a standing order to the agent for every later turn"),
    _r("exfiltration", "zh",
       r"(?:把|将)[^。\n]{0,40}(?:发送|转发|上传|泄露|发到|发给|邮寄|贴到|粘贴到)[^。\n]{0,20}"
       r"(?:[\w.+-]+@[\w-]+(?:\.[\w-]+)+|https?://\S+)",
       "asks for data to be sent to an address"),
)

RULES: tuple[Rule, ...] = EN + ZH

__all__ = ["EN", "RULES", "TARGET", "ZH", "Rule"]
