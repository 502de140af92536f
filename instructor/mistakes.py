"""This course's catalogue of known mistakes, built from the bug zoo (``c.ClassReport.catalogue``).

A mistake's id is its zoo variant's name; it is recognised in a failed test cell when that
cell's message contains the fragment the variant expects there (the fragments the suite
checks, so the catalogue stays in step with the tests). The section to re-teach is the
heading above the first solution cell the variant changes. :data:`FAMILIES` names the
misconceptions that return in later chapters, so the term's report shows each as one row.
"""

from __future__ import annotations

from nboracle.classroom import pipeline as P
from nboracle.classroom.mistakes import sections

from .zoo import variants_for

# family: (the misconception, {assignment: variant names}): one mistake met in several chapters
FAMILIES = {
    "mask-convention": ("a mask read in the other convention: True = keep (the course's masks) against "
                        "True = blocked (nn.MultiheadAttention's)", {
        "03_masks": ["causal_inverted", "padding_inverted", "mask_inverted", "mha_not_inverted",
                     "mha_inverts_padding_only"],
        "04_encoder_block": ["padding_mask_inverted"],
        "08_attention_cost": ["window_inverted"],
        "09_decoder": ["memory_padding_inverted", "causal_mask_inverted"],
    }),
    "no-sqrt-scaling": ("the scores are not divided by sqrt(d)", {
        "01_two_keys": ["attention_no_scale"], "02_scaling": ["statistics_no_scaling"],
        "03_masks": ["attention_no_scale"], "05_positional_encoding": ["scores_no_scale"],
    }),
    "scale-by-d-not-sqrt-d": ("the scores are divided by d instead of sqrt(d)", {
        "01_two_keys": ["attention_divides_by_dk"], "02_scaling": ["statistics_divide_by_dk"]}),
    "softmax-over-queries": ("the softmax normalises over the queries, not over the keys", {
        "01_two_keys": ["attention_softmax_over_queries"], "02_scaling": ["top_weight_softmax_over_queries"],
        "06_multihead_attention": ["softmax_over_queries"],
    }),
    "causal-diagonal-hidden": ("the causal mask hides the diagonal: a token may not see itself", {
        "03_masks": ["causal_diagonal_excluded"], "06_multihead_attention": ["mask_hides_diagonal"]}),
    "causal-mask-keeps-future": ("the causal mask keeps the upper triangle: queries see the future", {
        "06_multihead_attention": ["mask_wrong_triangle"], "08_attention_cost": ["quadratic_mask_keeps_future"]}),
    "no-max-shift": ("softmax without subtracting the maximum first: exp overflows", {
        "01_two_keys": ["softmax_no_max_shift"], "02_scaling": ["top_weight_no_max_shift"]}),
}


def family_of(assignment: str, variant: str) -> str:
    return next((f for f, (_, members) in FAMILIES.items() if variant in members.get(assignment, [])), "")


def catalogue(root, assignment: str) -> dict:
    """{mistake id: {"why", "section", "family", "cells"}} of ``assignment``'s zoo."""
    heading = {}
    for path in sorted(root.folder("release", assignment).glob("*.ipynb")):
        heading.update(sections(P.read_nb(path)))
    out = {}
    for v in variants_for(assignment):
        changed = [*v.edits, *v.replace]
        family = family_of(assignment, v.name)
        out[v.name] = {"why": v.why, "section": next((heading[g] for g in changed if heading.get(g)), ""),
                       "family": family, "family_why": FAMILIES[family][0] if family else "",
                       "cells": dict(v.expect)}
    return out
