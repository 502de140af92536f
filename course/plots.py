"""Plotting helpers shared by the chapters."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .checks import as_numpy
from .language import translate

WEIGHT = "weight"
"""The colour bar's word (``key`` and ``query`` stay English in every edition): in the kernel's language
(:func:`course.language.translate`, the catalog ``i18n/<lang>/messages.po``)."""


def plot_attention(
    weights: Any,
    queries: Sequence[str] | None = None,
    keys: Sequence[str] | None = None,
    title: str | None = None,
    ax: Any = None,
    annotate: bool | None = None,
):
    """Draw a (Lq, Lk) weight matrix as a heatmap: one row per query, one column per key.

    Cells are annotated with their values when the matrix is small (at most 12 x 12), so a
    reader can check the row sums by eye. Returns the matplotlib Axes.
    """
    import matplotlib.pyplot as plt

    w = as_numpy(weights).astype(float)
    if w.ndim != 2:
        raise ValueError(f"plot_attention takes a 2-D (queries, keys) matrix, got shape {w.shape}")
    if ax is None:
        _, ax = plt.subplots(figsize=(1.0 + 0.55 * w.shape[1], 0.8 + 0.5 * w.shape[0]))
    image = ax.imshow(w, cmap="viridis", vmin=0.0, vmax=max(1e-12, float(np.nanmax(w))), aspect="auto")
    ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label=translate(WEIGHT))
    ax.set_xlabel("key")
    ax.set_ylabel("query")
    ax.set_xticks(range(w.shape[1]), labels=list(keys) if keys is not None else range(w.shape[1]))
    ax.set_yticks(range(w.shape[0]), labels=list(queries) if queries is not None else range(w.shape[0]))
    if title:
        ax.set_title(title)
    if annotate is None:
        annotate = max(w.shape) <= 12
    if annotate:
        for (i, j), value in np.ndenumerate(w):
            ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=8,
                    color="black" if value > 0.6 * np.nanmax(w) else "white")
    return ax


def plot_curves(xs: Any, curves: dict[str, Any], xlabel: str, ylabel: str, title: str | None = None,
                logx: bool = False, logy: bool = False, ax: Any = None, marker: str | None = "o",
                hlines: dict[str, float] | None = None):
    """Plot several named y-series against one x-series with labelled axes and a legend.

    ``marker=None`` draws plain lines (a loss over hundreds of steps); ``hlines`` adds named
    reference levels as dashed grey lines (``{"ln 12, uniform guess": math.log(12)}``).
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(5.5, 3.5))
    for label, ys in curves.items():
        ax.plot(as_numpy(xs), as_numpy(ys), marker=marker or "", label=label)
    for label, level in (hlines or {}).items():
        ax.axhline(level, color="gray", linestyle="--", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if logx:
        ax.set_xscale("log")
    if logy:
        ax.set_yscale("log")
    if title:
        ax.set_title(title)
    ax.grid(True, alpha=0.3)
    ax.legend()
    return ax
