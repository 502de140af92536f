"""Chapter 07's references (the grader's side only): the length penalty the hidden tests divide by, and the
student's own length penalty read as a table, around which Part E judges beam_decode."""

from __future__ import annotations

import math

from course.checks import attempt, check_true


def wu_penalty(n, alpha):
    """The length penalty the tests expect for n tokens (<eos> included), by the chapter's formula."""
    return ((5 + n) / 6) ** alpha


def own_lp(length_penalty, alphas, longest=12):
    """Your length_penalty, read as a table over n = 0..longest for each alpha of a test: Part E's tests judge
    beam_decode around it, so a mistake of length_penalty costs Part A's tests only (test_length_penalty judges it).
    Refused (the test fails, naming length_penalty) when it raises, gives anything but a positive finite number,
    or gives every length the same answer at an alpha above 0 (a constant would let any search match)."""
    hint = "beam_decode divides by your length_penalty: make the test of length_penalty pass first"
    table = {}
    for alpha in alphas:
        values = [attempt(f"length_penalty({n}, {alpha})", length_penalty, n, alpha, hint=hint)
                  for n in range(longest + 1)]
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v > 0
                      for v in values)
        check_true(numbers and (alpha == 0 or len(set(values)) > 1),
                   f"your length_penalty gives no positive number, or the same answer for every length, at alpha "
                   f"{alpha}: {hint}")
        table[alpha] = [float(v) for v in values]
    return lambda n, alpha: table[alpha][n]
