"""The calls each exercise's text permits: the review's allow-list (issue 50, item 2).

Where an exercise is to write a computation by hand, a list of forbidden library names is never
complete (``softmin(-x)`` is a softmax, ``Categorical(logits=x).probs`` too, forward-mode AD a
Jacobian). :data:`ALLOWED_CALLS` names instead, per assignment and per name an exercise defines
(the function or class the tests call, as in :mod:`instructor.substitutes`, and for the same reason:
the grade ids are metadata of the student's own file, the name is what the tests grade), the calls
its text permits. ``nboracle.grader.scan.allowed_call_findings`` flags every other call that the
definition, or a helper of the student's it reaches, makes, with its line: a correct answer keeps
its score, and a person looks at whose work it is.

An entry is a library callable by its dotted path (it stands for every path of the same package
ending in the same name: ``torch.exp`` for ``torch.special.exp``), a method by ``.name`` (called on
any value but ``self``), or a builtin by its bare name. Calls of the student's own functions and
classes, of the notebook's provided ones and of a definition's own arguments are always allowed;
the grader's package (``nboracle``) and the course's (``course``) are never listed: an exercise's
answer never calls them.

Each exercise's set is the plain building blocks every chapter teaches (:data:`BASE`: array and
tensor arithmetic, shapes, reductions, builtins, containers), what its text hands the student to
build on (:data:`EXTRA`: ``nn.MultiheadAttention`` in chapter 04's block, ``torch.softmax`` where
the softmax is no longer the exercise), minus what would do its work (the substitutes of
:mod:`instructor.substitutes`). ``tests/test_scan.py`` checks that the solution,
every bug-zoo variant and every alternative raise no finding, and that the library routes of issue
50 raise one naming their line.
"""

from __future__ import annotations

from instructor.substitutes import SUBSTITUTES

BUILTINS = frozenset({
    "abs", "all", "any", "bool", "callable", "dict", "divmod", "enumerate", "filter", "float", "format", "frozenset",
    "getattr", "hasattr", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next",
    "pow", "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "super", "tuple",
    "zip", "ValueError", "TypeError", "IndexError", "KeyError", "RuntimeError", "NotImplementedError",
    "AssertionError",
})
CONTAINER_METHODS = frozenset(f".{name}" for name in (
    "append", "extend", "insert", "pop", "items", "keys", "values", "get", "setdefault", "update", "copy", "sort",
    "index", "count", "join", "split", "strip", "format", "startswith", "endswith", "replace", "lower", "upper",
    "add", "remove", "clear",
))
# methods of arrays and tensors: shapes, dtypes, arithmetic, reductions, masks (never softmax, backward, grad)
ARRAY_METHODS = frozenset(f".{name}" for name in (
    "reshape", "view", "view_as", "transpose", "permute", "swapaxes", "flatten", "unflatten", "unsqueeze", "squeeze",
    "expand", "expand_as", "broadcast_to", "chunk", "split", "unbind", "contiguous", "clone", "detach", "to",
    "float", "double", "half", "long", "int", "bool", "type", "type_as", "astype", "item", "tolist", "numpy", "size",
    "dim", "numel", "sum", "mean", "max", "min", "amax", "amin", "abs", "exp", "log", "log2", "sqrt", "rsqrt", "pow",
    "square", "std", "var", "cumsum", "cumprod", "prod", "all", "any", "argmax", "argmin", "sort", "argsort", "topk",
    "masked_fill", "masked_fill_", "tril", "triu", "flip", "repeat", "repeat_interleave", "new_zeros", "new_ones",
    "new_full", "new_tensor", "fill_", "zero_", "copy_", "clamp", "clamp_min", "clamp_max", "clip", "nan_to_num",
    "cos", "sin", "scatter", "scatter_", "gather", "index_select", "diag", "diagonal", "diag_embed", "matmul",
    "mm", "bmm", "norm", "round", "isfinite", "isnan", "eq", "ne", "lt", "gt", "le", "ge", "sign", "neg",
    "reciprocal", "outer", "unfold", "roll", "narrow", "select", "cat", "where", "dot", "T", "mT", "fill_diagonal_",
    "requires_grad_", "add", "sub", "mul", "div", "add_", "sub_", "mul_", "div_",  # arithmetic by name, in place too
))
NUMPY = frozenset(f"numpy.{name}" for name in (
    "asarray", "array", "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "empty", "eye", "identity",
    "arange", "linspace", "exp", "log", "sqrt", "maximum", "minimum", "max", "min", "amax", "amin", "sum", "mean",
    "std", "var", "abs", "where", "einsum", "matmul", "dot", "outer", "inner", "tensordot", "diag", "diagonal",
    "swapaxes", "moveaxis", "transpose", "reshape", "expand_dims", "squeeze", "stack", "concatenate", "tril",
    "triu", "isfinite", "isnan", "sin", "cos", "power", "square", "clip", "argmax", "argsort", "sort", "cumsum",
    "allclose", "isclose", "broadcast_to", "take_along_axis", "nan_to_num", "ndim", "shape", "newaxis", "float64",
    "float32", "random.default_rng", "random.Generator", "median", "log2", "prod",
))
TORCH = frozenset(f"torch.{name}" for name in (
    "tensor", "as_tensor", "from_numpy", "zeros", "ones", "zeros_like", "ones_like", "full", "full_like", "empty",
    "empty_like", "eye", "arange", "linspace", "exp", "log", "sqrt", "rsqrt", "maximum", "minimum", "max", "min",
    "amax", "amin", "sum", "mean", "abs", "where", "einsum", "matmul", "bmm", "cat", "stack", "vstack", "hstack",
    "tril", "triu", "cumsum", "isfinite", "isnan", "sin", "cos", "pow", "square", "clamp", "argmax", "argsort",
    "sort", "topk", "gather", "scatter", "masked_fill", "block_diag", "randn", "rand", "randint", "randperm",
    "randn_like", "Generator", "manual_seed", "get_default_dtype", "no_grad", "allclose", "equal", "isclose",
    "diag", "diag_embed", "outer", "flip", "chunk", "split", "unbind", "broadcast_to", "nan_to_num", "multinomial",
    "logical_and", "logical_or", "logical_not", "bincount", "finfo", "iinfo", "inference_mode", "enable_grad",
    "cumprod", "prod", "roll",
))
MATH = frozenset(f"math.{name}" for name in ("sqrt", "exp", "log", "log2", "pow", "inf", "pi", "isfinite", "ceil",
                                              "floor", "prod", "fsum", "isclose"))
BASE = BUILTINS | CONTAINER_METHODS | ARRAY_METHODS | NUMPY | TORCH | MATH

# the parts a module of the course is built from, once the text has taught them
LAYERS = frozenset({
    "torch.nn.Module", "torch.nn.Linear", "torch.nn.LayerNorm", "torch.nn.Embedding", "torch.nn.Dropout",
    "torch.nn.ReLU", "torch.nn.GELU", "torch.nn.Sequential", "torch.nn.ModuleList", "torch.nn.ModuleDict",
    "torch.nn.Parameter", "torch.nn.Identity", "torch.nn.functional.relu", "torch.nn.functional.gelu",
    "torch.nn.functional.linear", "torch.nn.functional.dropout", "torch.nn.functional.layer_norm",
    "torch.nn.functional.pad", "torch.nn.functional.elu", "torch.nn.functional.embedding",
    "torch.nn.functional.cross_entropy", "torch.nn.Transformer.generate_square_subsequent_mask",
    ".register_buffer", ".parameters", ".named_parameters", ".modules", ".train", ".eval",
})
SOFTMAX_TAUGHT = frozenset({"torch.softmax", "torch.log_softmax", ".softmax", ".log_softmax"})
# the module a test hands the student's function (chapter 08's block, chapter 10's model): its parts
BLOCK_PARTS = frozenset({".qkv", ".proj", ".ffn", ".head", ".norm", ".norm1", ".norm2", ".token_embedding",
                         ".position_embedding", ".attention"})

# reading Vietnamese syllables (chapter 10's meter): Unicode's own tables, string methods, regular expressions
TEXT = frozenset({"unicodedata.normalize", "unicodedata.combining", "unicodedata.name", "unicodedata.category",
                  "unicodedata.decomposition", "re.compile", "re.match", "re.fullmatch", "re.search", "re.sub",
                  "re.findall", "re.split", ".match", ".fullmatch", ".search", ".sub", ".group", ".groups",
                  ".translate", ".maketrans", ".lstrip", ".rstrip", ".casefold", ".isalpha", ".isspace", "ord", "chr"})

# assignment -> {exercise: what its text hands the student beyond BASE}
EXTRA: dict[str, dict[str, frozenset[str]]] = {
    "01_two_keys": {"softmax": frozenset(), "attention": frozenset()},
    "02_scaling": {"mean_top_weight": SOFTMAX_TAUGHT,
                   "score_statistics": frozenset({".standard_normal", ".normal", ".random", ".uniform"}),  # its draws
                   "softmax_jacobian": frozenset()},
    "03_masks": {"causal_mask": frozenset(), "padding_mask": frozenset(), "masked_softmax": SOFTMAX_TAUGHT,
                 "masked_attention": SOFTMAX_TAUGHT, "to_mha_masks": frozenset(),
                 "future_leak_check": frozenset({".manual_seed"})},
    "04_encoder_block": {"FeedForward": LAYERS, "mha_parameter_count": frozenset(),
                         "EncoderBlock": LAYERS | {"torch.nn.MultiheadAttention"}, "masked_token_loss": frozenset()},
    "05_positional_encoding": {"is_permutation_equivariant": frozenset(), "sinusoidal_encoding": frozenset(),
                               "LearnedPositions": LAYERS, "relative_offsets": frozenset(),
                               "relative_scores": frozenset(), "shift_rotation": frozenset()},
    "06_multihead_attention": {"split_heads": frozenset(), "merge_heads": frozenset(), "fuse_qkv": frozenset(),
                               "MultiHeadSelfAttention": LAYERS | SOFTMAX_TAUGHT | {".qkv"}},
    "07_seq2seq_beam_search": {"length_penalty": frozenset(), "beam_search": frozenset({"heapq.nlargest"}),
                               "make_reversal_batch": LAYERS,
                               "ReversalTransformer": LAYERS | {"torch.nn.Transformer"},
                               "exact_match": frozenset(), "greedy_decode": frozenset(),
                               "beam_decode": SOFTMAX_TAUGHT},
    "08_attention_cost": {"attention_cost": frozenset(), "phi": LAYERS, "linear_attention_quadratic": frozenset(),
                          "linear_attention": frozenset(), "causal_linear_attention_step": frozenset(),
                          "cached_attention_step": SOFTMAX_TAUGHT | BLOCK_PARTS
                          | {"torch.nn.functional.scaled_dot_product_attention"},
                          "sliding_window_mask": frozenset(), "sliding_window_pairs": frozenset()},
    "09_decoder": {"cross_attention": frozenset(),
                   "DecoderBlock": LAYERS | {"torch.nn.MultiheadAttention"},
                   "EncoderDecoder": LAYERS},
    "10_tiny_gpt": {"lm_batch": frozenset(),
                    "MultiHeadSelfAttention": LAYERS | SOFTMAX_TAUGHT | {".qkv",
                                                                         "torch.nn.functional.scaled_dot_product_attention"},
                    "FeedForward": LAYERS, "Block": LAYERS, "GPT": LAYERS | SOFTMAX_TAUGHT,
                    "train_step": frozenset({".zero_grad", ".backward", ".step", "torch.nn.utils.clip_grad_norm_",
                                             ".parameters", "torch.nn.utils.clip_grad.clip_grad_norm_"}),
                    "next_token_probs": SOFTMAX_TAUGHT, "sample_next": frozenset(),
                    "cached_step": LAYERS | SOFTMAX_TAUGHT | BLOCK_PARTS
                    | {"torch.nn.functional.scaled_dot_product_attention"},
                    "generate": frozenset(),
                    "tone": TEXT, "rhyme_part": TEXT, "meter_report": TEXT | {"math.isnan"}},
    "11_modern_decoder": {"rms_norm": frozenset(), "RMSNorm": LAYERS,
                          "rope_tables": frozenset({"torch.polar", "torch.complex"}),
                          "apply_rope": frozenset({"torch.polar", "torch.complex", "torch.view_as_complex",
                                                   "torch.view_as_real"}),
                          "alibi_bias": frozenset(),
                          "SwiGLU": LAYERS | {"torch.nn.functional.silu", "torch.nn.SiLU", "torch.sigmoid"},
                          "GroupedQueryAttention": LAYERS | SOFTMAX_TAUGHT, "tiled_attention": SOFTMAX_TAUGHT,
                          "ModernBlock": LAYERS, "ModernGPT": LAYERS},
}

def _allowed(assignment: str, exercise: str, extra: frozenset[str]) -> tuple[str, ...]:
    return tuple(sorted((BASE | extra) - set(SUBSTITUTES.get(assignment, {}).get(exercise, ()))))


# assignment -> {name an exercise defines: the calls its text permits}
ALLOWED_CALLS: dict[str, dict[str, tuple[str, ...]]] = {
    assignment: {exercise: _allowed(assignment, exercise, extra) for exercise, extra in exercises.items()}
    for assignment, exercises in EXTRA.items()
}


def allowed_calls_for(assignment: str | None) -> dict[str, tuple[str, ...]]:
    """``{exercise name: allowed calls}`` of an assignment (empty for an unknown one or ``None``)."""
    return dict(ALLOWED_CALLS.get(assignment or "", {}))
