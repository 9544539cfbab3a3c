"""Turning a user's question into a safe FTS5 MATCH expression.

User text is never handed to MATCH as is: `"`, `*`, `-`, `NEAR(`, `OR` and
column filters are FTS5 syntax. Only word tokens are kept, each quoted as a
string, and joined with OR so BM25 ranks passages matching more (and rarer)
terms higher. Common English function words are dropped, so that a question
unrelated to the documents finds nothing instead of every passage with "the".
"""

from __future__ import annotations

import re

MAX_TERMS = 32
MAX_TERM_CHARS = 64

_TOKEN = re.compile(r"[^\W_]+")

_STOPWORDS = """a about above after again all also am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for
    from further had has have having he her here hers him his how i if in into is it its
    itself just me more most my no nor not now of off on once only or other our ours out
    over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours please tell show give find"""
STOPWORDS = frozenset(_STOPWORDS.split())


def query_terms(query: str) -> list[str]:
    """The query's distinct words, lower-cased; stop words dropped unless that leaves none."""
    words: list[str] = []
    for match in _TOKEN.finditer(query.lower()):
        word = match.group()[:MAX_TERM_CHARS]
        if word not in words:
            words.append(word)
    content = [word for word in words if word not in STOPWORDS]
    return (content or words)[:MAX_TERMS]


def match_expression(query: str) -> str | None:
    """`"term1" OR "term2" ...`, or None when the query has no words at all."""
    terms = query_terms(query)
    if not terms:
        return None
    return " OR ".join('"' + term.replace('"', '""') + '"' for term in terms)
