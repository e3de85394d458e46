"""Exact and fuzzy fingerprints of section text, and the rule that may forgive an edit.

The fuzzy rule lets a section whose exact hash changed keep its vector when the edit is
typo-level (simhash within `threshold` bits) and touches no token that can change what the
text means: numbers, negations and modals, identifiers, and anything inside code. Code is
judged on the markdown: the retrieval text has lost the code markup, so a command edit
(`pip install x` -> `uv add x`) would read as a change of plain words.

A bit of a simhash flips with probability angle/pi between the two shingle vectors, so on a
300-word chunk one substituted word costs ~2 bits (more than 3 in ~1 case out of 5) and a
5% rewrite ~10: threshold 3 forgives punctuation, case, whitespace and repeated-word fixes
always, single-word typos usually, rewrites never.

Simhash is implemented here rather than taken from PyPI: the `simhash` package (2.1.2) is not a
dependency, hashes character 4-grams with md5 by default and brings nothing over the
few lines below, whose features (word 3-shingles) and hash (blake2b) are ours to pin.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from dataclasses import dataclass

from .retrieval import code_parts

__all__ = [
    "FuzzyVerdict",
    "content_hash",
    "fold_typography",
    "fuzzy_unchanged",
    "hamming",
    "is_meaningful",
    "simhash",
    "word_diff",
]

SIMHASH_MIN_WORDS = 20  # fewer words give too few shingles for a stable fingerprint
_BITS = 64
_SHINGLE = 3


# What a generator's "smart quotes" write (docutils' smartquotes, Python-Markdown's smarty,
# SmartyPants), back to what it read: a redeploy that turns them on or off is no new text.
_TYPOGRAPHY = str.maketrans(
    {"‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"', "‟": '"', "–": "--", "—": "---", "…": "..."}
)


def fold_typography(text: str) -> str:
    """`text` with typographic quotes, dashes and ellipses as their ASCII forms."""
    return text.translate(_TYPOGRAPHY)


def content_hash(text: str) -> str:
    """The fingerprint of a retrieval text, typography folded: curly or straight quotes
    are one text to embed (the text itself keeps them, for readers and citations)."""
    return hashlib.sha256(fold_typography(text).encode("utf-8")).hexdigest()


def _simhash_words(text: str) -> list[str]:
    """Lowercased words without edge punctuation, a word repeated in a row counted once,
    typography folded: punctuation, case, quote style and "the the" typos then cost no
    bits at all."""
    words: list[str] = []
    for raw in fold_typography(text).split():
        w = raw.strip(_EDGE_PUNCT).lower()
        if w and (not words or words[-1] != w):
            words.append(w)
    return words


def simhash(text: str) -> int | None:
    """64-bit simhash of the word 3-shingles; None under 20 words."""
    words = _simhash_words(text)
    if len(words) < SIMHASH_MIN_WORDS:
        return None
    digests = b"".join(
        hashlib.blake2b(" ".join(words[i : i + _SHINGLE]).encode(), digest_size=_BITS // 8).digest()
        for i in range(len(words) - _SHINGLE + 1)
    )
    import numpy as np  # here: the settings (and so every command) import this module, few need numpy

    bits = np.unpackbits(np.frombuffer(digests, dtype=np.uint8)).reshape(-1, _BITS)
    majority = bits.sum(axis=0) * 2 > len(bits)  # each bit set in most shingle hashes
    return int.from_bytes(np.packbits(majority).tobytes(), "big")


def hamming(a: int, b: int) -> int:
    return (a ^ b).bit_count()


def word_diff(old: str, new: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(removed words, added words), in text order.

    Aligned on the word sequences rather than compared as bags, so a word that moved (a
    `not` changing sentence) shows up in both.
    """
    a, b = _middles(old.split(), new.split())
    if len(a) + len(b) > _DIFF_MAX_WORDS:
        return tuple(a), tuple(b)  # not aligned: a diff of words is quadratic
    removed: list[str] = []
    added: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op != "equal":
            removed += a[i1:i2]
            added += b[j1:j2]
    return tuple(removed), tuple(added)


# Words whose addition or removal can flip what a sentence says.
_FLIP_WORDS = frozenset(
    """
    not no nor never none neither without now only unless except always
    must mustn't shall should shouldn't may might can cannot can't could couldn't
    will won't would wouldn't do don't does doesn't did didn't is isn't are aren't
    was wasn't were weren't has hasn't have haven't had hadn't need needn't
    true false yes off enable enabled disable disabled required optional deprecated
    """.split()
)
_EDGE_PUNCT = "\"'.,;:!?*()[]{}<>«»“”‘’"
_CODE_CHARS = re.compile(r"[`=_(){}\[\]<>$@#\\|]")
_CALL = re.compile(r"\w\(")
_INNER_PUNCT = re.compile(r"\w[./:\-+]\w")
_INNER_CAPITAL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]{2}")


def is_meaningful(word: str) -> bool:
    """Whether editing `word` may change meaning: it holds a digit, is a negation / modal /
    boolean word, or looks like an identifier (`max_retries`, `os.path`, `f()`, `a=b`,
    `` `x` ``, `get-token`, `camelCase`, `PascalCase`)."""
    core = word.strip(_EDGE_PUNCT)
    return (
        any(c.isdigit() for c in word)
        or core.lower().replace("’", "'") in _FLIP_WORDS
        or _CODE_CHARS.search(core) is not None
        or "`" in word
        or _CALL.search(word) is not None
        or _INNER_PUNCT.search(core) is not None
        or _INNER_CAPITAL.search(core) is not None
    )


_NEGATING_PREFIXES = frozenset("a an un in im il ir non dis de anti".split())


def _negated_pair(removed: tuple[str, ...], added: tuple[str, ...]) -> bool:
    """Whether a word was swapped for its negation by prefix: sync/async, safe/unsafe."""
    old = {w.strip(_EDGE_PUNCT).lower() for w in removed}
    new = {w.strip(_EDGE_PUNCT).lower() for w in added}
    for a in old:
        for b in new:
            short, long = sorted((a, b), key=len)
            if short and long.endswith(short) and long[: -len(short)] in _NEGATING_PREFIXES:
                return True
    return False


# A typo-level edit touches a few words. On a small vocabulary two different texts can
# land within `threshold` bits by chance; bounding the edit itself keeps a rewrite "changed".
_EDIT_MIN_WORDS = 4
_EDIT_MAX_SHARE = 0.05


def _words_edited(old: str, new: str) -> int:
    """Words removed plus words added, on the simhash's view of the words (case, edge
    punctuation and repeated words do not count)."""
    a, b = _middles(_simhash_words(old), _simhash_words(new))
    if len(a) + len(b) > _DIFF_MAX_WORDS:
        return len(a) + len(b)  # no typo: not aligned (quadratic on repeated words)
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum((i2 - i1) + (j2 - j1) for op, i1, i2, j1, j2 in matcher.get_opcodes() if op != "equal")


# Words between the common head and tail of two texts that `_words_edited` aligns; past
# them, the edit is counted as every one of them (a rewrite). A diff of words is quadratic.
_DIFF_MAX_WORDS = 2_000


def _middles(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    """`a` and `b` without the words they start and end with in common."""
    head = 0
    while head < min(len(a), len(b)) and a[head] == b[head]:
        head += 1
    tail = 0
    while tail < min(len(a), len(b)) - head and a[-1 - tail] == b[-1 - tail]:
        tail += 1
    return a[head : len(a) - tail], b[head : len(b) - tail]


def _max_words_edited(old: str, new: str) -> int:
    longer = max(len(old.split()), len(new.split()))
    return max(_EDIT_MIN_WORDS, int(_EDIT_MAX_SHARE * longer))


@dataclass(frozen=True, slots=True)
class FuzzyVerdict:
    """Why an edited section still counts as unchanged."""

    distance: int
    removed_words: tuple[str, ...]
    added_words: tuple[str, ...]


def fuzzy_unchanged(
    old_text: str,
    new_text: str,
    old_sim: int | None,
    new_sim: int | None,
    threshold: int,
    *,
    old_markdown: str | None = None,
    new_markdown: str | None = None,
) -> FuzzyVerdict | None:
    """A verdict when the edit from `old_text` to `new_text` (retrieval texts) is too small
    to re-embed for, else None (changed). Threshold 0 means exact hashes only: always None.

    `old_markdown`/`new_markdown`, the sections' markdown: any difference in their code
    spans or code blocks is a change, whatever the distance."""
    if threshold <= 0 or old_sim is None or new_sim is None:
        return None
    if old_markdown is not None and new_markdown is not None and code_parts(old_markdown) != code_parts(new_markdown):
        return None
    distance = hamming(old_sim, new_sim)
    if distance > threshold or _words_edited(old_text, new_text) > _max_words_edited(old_text, new_text):
        return None
    removed, added = word_diff(old_text, new_text)
    if any(is_meaningful(w) for w in (*removed, *added)) or _negated_pair(removed, added):
        return None
    return FuzzyVerdict(distance, removed, added)
