"""How the tests read prose: sentences, their content words, and two sentences that say one thing twice."""

from __future__ import annotations

import itertools
import re
import unicodedata
from typing import Final

# Words that carry no rule of their own: two sentences sharing only these say different things.
_GLUE: Final = frozenset(
    "a an the this that these those it its is are was were be been being of on in into to or and "
    "for with by as at from than then there here what when which who whose how so if not no never "
    "any one each every do does did can could may might must should will would".split()
)
_SENTENCE_END: Final = re.compile(r"(?<=[.!?])\s+(?=\S)")
# Overlap coefficient (shared content words / the shorter sentence's) at and above which two
# sentences state one rule twice. The UNKNOWN rule stated twice in a row scores 0.71; no two
# sentences of a description that states each rule once score above 0.35.
SAME_RULE: Final = 0.6


def sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE_END.split(text.strip()) if s.strip()]


def content_words(sentence: str) -> frozenset[str]:
    """The sentence's words, normalised (NFKC, case, punctuation, plural s), without the glue words."""
    flat = unicodedata.normalize("NFKC", sentence).casefold()
    words = re.findall(r"[a-z0-9]+(?:['_:-][a-z0-9]+)*", flat)
    stems = {w[:-1] if len(w) > 4 and w.endswith("s") and not w.endswith("ss") else w for w in words}
    return frozenset(stems - _GLUE)


def overlap(a: str, b: str) -> float:
    x, y = content_words(a), content_words(b)
    if not x or not y:
        return 1.0 if x == y else 0.0
    return len(x & y) / min(len(x), len(y))


def repeated(text: str) -> list[tuple[str, str, float]]:
    """Every pair of sentences in `text` that say the same thing: equal once normalised, or nearly."""
    return [
        (a, b, round(overlap(a, b), 2))
        for a, b in itertools.combinations(sentences(text), 2)
        if content_words(a) == content_words(b) or overlap(a, b) >= SAME_RULE
    ]
