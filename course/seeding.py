"""Reproducible randomness for notebooks and tests."""

from __future__ import annotations

import random

import numpy as np

__all__ = ["seed_everything"]


def seed_everything(seed: int = 0) -> np.random.Generator:
    """Seed Python, NumPy's global state and torch (if installed); return a fresh NumPy Generator."""
    random.seed(seed)
    np.random.seed(seed)
    try:
        import torch
    except ImportError:  # the NumPy-only chapters still work without torch
        pass
    else:
        torch.manual_seed(seed)
    return np.random.default_rng(seed)
