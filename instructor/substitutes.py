"""The library entry points that would do an exercise's work, chapter by chapter.

A student who hands in ``F.scaled_dot_product_attention`` as chapter 06's multi-head block, or
an ``nn.TransformerDecoderLayer`` as chapter 09's decoder block, passes every test: the answer
is correct, but it is not the student's work. :data:`SUBSTITUTES` names, per assignment and per
name an exercise defines (the function or class the tests call), the entry points that would do
that exercise's work. ``nboracle.grader.scan.library_findings`` flags a definition of that name that
reaches one of them (directly, through an alias or an import, a helper the student wrote, a base
class, ``getattr``); like every finding of the scan it only marks the submission for review and
never changes a score.

The table is keyed by the names the tests call, not by the grade ids of the solution cells: the
grade ids are metadata in the student's own file, while whatever cell the student defines the
name in is the code the tests grade. It lives in the grader (this package), not in the notebook,
for the same reason. ``tests/test_scan.py`` checks that every name is defined by the
assignment's solution, that every public entry point exists in the installed library, and that
no solution, released notebook or zoo answer is flagged.

An entry point is written as its documented dotted path. It matches every spelling that reaches
the same name in the same package: ``torch.nn.functional.softmax`` also stands for
``torch.softmax`` and ``torch.special.softmax``; a method of a class (``torch.Tensor.softmax``)
matches ``.softmax`` called on any value but ``self``. List an entry only where the text asks
the student to write that computation; a function the text tells them to use (chapter 04's
block is built on ``nn.MultiheadAttention``, chapter 08's KV cache calls
``F.scaled_dot_product_attention``, chapter 02's ``mean_top_weight`` may use ``torch.softmax``,
an alternative of its zoo) is no substitute there.
"""

from __future__ import annotations

# chapter 01 asks for a stable softmax written in NumPy
SOFTMAX = (
    "torch.nn.functional.softmax", "torch.nn.functional.log_softmax", "torch.Tensor.softmax",
    "torch.Tensor.log_softmax", "torch.nn.Softmax", "torch.nn.LogSoftmax", "scipy.special.softmax",
    "scipy.special.log_softmax",
)
# torch's attention: the fused kernel, the functional and module forms of multi-head attention,
# and the private kernels behind them
ATTENTION = (
    "torch.nn.functional.scaled_dot_product_attention", "torch.nn.functional.multi_head_attention_forward",
    "torch.nn.MultiheadAttention", "torch.nn.attention.flex_attention.flex_attention",
    "torch._native_multi_head_attention", "torch._scaled_dot_product_attention_math",
    "torch._scaled_dot_product_flash_attention", "torch._scaled_dot_product_flash_attention_for_cpu",
    "torch._scaled_dot_product_efficient_attention", "torch._scaled_dot_product_cudnn_attention",
    "torch._triton_multi_head_attention", "torch._triton_scaled_dot_attention",
)
# whole Transformer layers and stacks
TRANSFORMER_LAYERS = (
    "torch.nn.TransformerEncoderLayer", "torch.nn.TransformerEncoder", "torch.nn.TransformerDecoderLayer",
    "torch.nn.TransformerDecoder", "torch.nn.Transformer", "torch._transformer_encoder_layer_fwd",
)
# chapter 02 derives the softmax Jacobian by hand: automatic differentiation would compute it
JACOBIAN = (
    "torch.autograd.functional.jacobian", "torch.autograd.grad", "torch.func.jacrev", "torch.func.jacfwd",
    "torch.func.vjp", "torch.func.jvp", "torch.Tensor.backward", "functorch.jacrev", "functorch.jacfwd",
)
# chapter 11 writes RMSNorm by hand
RMS_NORMS = ("torch.nn.functional.rms_norm", "torch.nn.RMSNorm")
# chapter 11's tiled attention returns the log-sum-exp it computes on the way
LOGSUMEXP = ("torch.logsumexp", "torch.Tensor.logsumexp", "torch.special.logsumexp")
# chapter 08 counts FLOPs from the shapes: a FLOP counter would measure them
FLOP_COUNTERS = ("torch.utils.flop_counter.FlopCounterMode", "fvcore.nn.FlopCountAnalysis")

# Attributes that continue an entry point without using its work (``nn.Transformer``'s static
# mask builder, an honest way to write a causal mask for ``nn.MultiheadAttention``).
HELPER_ATTRIBUTES = {"generate_square_subsequent_mask"}

# assignment -> {name the exercise defines: entry points that would do its work}
SUBSTITUTES: dict[str, dict[str, tuple[str, ...]]] = {
    "01_two_keys": {"softmax": SOFTMAX, "attention": ATTENTION},
    "02_scaling": {"softmax_jacobian": JACOBIAN},
    "03_masks": {"masked_attention": ATTENTION},
    "04_encoder_block": {"mha_parameter_count": ATTENTION + TRANSFORMER_LAYERS, "EncoderBlock": TRANSFORMER_LAYERS},
    "06_multihead_attention": {"MultiHeadSelfAttention": ATTENTION + TRANSFORMER_LAYERS},
    "08_attention_cost": {"attention_cost": FLOP_COUNTERS},
    "09_decoder": {"DecoderBlock": TRANSFORMER_LAYERS, "EncoderDecoder": TRANSFORMER_LAYERS},
    "10_tiny_gpt": {"MultiHeadSelfAttention": ("torch.nn.MultiheadAttention",
                                               "torch.nn.functional.multi_head_attention_forward") + TRANSFORMER_LAYERS,
                    "Block": TRANSFORMER_LAYERS, "GPT": TRANSFORMER_LAYERS},
    "11_modern_decoder": {"rms_norm": RMS_NORMS, "RMSNorm": RMS_NORMS,
                          "GroupedQueryAttention": ATTENTION + TRANSFORMER_LAYERS,
                          "tiled_attention": ATTENTION + LOGSUMEXP, "ModernBlock": TRANSFORMER_LAYERS,
                          "ModernGPT": TRANSFORMER_LAYERS},
}


def substitutes_for(assignment: str | None) -> dict[str, tuple[str, ...]]:
    """``{exercise name: entry points}`` of an assignment (empty for an unknown one or ``None``)."""
    return dict(SUBSTITUTES.get(assignment or "", {}))
