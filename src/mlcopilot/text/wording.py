"""Count phrases in one place: "1 node", "2 nodes", "1 entity", "3 entities".

Every count the product prints goes through :func:`count`, so no message says "1 nodes".
"""

from __future__ import annotations

_VOWELS = frozenset("aeiou")


def plural(noun: str) -> str:
    """The English plural of a countable noun (``entity`` → ``entities``).

    Covers the nouns the product counts, entity type names included (``dataJob`` →
    ``dataJobs``, ``query`` → ``queries``); an irregular one is passed to :func:`count`.
    """
    if noun.endswith("y") and len(noun) > 1 and noun[-2].lower() not in _VOWELS:
        return noun[:-1] + "ies"
    if noun.endswith(("s", "x", "z", "ch", "sh")):
        return noun + "es"
    return noun + "s"


def count(n: int, noun: str, many: str | None = None) -> str:
    """``n`` and ``noun``, singular for exactly one: ``count(1, "node")`` is ``"1 node"``.

    Args:
        n: How many.
        noun: The singular noun.
        many: The plural when :func:`plural` does not form it (``"people"``).
    """
    return f"{n} {noun if n == 1 else (many or plural(noun))}"
