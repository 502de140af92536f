"""Multiple-choice answers, read by one rule in every chapter.

A quiz answer is one letter as a string. Case and surrounding spaces do not matter, so
``"b"``, ``"B"`` and ``" b "`` are the same answer. :func:`check_choice` applies that rule and,
for anything else, fails like every course check (``CheckFailed``) with a message that lists
the valid letters, never the right one. :func:`check_option` grades an answer: a hidden test gives
it the feedback of each wrong option (the misconception that option stands for), so the right
letter is written nowhere a student reads. :func:`check_number` and :func:`check_prediction` do the
same for a number the student predicts before a cell measures it: the expected value and the
known wrong reasonings live only in the hidden test.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

from .checks import CheckFailed

__all__ = ["check_choice", "check_number", "check_option", "check_prediction"]


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


def check_option(name: str, answer: Any, wrong: dict[str, str], letters: str = "abcd") -> str:
    """Pass if ``answer`` is the one letter of ``letters`` missing from ``wrong``; else fail with that option's feedback.

    ``wrong`` maps each wrong letter to what is wrong with its reasoning, so
    ``check_option("Q1", "a", {"a": "1 is the spread after the division", "b": ..., "d": ...})``
    fails with 'Q1 is not right: (a) 1 is the spread after the division'.
    """
    letters = letters.lower()
    right = [letter for letter in letters if letter not in wrong]
    if len(right) != 1 or not set(wrong) <= set(letters):
        raise ValueError(f"{name}: feedback must cover every letter of {letters!r} but one, the right answer")
    letter = check_choice(name, answer, letters)
    if letter in wrong:
        raise CheckFailed(f"{name} is not right: ({letter}) {wrong[letter]}")
    return letter


def check_number(name: str, answer: Any) -> float:
    """Return ``answer`` as a float; fail unless it is one finite real number (a bool or a string is not)."""
    if answer is None:
        raise CheckFailed(f"{name} is still None: replace None with your prediction, a number")
    if isinstance(answer, numbers.Real) and not isinstance(answer, bool) and math.isfinite(float(answer)):
        return float(answer)
    raise CheckFailed(f"{name} is {answer!r}: write your prediction as one finite number, such as 0.5 or 1200")


def check_prediction(name: str, answer: Any, expected: float, hint: str, rel: float = 0.05,
                     known: tuple[tuple[float, str], ...] = ()) -> float:
    """Pass if ``answer`` is within ``rel`` of ``expected``; else fail, naming the reasoning of a known wrong value.

    ``known`` pairs a number that a known mistake gives with what that mistake is, so a student
    who answers 400 for a standard deviation of 20 reads 'that is the variance ...'; any other wrong
    number gets ``hint``. Neither message states ``expected``.
    """
    value = check_number(name, answer)
    if math.isclose(value, expected, rel_tol=rel):
        return value
    for wrong, reasoning in known:
        if math.isclose(value, wrong, rel_tol=rel, abs_tol=1e-12):
            raise CheckFailed(f"{name} = {value:g} is not right: {reasoning}")
    tolerance = "only the exact number counts" if rel == 0 else f"a prediction within {rel * 100:g} % counts"
    raise CheckFailed(f"{name} = {value:g} is not right ({tolerance}): {hint}")
