"""Multiple-choice answers, read by one rule in every chapter.

A quiz answer is one letter as a string. Case and surrounding spaces do not matter, so
``"b"``, ``"B"`` and ``" b "`` are the same answer. :func:`check_choice` applies that rule and,
for anything else, fails like every course check (``CheckFailed``) with a message that lists
the valid letters, never the right one.
"""

from __future__ import annotations

from typing import Any

from .checks import CheckFailed

__all__ = ["check_choice"]


def _letters_in_words(letters: str) -> str:
    quoted = [f'"{letter}"' for letter in letters]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " or " + quoted[-1]


def check_choice(name: str, answer: Any, letters: str = "abcd") -> str:
    """Return ``answer`` as one lower-case letter of ``letters``; fail unless it is one.

    ``check_choice("Q1", " B ")`` returns ``"b"``; ``check_choice("Q1", "e")`` fails with
    'Q1 is 'e': answer with one letter as a string, "a", "b", "c" or "d" ...'.
    """
    letters = letters.lower()
    if isinstance(answer, str):
        letter = answer.strip().lower()
        if len(letter) == 1 and letter in letters:
            return letter
    raise CheckFailed(
        f"{name} is {answer!r}: answer with one letter as a string, {_letters_in_words(letters)} "
        "(case and surrounding spaces do not matter)")
