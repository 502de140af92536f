"""Divides by the sample standard deviation (ddof=1) instead of NumPy's default."""
# loses: test_standardize
# says: test_standardize: (NumPy's default, ddof=0)
# ruff: noqa: F821
# (np comes from the notebook's imports cell)

# %% standardize
def standardize(x):
    """Each column of `x` (n, d) shifted to mean 0 and scaled to standard deviation 1."""
    x = np.asarray(x, dtype=float)
    return (x - x.mean(axis=0)) / x.std(axis=0, ddof=1)
