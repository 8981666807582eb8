"""Text analysis: tokens, stop words per language, stemming, bounded edit distance.

A token is a run of Unicode word characters (``\\w+``). Index terms are the lowercase
tokens minus the language's stop words; stemming is applied at query time by expanding
a query term to every indexed term with the same stem (see postings.py), so one index
serves requests with and without ``enable_stemming``. Only English has a stemmer (the
Porter algorithm, stemmer.py); other languages get stop words and no stemming.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from tuffdb.documents.fulltext.stemmer import stem as porter_stem

if TYPE_CHECKING:
    from collections.abc import Callable

_TOKEN = re.compile(r"\w+", re.UNICODE)
# A batch of texts is tokenised in one pass (batch_terms): joined by GAP, not a word
# character, which comes out as a token of its own between two texts' tokens.
GAP = "\x00"
_TOKENS_AND_GAPS = re.compile(r"\w+|\x00", re.UNICODE)
# ASCII text: bytes.translate lowers word characters and blanks the others, split() cuts
# (3x faster than the regex over the same text); GAP is kept.
_ASCII_FOLD = bytes(
    ord(c.lower()) if _TOKEN.fullmatch(c) or c == GAP else 32 for c in map(chr, range(128))
) + bytes(range(128, 256))

STOP_WORDS: dict[str, frozenset[str]] = {
    "english": frozenset([
        "a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into",
        "is", "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then",
        "there", "these", "they", "this", "to", "was", "will", "with", "from", "has", "have",
        "had", "were", "been", "being", "its", "our", "we", "you", "your", "he", "she", "him",
        "her", "his", "them", "which", "who", "whom", "what", "when", "where", "why", "how",
        "all", "any", "both", "each", "few", "more", "most", "other", "some", "so", "than",
        "too", "very", "can", "do", "does", "did", "i", "me", "my"
    ]),
    "french": frozenset([
        "au", "aux", "avec", "ce", "ces", "dans", "de", "des", "du", "elle", "en", "et",
        "eux", "il", "je", "la", "le", "les", "leur", "lui", "ma", "mais", "me", "mes", "moi",
        "mon", "ne", "nos", "notre", "nous", "on", "ou", "par", "pas", "pour", "qu", "que",
        "qui", "sa", "se", "ses", "son", "sur", "ta", "te", "tes", "toi", "ton", "tu", "un",
        "une", "vos", "votre", "vous", "est"
    ]),
    "german": frozenset([
        "aber", "als", "am", "an", "auch", "auf", "aus", "bei", "bin", "bis", "da", "das",
        "dass", "dem", "den", "der", "des", "die", "ein", "eine", "einem", "einen", "einer",
        "es", "für", "hat", "ich", "ihr", "im", "in", "ist", "mit", "nicht", "noch", "oder",
        "sie", "sind", "so", "und", "von", "war", "was", "wie", "wir", "zu", "zum", "zur"
    ]),
    "spanish": frozenset([
        "a", "al", "como", "con", "de", "del", "el", "en", "es", "la", "las", "lo", "los",
        "mas", "no", "o", "para", "pero", "por", "que", "se", "sin", "su", "sus", "un", "una",
        "y", "ya"
    ]),
}
LANGUAGES = ("english", "french", "german", "spanish", "none")


def _identity(word: str) -> str:
    return word


def stemmer_for(language: str) -> Callable[[str], str]:
    """The stemming function of ``language`` (identity where we have no stemmer)."""
    return porter_stem if language == "english" else _identity


def stop_words(language: str) -> frozenset[str]:
    return STOP_WORDS.get(language, frozenset())


def tokens(text: str) -> list[str]:
    """Word tokens of ``text``, case kept."""
    return _TOKEN.findall(text)


def batch_terms(texts: list[str]) -> list[str]:
    """The lowercase tokens of every text of ``texts`` in order, ``GAP`` between two texts'.

    The same tokens as ``[t.lower() for t in tokens(text)]`` per text, in one pass.
    """
    joined = f" {GAP} ".join(texts)
    if joined.count(GAP) != len(texts) - 1:  # a text holds GAP itself: blank it (not a word char)
        joined = f" {GAP} ".join(t.replace(GAP, " ") for t in texts)
    if joined.isascii():
        return joined.encode("ascii").translate(_ASCII_FOLD).decode("ascii").split()
    return list(map(str.lower, _TOKENS_AND_GAPS.findall(joined)))


def terms(text: str, language: str = "english") -> list[str]:
    """Index terms: lowercase tokens without the language's stop words."""
    stop = stop_words(language)
    return [t for t in (tok.lower() for tok in _TOKEN.findall(text)) if t not in stop]


def edit_distance(a: str, b: str, limit: int) -> int:
    """Levenshtein distance of ``a`` and ``b``, or ``limit + 1`` once it must exceed limit.

    Banded dynamic programming: only cells within ``limit`` of the diagonal are computed,
    and a row whose minimum passes ``limit`` stops the walk (O(limit * len)).
    """
    la, lb = len(a), len(b)
    if abs(la - lb) > limit:
        return limit + 1
    if a == b:
        return 0
    big = limit + 1
    prev = list(range(lb + 1))
    for i in range(1, la + 1):
        lo, hi = max(1, i - limit), min(lb, i + limit)
        cur = [big] * (lb + 1)
        cur[0] = i if i <= limit else big
        ca = a[i - 1]
        best = cur[0]
        for j in range(lo, hi + 1):
            cost = prev[j - 1] + (ca != b[j - 1])
            left = cur[j - 1] + 1
            up = prev[j] + 1
            v = min(cost, left, up)
            cur[j] = v
            best = min(best, v)
        if best > limit:
            return big
        prev = cur
    return min(prev[lb], big)


def deletions(term: str, depth: int) -> set[str]:
    """``term`` and every string made by deleting up to ``depth`` of its characters.

    Two words within edit distance d share a string reachable from both by at most d
    deletions (a substitution is a deletion on each side), so comparing these sets finds
    every fuzzy candidate without walking the vocabulary (the SymSpell idea).
    """
    out = {term}
    frontier = {term}
    for _ in range(depth):
        frontier = {w[:i] + w[i + 1:] for w in frontier for i in range(len(w))}
        out |= frontier
    return out


def fuzzy_budget(term: str, max_edit_distance: int) -> int:
    """Edits allowed for ``term``: none under 3 letters, at most 1 under 6 letters.

    Without this cap "cat" with distance 2 matches every three-letter word.
    """
    n = len(term)
    if n < 3:
        return 0
    if n < 6:
        return min(1, max_edit_distance)
    return max_edit_distance
