"""Chapter 07's references (the grader's side only): the length penalty the hidden tests divide by."""

from __future__ import annotations


def wu_penalty(n, alpha):
    """The length penalty the tests expect for n tokens (<eos> included), by the chapter's formula."""
    return ((5 + n) / 6) ** alpha
