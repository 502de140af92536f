"""Architecture diagrams drawn with matplotlib: the encoder block and the encoder-decoder.

The figures are drawn from a small list of boxes per column, so they stay readable and in
step with the text: every sublayer is a labelled box, every residual connection a grey path
that skips its sublayer and rejoins at the addition. Nothing here computes anything; the
functions only draw and return the matplotlib Axes.
"""

from __future__ import annotations

from typing import Any, Sequence

__all__ = ["decoder_block_spec", "draw_encoder_block", "draw_encoder_decoder", "encoder_block_spec"]

# Colours of the kinds of sublayer, the same in every figure.
COLOURS = {
    "attention": "#f6c89f",  # self-attention
    "masked": "#f4a9a8",  # masked (causal) self-attention
    "cross": "#c7b8ea",  # cross-attention
    "ffn": "#a8d5ba",  # position-wise feed-forward
    "norm": "#f3eba5",  # LayerNorm, Add & Norm
    "embed": "#cfe3f7",  # embeddings, output head
    "add": "#ffffff",
}
RESIDUAL = "#7f7f7f"
BOX_HEIGHT = 0.62
GAP = 0.42


def _box(ax, cx: float, y: float, width: float, text: str, colour: str, height: float = BOX_HEIGHT,
         fontsize: float = 9.0) -> tuple[float, float]:
    """A rounded box whose bottom edge is at y; returns (bottom, top)."""
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((cx - width / 2, y), width, height, boxstyle="round,pad=0,rounding_size=0.12",
                                facecolor=colour, edgecolor="#333333", linewidth=1.0, zorder=3))
    ax.text(cx, y + height / 2, text, ha="center", va="center", fontsize=fontsize, zorder=4)
    return y, y + height


def _circle(ax, cx: float, y: float, radius: float = 0.2) -> tuple[float, float]:
    """An addition node (a circled +) whose bottom is at y; returns (bottom, top)."""
    from matplotlib.patches import Circle

    ax.add_patch(Circle((cx, y + radius), radius, facecolor=COLOURS["add"], edgecolor="#333333", zorder=3))
    ax.text(cx, y + radius, "+", ha="center", va="center", fontsize=12, zorder=4)
    return y, y + 2 * radius


def _arrow(ax, start: tuple[float, float], end: tuple[float, float], colour: str = "#333333",
           style: str = "-|>", linewidth: float = 1.2, zorder: int = 2) -> None:
    ax.annotate("", xy=end, xytext=start, zorder=zorder,
                arrowprops=dict(arrowstyle=style, color=colour, linewidth=linewidth, shrinkA=0, shrinkB=0))


def _path(ax, points: Sequence[tuple[float, float]], colour: str = "#333333", linewidth: float = 1.2,
          zorder: int = 2) -> None:
    """A polyline whose last segment ends in an arrow head."""
    xs, ys = zip(*points[:-1], strict=True)
    ax.plot(xs, ys, color=colour, linewidth=linewidth, zorder=zorder, solid_capstyle="round")
    _arrow(ax, points[-2], points[-1], colour=colour, linewidth=linewidth, zorder=zorder)


def _column(ax, cx: float, y: float, width: float, spec: Sequence[tuple], residual_label: bool = True) -> dict:
    """Draw one column of boxes upwards from y, joined by arrows, with residual paths.

    ``spec`` items: ``("box", text, colour_key)``, ``("fork",)`` (a residual path starts at the
    current point), ``("add", text_or_None)`` (the residual rejoins here: an Add & Norm box when
    a text is given, a circled + otherwise). Returns {"top": y of the column's output,
    "boxes": {text: (bottom, top)}}.
    """
    forks: list[float] = []
    boxes: dict[str, tuple[float, float]] = {}
    previous_top = y
    labelled = not residual_label
    offset = width / 2 + 0.3
    for item in spec:
        kind = item[0]
        if kind == "fork":
            forks.append(previous_top + GAP * 0.45)
            continue
        bottom = previous_top + GAP
        _arrow(ax, (cx, previous_top), (cx, bottom))
        if kind == "box":
            _, top = _box(ax, cx, bottom, width, item[1], COLOURS[item[2]])
            boxes[item[1]] = (bottom, top)
        elif kind == "add":
            if item[1]:
                _, top = _box(ax, cx, bottom, width, item[1], COLOURS["norm"])
                join_x, join_y = cx - width / 2, bottom + BOX_HEIGHT / 2
            else:
                _, top = _circle(ax, cx, bottom)
                join_x, join_y = cx - 0.2, bottom + 0.2
            start = forks.pop()
            ax.plot([cx], [start], marker="o", markersize=3.5, color=RESIDUAL, zorder=4)
            _path(ax, [(cx, start), (cx - offset, start), (cx - offset, join_y), (join_x, join_y)],
                  colour=RESIDUAL, linewidth=1.4)
            if not labelled:
                ax.text(cx - offset - 0.08, (start + join_y) / 2, "residual", rotation=90, ha="right", va="center",
                        fontsize=7.5, color=RESIDUAL)
                labelled = True
        else:
            raise ValueError(f"unknown column item {item!r}")
        previous_top = top
    return {"top": previous_top, "boxes": boxes}


def _frame(ax, cx: float, bottom: float, top: float, width: float, label: str) -> None:
    from matplotlib.patches import FancyBboxPatch

    ax.add_patch(FancyBboxPatch((cx - width / 2, bottom), width, top - bottom, boxstyle="round,pad=0,rounding_size=0.2",
                                facecolor="#f7f7f7", edgecolor="#999999", linewidth=1.0, linestyle="--", zorder=1))
    ax.text(cx + width / 2 + 0.12, (bottom + top) / 2, label, ha="left", va="center", fontsize=10, fontweight="bold")


def encoder_block_spec(norm_first: bool = False) -> list[tuple]:
    """The sublayers of chapter 04's encoder block, bottom to top, in either norm placement."""
    if norm_first:
        return [("fork",), ("box", "LayerNorm (norm1)", "norm"), ("box", "multi-head self-attention", "attention"),
                ("add", None), ("fork",), ("box", "LayerNorm (norm2)", "norm"), ("box", "feed-forward (ffn)", "ffn"),
                ("add", None)]
    return [("fork",), ("box", "multi-head self-attention", "attention"), ("add", "Add & LayerNorm (norm1)"),
            ("fork",), ("box", "feed-forward (ffn)", "ffn"), ("add", "Add & LayerNorm (norm2)")]


def decoder_block_spec(norm_first: bool = False) -> list[tuple]:
    """The sublayers of a decoder block, bottom to top, in either norm placement."""
    if norm_first:
        return [("fork",), ("box", "LayerNorm (norm1)", "norm"), ("box", "masked self-attention (causal)", "masked"),
                ("add", None), ("fork",), ("box", "LayerNorm (norm2)", "norm"), ("box", "cross-attention", "cross"),
                ("add", None), ("fork",), ("box", "LayerNorm (norm3)", "norm"), ("box", "feed-forward (ffn)", "ffn"),
                ("add", None)]
    return [("fork",), ("box", "masked self-attention (causal)", "masked"), ("add", "Add & LayerNorm (norm1)"),
            ("fork",), ("box", "cross-attention", "cross"), ("add", "Add & LayerNorm (norm2)"),
            ("fork",), ("box", "feed-forward (ffn)", "ffn"), ("add", "Add & LayerNorm (norm3)")]


def draw_encoder_block(axes: Any = None):
    """Chapter 04's encoder block side by side in its two norm placements; returns the two Axes."""
    import matplotlib.pyplot as plt

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 5.6))
    titles = {False: "post-norm (norm_first=False)\nx = norm(x + sublayer(x))",
              True: "pre-norm (norm_first=True)\nx = x + sublayer(norm(x))"}
    for ax, norm_first in zip(axes, (False, True), strict=True):
        ax.text(2.5, 0.05, "x  (B, T, D)", ha="center", va="bottom", fontsize=9)
        column = _column(ax, 2.5, 0.45, 3.4, encoder_block_spec(norm_first))
        _arrow(ax, (2.5, column["top"]), (2.5, column["top"] + GAP))
        ax.text(2.5, column["top"] + GAP + 0.05, "out  (B, T, D)", ha="center", va="bottom", fontsize=9)
        ax.set_title(titles[norm_first], fontsize=10)
        ax.set_xlim(0, 5)
        ax.set_ylim(0, 7.6)
        ax.set_aspect("equal")
        ax.axis("off")
    axes[0].figure.suptitle("The encoder block: two sublayers, each with a residual path and a LayerNorm",
                            fontsize=11)
    return axes


def draw_encoder_decoder(ax: Any = None, source: Sequence[str] = ("the", "black", "cat"),
                         decoder_input: Sequence[str] = ("<BOS>", "con", "mèo"), next_token: str = "đen",
                         layers: str = "N"):
    """The whole encoder-decoder Transformer (post-norm), with the paths into cross-attention."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 9.6))
    width, enc_x, dec_x = 3.3, 2.4, 8.4
    base = 0.5
    for cx, words in ((enc_x, source), (dec_x, decoder_input)):
        ax.text(cx, base - 0.35, "  ".join(words), ha="center", va="bottom", fontsize=10, style="italic")
    enc_embed = _box(ax, enc_x, base + 0.35, width, "token embedding + position", COLOURS["embed"])
    dec_embed = _box(ax, dec_x, base + 0.35, width, "token embedding + position", COLOURS["embed"])
    for cx in (enc_x, dec_x):
        _arrow(ax, (cx, base + 0.05), (cx, base + 0.35))

    frame_bottom = enc_embed[1] + 0.25
    encoder = _column(ax, enc_x, enc_embed[1], width, encoder_block_spec(False))
    decoder = _column(ax, dec_x, dec_embed[1], width, decoder_block_spec(False), residual_label=False)
    _frame(ax, enc_x, frame_bottom, encoder["top"] + 0.2, width + 1.0, f"× {layers}")
    _frame(ax, dec_x, frame_bottom, decoder["top"] + 0.2, width + 1.0, f"× {layers}")

    enc_norm = _box(ax, enc_x, encoder["top"] + 0.2 + GAP, width, "final LayerNorm", COLOURS["norm"])
    _arrow(ax, (enc_x, encoder["top"]), (enc_x, enc_norm[0]))

    dec_norm = _box(ax, dec_x, decoder["top"] + 0.2 + GAP, width, "final LayerNorm", COLOURS["norm"])
    _arrow(ax, (dec_x, decoder["top"]), (dec_x, dec_norm[0]))
    head = _box(ax, dec_x, dec_norm[1] + GAP, width, "linear head → softmax", COLOURS["embed"])
    _arrow(ax, (dec_x, dec_norm[1]), (dec_x, head[0]))
    _arrow(ax, (dec_x, head[1]), (dec_x, head[1] + GAP))
    ax.text(dec_x, head[1] + GAP + 0.05, f"next token: {next_token}", ha="center", va="bottom", fontsize=10,
            style="italic")

    # The memory feeds the keys and values of every decoder block's cross-attention.
    cross_bottom, _ = decoder["boxes"]["cross-attention"]
    lane = (enc_x + dec_x) / 2 + 0.45
    entry = cross_bottom + BOX_HEIGHT / 2
    memory_top = enc_norm[1] + 0.75
    _path(ax, [(enc_x, enc_norm[1]), (enc_x, memory_top), (lane, memory_top), (lane, entry), (dec_x - width / 2, entry)],
          colour="#5b3fa8", linewidth=1.8)
    ax.text(enc_x - 0.1, (enc_norm[1] + memory_top) / 2, "memory (B, S, D)", ha="right", va="center", fontsize=9,
            fontweight="bold", color="#5b3fa8")
    ax.text((lane + dec_x - width / 2) / 2, entry + 0.08, "K, V", ha="center", va="bottom", fontsize=9,
            fontweight="bold", color="#5b3fa8")
    ax.text(dec_x + 0.1, cross_bottom - GAP / 2, "Q", ha="left", va="center", fontsize=9, fontweight="bold")
    top = head[1] + GAP + 0.6
    ax.text(enc_x, top, "ENCODER", ha="center", va="bottom", fontsize=12, fontweight="bold")
    ax.text(dec_x, top, "DECODER", ha="center", va="bottom", fontsize=12, fontweight="bold")
    ax.set_xlim(0, 11.0)
    ax.set_ylim(-0.1, top + 0.5)
    ax.set_aspect("equal")
    ax.axis("off")
    ax.set_title("The encoder-decoder Transformer, post-norm (this chapter's model and nn.Transformer)", fontsize=11)
    return ax
