"""Could this prompt yield an R1 capture? Decided without loading the capture rules.

Without a node, the prompt hook hands the prompt to a detached ``capture-prompt`` process,
which imports the capture engine (~0.3 s of CPU) and opens ``Memory``. Most prompts are
questions, which R1 never captures, so that process usually found nothing at the price of
a fork/exec in the hook and a CPU burst beside the agent on every prompt. This gate says
"no" only when the engine's own first filters would refuse the whole prompt, and "maybe"
otherwise (the detached capture then decides, exactly as before):

* a credential needs one of ``credentials._HINT``'s substrings (``find_credentials``
  answers ``[]`` otherwise);
* every other R1 capture needs a sentence that ``rules.prepare`` lets through, and for
  English it refuses a plain question: a sentence ending in ``?`` or opening with a
  question word, unless it is a polite request ("can you always…?").

So "no" takes an ASCII prompt (no CJK rules, no Unicode quotation marks), without the
characters ``text.strip_quoted`` acts on (removing code or a quotation could reshape the
sentences), without a credential hint, of which every sentence — split as
``text.sentences`` splits — is a plain question. The patterns are copies of the engine's
(importing them would import the engine); tests/agent/hooks/test_capture_gate.py keeps
them equal and checks the gate against the engine itself.
"""

from __future__ import annotations

import re

# = amcp.agent.capture.credentials._HINT
CREDENTIAL_HINTS = (
    "sk-", "sk_", "rk_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat", "akia", "asia",
    "xox", "eyj", "aiza", "glpat", "private key", "://",
    "pass", "pwd", "pin", "secret", "token", "key", "密码", "口令", "密钥", "秘钥", "令牌",
)
QUOTE_CHARS = ("`", '"', "“", "「", "『", ">")  # = amcp.agent.capture.text._QUOTE_CHARS
SENTENCE_END = r"(?<=[.!?;])\s+|(?<=[。！？；!?])|\n+"  # = text._SENTENCE_END
EN_POLITE = r"^(?:please\s+)?(?:can|could|would|will)\s+you\s+(?:please\s+)?"  # = rules
EN_QUESTION_START = (  # = amcp.agent.capture.rules._EN_QUESTION_START
    r"^(?:what|what's|whats|which|who|whom|whose|when|where|why|how|do|does|did|is|are|am|"
    r"was|were|can|could|would|should|will|shall|have|has|may|might|isn't|aren't)\b"
)
# The engine truncates longer turns (CaptureConfig.max_turn_chars, 200 000), which could cut
# a question's "?"; long prompts are left to it.
MAX_GATED_CHARS = 100_000


def may_capture(prompt: str) -> bool:
    """False only when R1 certainly captures nothing from ``prompt`` (see module doc)."""
    if len(prompt) > MAX_GATED_CHARS or not prompt.isascii():
        return True
    low = prompt.lower()
    for hint in CREDENTIAL_HINTS:
        if hint in low:
            return True
    for char in QUOTE_CHARS:
        if char in prompt:
            return True
    for part in re.split(SENTENCE_END, prompt):
        sentence = part.strip()
        if not sentence:
            continue
        if re.match(EN_POLITE, sentence, re.IGNORECASE):
            return True
        if not (sentence.endswith("?") or re.match(EN_QUESTION_START, sentence, re.IGNORECASE)):
            return True
    return False


__all__ = ["may_capture"]
