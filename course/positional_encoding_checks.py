"""The checks of chapter 05 (positional encoding), which its graded test cells call.

The blocks here are the tests' inputs to your `is_permutation_equivariant`: blocks that know
nothing of positions, and blocks that add a number to each slot. The other checks hand the tests'
own tensors to your `LearnedPositions` and `relative_scores`. A failed check names the call and
says where to look. Nothing here is a solution to an exercise.
"""

from __future__ import annotations

import torch
from nboracle import draw_parameters, load_tensors

from .checks import attempt

ANGLES_HINT = ("the angles are a grid, one row per position and one column per frequency: the positions as a "
               "column (n, 1) times the frequencies as a row (d/2,) broadcast to (n, d/2)")
PERMUTATION_HINT = ("x is (batch, tokens, d) and perm reorders the tokens, axis 1: permute with x[:, perm] and "
                    "block(x)[:, perm], never x[perm], which reorders the sequences of the batch")


def equivariance_verdict(is_permutation_equivariant, block, x, perm, **kwargs):
    """Your ``is_permutation_equivariant(block, x, perm, **kwargs)``; an error reads as one sentence with its likely cause."""
    return attempt("is_permutation_equivariant(block, x, perm)", is_permutation_equivariant, block, x, perm,
                   hint=PERMUTATION_HINT, **kwargs)


def identity(x):
    """A block that returns its input: it knows nothing of positions."""
    return x


def add_slot_signal(x):
    """A block that adds t to every feature of the token in slot t (0, 1, 2, ...): it knows the slots."""
    return x + torch.arange(x.shape[-2], dtype=x.dtype)[:, None]  # (T, 1)


def nearly_equivariant(x):
    """A block that adds 1e-4 * t to the token in slot t: it knows the slots, but only just."""
    return x + 1e-4 * torch.arange(x.shape[-2], dtype=x.dtype)[:, None]  # (T, 1)


def choose_table(positions, max_len, d, generator):
    """The test chooses the table's rows (a frozen table too: whether it learns is another test's question)."""
    table = draw_parameters(positions, generator).get("table.weight")
    if table is None:
        table = torch.randn(max_len, d, generator=generator)
        load_tensors(positions, {"table.weight": table})
    return table


def scores_of(relative_scores, relative_offsets, q, k, r):
    """relative_scores(q, k, r); an error reads as one sentence, naming relative_offsets when it is the cause."""
    T = q.shape[0]
    try:
        offsets = relative_offsets(T)
        whole = offsets.dtype in (torch.int64, torch.int32) and tuple(offsets.shape) == (T, T)
    except Exception:  # noqa: BLE001 (the tests of relative_offsets report its error)
        whole = False
    hint = ("index r with relative_offsets(T) + T - 1, a (T, T) tensor of rows" if whole else
            "relative_offsets(T) fails or gives offsets that cannot index r: make its tests pass first")
    return attempt(f"relative_scores(q, k, r) for T = {T}", relative_scores, q, k, r, hint=hint)
