"""Chapter 02's references (the grader's side only): the softmax whose Jacobian the exercise builds, and the
hidden tests' comparison of a batch of Jacobians with autograd's, one row at a time."""

from __future__ import annotations

import numpy as np
import torch

from course.checks import check_close
from course.scaling_checks import check_batched_outputs

ROW_FIRST = ("each row gets the Jacobian your function gives that row alone, and that Jacobian is wrong: make the "
             "test of one vector pass first")


def softmax_last(scores):
    """torch.softmax over the last axis: the function whose Jacobian the exercise builds."""
    return torch.softmax(scores, dim=-1)


def batched_agrees(softmax_jacobian, p):
    """check_batched_outputs, then every row's Jacobian compared with autograd's Jacobian of the softmax at log p."""
    J = check_batched_outputs(softmax_jacobian, p)
    *batch, n = p.shape
    rows = torch.from_numpy(np.log(np.asarray(p, dtype=float))).reshape(-1, n)
    reference = torch.stack([torch.autograd.functional.jacobian(softmax_last, row) for row in rows])
    check_close(f"softmax_jacobian(p) for p of shape {tuple(p.shape)}", J, reference.reshape(*batch, n, n).numpy(),
                atol=1e-9, hint=ROW_FIRST)
