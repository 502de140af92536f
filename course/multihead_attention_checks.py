"""The checks of chapter 06 (multi-head self-attention), which its graded test cells call.

Each check is handed what it tests (your `MultiHeadSelfAttention` class, and `heads`: your
`split_heads` and `merge_heads`, which the block runs) and checks what the exercise promises of it:
its parameters, shapes, the causal mask, float64 throughout. The graded tests also compare the
block with PyTorch holding the same parameters (`nn.MultiheadAttention`), on the grader's side;
where your split_heads and merge_heads differ from Part A's, the block is judged around them
(`as_gather`), so a mistake in Part A costs Part A's tests only. Nothing here computes a block's
answer.
"""

from __future__ import annotations

import math

import torch
from nboracle import draw_parameters, module_tensors

from .checks import (
    attempt,
    check_dtype,
    check_finite,
    check_rows_sum_to_one,
    check_shape,
    check_true,
)


def check_structure(MultiHeadSelfAttention, d_model, n_heads, max_len):  # noqa: N803 (the class under test)
    """The block's only parameters are qkv and proj; its causal mask is a (max_len, max_len) buffer."""
    block = MultiHeadSelfAttention(d_model, n_heads, max_len)
    held = {t["name"]: t for t in module_tensors(block)}  # what the block holds, read from its own tensors
    for name, (n_in, n_out) in (("qkv", (d_model, 3 * d_model)), ("proj", (d_model, d_model))):
        check_true(f"{name}.weight" in held, f"the block holds no {name}.weight: create self.{name} = nn.Linear(...) "
                   "in __init__")
        shapes = held[f"{name}.weight"]["shape"], held.get(f"{name}.bias", {"shape": (n_out,)})["shape"]  # bias optional
        check_true(shapes == ((n_out, n_in), (n_out,)),
                   f"block.{name} maps {shapes[0][-1]} -> {shapes[0][0]} features (weight {shapes[0]}), expected "
                   f"{n_in} -> {n_out} for d_model={d_model}: nn.Linear({n_in}, {n_out})")
    extra = [name for name, t in held.items() if t["kind"] == "parameter" and not name.startswith(("qkv.", "proj."))]
    check_true(not extra, f"the block has parameters besides qkv and proj: {extra}. The causal mask is fixed, not "
                          "learned: store it with self.register_buffer('mask', ...) instead of nn.Parameter")
    masks = [t for t in held.values() if t["kind"] == "buffer" and tuple(t["shape"][-2:]) == (max_len, max_len)]
    check_true(masks, f"found no buffer of shape (max_len, max_len) = ({max_len}, {max_len}): build the causal "
                      "mask once in __init__ and register it with self.register_buffer")


MASK_NOT_BOOL = ("~ (logical not) works on a bool tensor only, and the causal mask is not one: build it as bool, "
                 "torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)) (torch.ones alone gives floats)")


PART_A_FIRST = ("split_heads or merge_heads fail on the block's q, k and v or give another shape (view with a float "
                "d_head = D / n_heads raises, and so does a straight view of q, a slice of self.qkv(x), where the "
                "same view of a tensor in one piece runs): make Part A's tests pass first")


SCORES_RETURNED = ("the weights returned with return_weights=True hold negative or infinite values, which no softmax "
                   "gives: they are the scores before the softmax; return the softmax's output")


def weights_hint(weights, hint):
    """`hint`, unless the returned weights are plainly the scores before the softmax (negative or -inf entries)."""
    try:
        scores = bool((weights < 0).any()) or bool(torch.isinf(weights).any())
    except Exception:  # noqa: BLE001 (not a tensor: the shape checks say so)
        scores = False
    return SCORES_RETURNED if scores else hint


def part_a_hint(split_heads, merge_heads, B, T, D, H, words):  # noqa: N803 (the text's names)
    """Which mistake of Part A makes the block raise: a float d_head, a straight view of a slice, a view of the
    transposed heads in merge_heads, or another."""
    try:
        split_heads(torch.zeros(B, T, D), H)
        runs = True
    except Exception as error:  # noqa: BLE001 (only its kind and words)
        runs, words = False, f"{words} {type(error).__name__} {error}"
    if "float" in words.lower() and ("size" in words or "view" in words or "TypeError" in words):
        return ("split_heads passes a float size to view: d_head = D / n_heads is a float, use D // n_heads. "
                "Part A's tests name it; the block runs your split_heads, so fix it there first")
    try:
        merge_heads(torch.zeros(B, H, T, D // H))
        merge_words = ""
    except Exception as error:  # noqa: BLE001 (only its words)
        merge_words = str(error)
    if runs and "view size is not compatible" in merge_words:
        return ("merge_heads views the heads after transpose(1, 2), which leaves them out of memory order, so view "
                "raises: use reshape (or .contiguous() before view). Part A's tests name it; the block runs your "
                "merge_heads, so fix it there first")
    if runs and "view size is not compatible" in words:
        return ("split_heads views q, a slice of self.qkv(x), straight as (B, H, T, d_head), which raises for a tensor "
                "not in one piece: view to (B, T, H, d_head), then transpose(1, 2). Part A's tests name it; the block "
                "runs your split_heads, so fix it there first")
    return PART_A_FIRST


def part_a_works(split_heads, merge_heads, B, T, D, H):
    """Whether your split_heads and merge_heads run on these sizes and give the shapes Part A asks for."""
    try:
        split = split_heads(torch.zeros(B, T, D), H)
        merged = merge_heads(torch.zeros(B, H, T, D // H))
        return tuple(split.shape) == (B, H, T, D // H) and tuple(merged.shape) == (B, T, D)
    except Exception:  # noqa: BLE001 (Part A's tests report the error itself)
        return False


BLOCK_FALLBACK_HINT = ("if the error is raised in split_heads, q, k and v do not reach it as (B, T, D) each: cut "
                       "self.qkv(x) into three with .chunk(3, dim=-1) or .split(D, dim=-1) (split takes the size of "
                       "each piece, not their number); else run the block on a small input above and read the traceback")


def run_block(what, block, x, H, heads, **kwargs):
    """block(x, **kwargs); an error reads as one sentence naming its likeliest cause. `heads`: your (split_heads,
    merge_heads), which the block runs."""
    try:
        return block(x, **kwargs)
    except Exception as error:  # noqa: BLE001 (called again below, to report the error with its cause)
        words = str(error)
    B, T, D = x.shape
    try:
        max_len = int(block.mask.shape[-1])
    except Exception:  # noqa: BLE001 (a block without a mask buffer: the structure test says so)
        max_len = None
    hint = (part_a_hint(*heads, B, T, D, H, words) if not part_a_works(*heads, B, T, D, H)
            or "view size is not compatible" in words else
            "the (max_len, max_len) mask must be sliced to the (T, T) corner, mask[:T, :T], before it is applied"
            if max_len is not None and str(max_len) in words else
            MASK_NOT_BOOL if "invert" in words and "Boolean" in words else
            BLOCK_FALLBACK_HINT)
    return attempt(what, block, x, hint=hint, **kwargs)


def as_gather(name, function, shape, *args):
    """Your `function` (split_heads or merge_heads) on inputs of `shape`, as the entries it picks: `index` with
    function(x) == x.flatten()[index] for every x. The block's tests compute their references with it, so
    that they judge the block (Part A's tests judge the two functions)."""
    n = math.prod(shape)
    hint = f"make the test of {name} pass first"
    index = attempt(f"{name} on an input of shape {tuple(shape)}", function,
                    torch.arange(n, dtype=torch.float64).view(shape), *args, hint=hint)
    probe = torch.randn(shape, dtype=torch.float64, generator=torch.Generator().manual_seed(n))
    picked = attempt(f"{name} on an input of shape {tuple(shape)}", function, probe, *args, hint=hint)
    whole = (torch.is_tensor(index) and torch.is_tensor(picked)
             and index.shape == picked.shape  # precondition: the same rearrangement for every input
             and index.dtype == torch.float64 and bool((index == index.round()).all())
             and bool(((index >= 0) & (index < n)).all()))
    check_true(whole and torch.equal(picked, probe.flatten()[index.long()]),
               f"{name} does more than rearrange the entries of its input: {hint}")
    return index.long()


def standard_layout(split_heads, merge_heads, B, T, D, H):
    """Whether your split_heads and merge_heads are Part A's (then the references are PyTorch's own)."""
    numbers = torch.arange(B * T * D).view(B, T, D)
    heads = numbers.view(B, T, H, D // H).transpose(1, 2)
    return (part_a_works(split_heads, merge_heads, B, T, D, H)
            and torch.equal(as_gather("split_heads", split_heads, (B, T, D), H), heads)
            and torch.equal(as_gather("merge_heads", merge_heads, (B, H, T, D // H)),
                            torch.arange(B * T * D).view(B, H, T, D // H).transpose(1, 2).reshape(B, T, D)))


def check_params(params):
    """The drawn parameters hold the fused layout the references read."""
    check_true("qkv.weight" in params and "proj.weight" in params,
               "the block holds no qkv.weight or proj.weight: its projections are one fused Linear self.qkv (D -> 3D) "
               "and self.proj (D -> D), as the structure test says")


def check_shapes(MultiHeadSelfAttention, heads, B, T, D, H, max_len):  # noqa: N803 (the class under test)
    """forward maps (B, T, D) to (B, T, D); with return_weights=True it adds the weights (B, H, T, T)."""
    block = MultiHeadSelfAttention(D, H, max_len)
    x = torch.randn(B, T, D)
    out = run_block(f"block(x) for x of shape {(B, T, D)} with max_len={max_len}", block, x, H, heads)
    check_shape(f"block(x) for x of shape {(B, T, D)}", out, (B, T, D))
    result = run_block(f"block(x, return_weights=True) for x of shape {(B, T, D)}", block, x, H, heads, return_weights=True)
    check_true(isinstance(result, tuple) and len(result) == 2,
               "block(x, return_weights=True) must return a pair (output, weights)")
    check_shape(f"the weights returned for x of shape {(B, T, D)} and {H} heads", result[1], (B, H, T, T),
                hint="one (T, T) matrix per sequence and head: (B, H, T, T), not averaged over heads")


def check_causal_outputs(MultiHeadSelfAttention, heads, B, T, D, H):  # noqa: N803 (the class under test)
    """With causal=True no query looks at a later key, rows sum to 1, and the past ignores the future; returns the
    parameters the test drew, x, and the outputs on x and on x with its last token changed."""
    block = MultiHeadSelfAttention(D, H, max_len=T + 2)
    params = draw_parameters(block, torch.Generator().manual_seed(B * 100 + T * 10 + H))
    x = torch.randn(B, T, D)
    out, weights = run_block(f"block(x, return_weights=True) for x of shape {(B, T, D)}", block, x, H, heads,
                             return_weights=True)
    check_finite("the causal weights", weights, hint=weights_hint(weights, "a row whose keys are all masked gives NaN: "
                 "masked_fill fills where its mask is True (the forbidden pairs), and each token must still see itself, "
                 "so keep the diagonal"))
    check_rows_sum_to_one("the causal weights (one row per query)", weights,
                          hint=weights_hint(weights, "softmax over the key axis (dim=-1), after masking"))
    future = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    leak = float(weights[..., future].detach().abs().max()) if T > 1 else 0.0
    check_true(leak < 1e-6, f"a query puts weight up to {leak:.3f} on a later key: the mask must hide every key above "
                            "the diagonal (allowed pairs are the lower triangle, j <= i)")
    changed = last_changed(x)
    out_changed = run_block(f"block(x) for x of shape {(B, T, D)}", block, changed, H, heads)
    if standard_layout(*heads, B, T, D, H):  # with other heads than Part A's, "past" and "future" are not the tokens'
        moved = not torch.allclose(out_changed[:, :-1], out[:, :-1], atol=1e-5)  # message only: names the leak
        check_true(not moved, "changing only the last token moved the outputs of the earlier positions: the future "
                   "leaks into the past")
        same_last = torch.allclose(out_changed[:, -1], out[:, -1])  # message only: the graded test compares both
        check_true(not same_last, "changing the last token did not change its own output: does the block use its "
                   "input?")
    return params, x, out, out_changed


def last_changed(x):
    """x with its last token moved by 3."""
    changed = x.clone()
    changed[:, -1] += 3.0
    return changed


def check_runs_outputs(MultiHeadSelfAttention, heads, B, T, H, d_head, seed):  # noqa: N803 (the class under test)
    """The block, holding parameters the test draws, returns (out (B, T, D), weights (B, H, T, T)) whose rows sum
    to 1; returns the parameters, x, out and the weights."""
    D = H * d_head
    torch.manual_seed(seed)
    block = MultiHeadSelfAttention(D, H, max_len=T + 1)
    params = draw_parameters(block, torch.Generator().manual_seed(seed))  # the test chooses the weights
    x = torch.randn(B, T, D)
    out, weights = run_block(f"block(x, return_weights=True) for B={B}, T={T}, D={D}, H={H}", block, x, H, heads,
                             return_weights=True)
    check_shape(f"block(x) for B={B}, T={T}, D={D}, H={H}", out, (B, T, D))
    check_shape(f"the per-head weights for B={B}, T={T}, D={D}, H={H}", weights, (B, H, T, T),
                hint="one (T, T) matrix per sequence and head: (B, H, T, T), not averaged over heads")
    check_rows_sum_to_one(f"the per-head weights for B={B}, T={T}, D={D}, H={H}", weights,
                          hint=weights_hint(weights, "softmax over the key axis (dim=-1), after masking"))
    return params, x, out, weights


def float64_run(MultiHeadSelfAttention, heads, B, T, H, d_head, seed):  # noqa: N803 (the class under test)
    """A float64 block on float64 input gives float64 outputs and weights; returns (parameters, x, out)."""
    torch.manual_seed(seed)
    block = MultiHeadSelfAttention(H * d_head, H, max_len=T).double()
    params = draw_parameters(block, torch.Generator().manual_seed(seed))
    x = torch.randn(B, T, H * d_head, dtype=torch.float64)
    try:
        out, weights = block(x, return_weights=True)
    except Exception as error:  # noqa: BLE001 (called again below, to report the error with its cause)
        hint = ("is something cast to float32 (.float(), dtype=torch.float32)?" if "Float" in str(error) or
                "dtype" in str(error) else part_a_hint(*heads, B, T, H * d_head, H, str(error))
                if not part_a_works(*heads, B, T, H * d_head, H) or "view size is not compatible" in str(error) else
                BLOCK_FALLBACK_HINT)
        out, weights = attempt("a float64 block on float64 input", block, x, return_weights=True, hint=hint)
    for name, value in (("block(x)", out), ("the weights", weights)):
        check_dtype(f"{name} for float64 x", value, torch.float64,
                    hint="something casts to float32, e.g. softmax(..., dtype=torch.float32) or .float()")
    return params, x, out


def check_causal(MultiHeadSelfAttention, heads, B, T, D, H):  # noqa: N803 (the class under test)
    """check_causal_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_causal_outputs(MultiHeadSelfAttention, heads, B, T, D, H)


def check_runs(MultiHeadSelfAttention, heads, B, T, H, d_head, seed):  # noqa: N803 (the class under test)
    """check_runs_outputs, returning nothing: a visible test's cell that ends with it shows no value."""
    check_runs_outputs(MultiHeadSelfAttention, heads, B, T, H, d_head, seed)
