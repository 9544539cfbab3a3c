"""Small talk: a greeting, thanks, a goodbye, or a question about the assistant itself.

The router's one exception for a model that cannot route (`ModelProfile.routes_itself`
False): with files in the session every other message runs code, so this errs the
other way and calls only a short message small talk.
"""

from __future__ import annotations

import re

_MAX_WORDS = 6  # "hi there, how are you today?"; a longer message is a request
_GREETING = re.compile(
    r"^(?:hi|hello|hey|hiya|howdy|yo|greetings|good\s+(?:morning|afternoon|evening|day|night)"
    r"|thanks?|thank\s+you|thx|ty|cheers|bye|goodbye|see\s+you|ok(?:ay)?|cool|great|nice"
    r"|awesome|perfect|wow|yes|no|sure)\b",
    re.IGNORECASE,
)
_ABOUT_YOU = re.compile(
    r"\b(?:who|what)\s+are\s+you\b|\bwhat\s+can\s+you\s+do\b|\bhow\s+are\s+you\b"
    r"|\byour\s+name\b|\babout\s+yourself\b|\bintroduce\s+yourself\b|\bare\s+you\s+an?\b"
    r"|\bwhich\s+model\b|\bwhat\s+model\b",
    re.IGNORECASE,
)


def is_small_talk(message: str) -> bool:
    """A greeting, thanks or goodbye with at most two words more, a short question about
    the assistant, or no words at all."""
    words = re.findall(r"[^\W_]+", message)
    if not words:
        return True  # "?", "👍"
    if len(words) > _MAX_WORDS:
        return False
    if _ABOUT_YOU.search(message):
        return True
    text = message.strip()
    greeting = _GREETING.match(text)
    # "hello there", "thanks a lot"; not "Hello, which month sold the most?"
    return greeting is not None and len(re.findall(r"[^\W_]+", text[greeting.end() :])) <= 2
