"""A cheap lexical pre-ranking of data files against a question.

Names are split on `_`, `-`, `.`, spaces and camelCase, lower-cased and
singularised crudely, so "monthlySales_2023.csv" matches "monthly sale in
2023". A query token scores by the best place it appears: the file name beats
sheet names, which beat columns and keys, which beat the summary. Naming the
file outright wins. Sorting is stable, so ties keep the given order.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from backend.files.model import FileMetadata

NAME_WEIGHT = 3.0
SHEET_WEIGHT = 2.0
FIELD_WEIGHT = 1.5
SUMMARY_WEIGHT = 0.5
EXACT_NAME_BONUS = 100.0
_WORDS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+")
_STOPWORD_TEXT = """
    a an and are as at by for from how in is it me of on or per show the to was what when
    which with file files data please give tell my our
"""
_STOPWORDS = frozenset(_STOPWORD_TEXT.split())


def tokens(text: str) -> set[str]:
    """Lower-case words of `text`, split on punctuation and camelCase, plural 's' dropped."""
    found = set()
    for word in _WORDS.findall(text):
        word = word.lower()
        if word in _STOPWORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.add(word)
    return found


def _joined(values: Iterable[object]) -> str:
    return " ".join(str(value) for value in values)


def _fields(metadata: FileMetadata) -> list[tuple[float, set[str]]]:
    details = metadata.details
    sheets = details.get("sheet_names", [])
    sheet_columns = [
        column["name"] for sheet in details.get("sheets", []) for column in sheet["columns"]
    ]
    keys = [*details.get("keys", []), *(d["name"] for d in details.get("datasets", []))]
    keys += [variable["name"] for variable in details.get("variables", [])]
    return [
        (NAME_WEIGHT, tokens(metadata.name.rsplit("/", 1)[-1])),
        (SHEET_WEIGHT, tokens(_joined(sheets))),
        (FIELD_WEIGHT, tokens(_joined([*metadata.column_names, *sheet_columns, *keys]))),
        (SUMMARY_WEIGHT, tokens(f"{metadata.summary} {details.get('text', '')}")),
    ]


def _names_file(query: str, metadata: FileMetadata) -> bool:
    base = metadata.name.rsplit("/", 1)[-1].lower()
    stem = base.rsplit(".", 1)[0]
    names = [base] if len(stem) < 4 or stem in _STOPWORDS else [base, stem]
    return any(
        re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", query.lower()) for name in names
    )


def score_file(query: str, metadata: FileMetadata) -> float:
    wanted = tokens(query)
    fields = _fields(metadata)
    score = sum(
        max((weight for weight, words in fields if token in words), default=0.0) for token in wanted
    )
    return score + (EXACT_NAME_BONUS if _names_file(query, metadata) else 0.0)


def rank_files(query: str, files: Sequence[FileMetadata]) -> list[tuple[float, FileMetadata]]:
    """Every file with its score, best first; equal scores keep their order."""
    scored = [(score_file(query, metadata), metadata) for metadata in files]
    return sorted(scored, key=lambda pair: -pair[0])
