"""What runs in nbgrader's process: the oracle's Execute step, the sandboxed kernels, repair, the review scan."""
