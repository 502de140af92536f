"""Standardizes each row instead of each column."""
# loses: test_standardize
# says: test_standardize: subtract each column's mean (axis=0)
# ruff: noqa: F821
# (np comes from the notebook's imports cell)

# %% standardize
def standardize(x):
    """Each column of `x` (n, d) shifted to mean 0 and scaled to standard deviation 1."""
    x = np.asarray(x, dtype=float)
    return (x - x.mean(axis=1, keepdims=True)) / x.std(axis=1, keepdims=True)
