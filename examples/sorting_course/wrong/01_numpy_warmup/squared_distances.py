"""Forgets the square root: returns squared distances."""
# loses: test_pairwise_distances
# says: test_pairwise_distances: the squared distance: take the square root of the sum
# ruff: noqa: F821
# (np comes from the notebook's imports cell)

# %% pairwise_distances
def pairwise_distances(a, b):
    """Euclidean distances (n, m) between the rows of `a` (n, k) and the rows of `b` (m, k)."""
    differences = np.asarray(a, dtype=float)[:, None, :] - np.asarray(b, dtype=float)[None, :, :]
    return (differences ** 2).sum(axis=-1)
