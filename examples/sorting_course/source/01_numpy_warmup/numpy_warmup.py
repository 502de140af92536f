# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 01 · A NumPy warm-up
#
# Two small functions on arrays, written without Python loops: `standardize` rescales the
# columns of a table, `pairwise_distances` measures how far every point of one set is from
# every point of another. Each exercise has a solution cell for you to fill in, a cell that
# runs your code on a small example, and a graded test cell. The grader also tries random
# inputs of its own.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import numpy as np

np.set_printoptions(precision=4, suppress=True)

# %% [markdown]
# ## Part A · Standardize the columns (2 points)
#
# A table `x` of shape `(n, d)` holds `n` samples of `d` features. Standardizing subtracts
# each column's mean and divides by that column's standard deviation (NumPy's default,
# `ddof=0`), so that every column has mean 0 and standard deviation 1. Return a new array of
# the same shape; `x` has at least two rows and no constant column.

# %% nbgrader={"grade": false, "grade_id": "standardize", "locked": false, "schema_version": 3, "solution": true}
def standardize(x):
    """Each column of `x` (n, d) shifted to mean 0 and scaled to standard deviation 1."""
    ### BEGIN SOLUTION
    x = np.asarray(x, dtype=float)
    return (x - x.mean(axis=0)) / x.std(axis=0)
    ### END SOLUTION


# %%
table = np.array([[1.0, 10.0], [3.0, 30.0], [5.0, 20.0]])
print(standardize(table))

# %% nbgrader={"grade": true, "grade_id": "test_standardize", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""standardize gives every column mean 0 and standard deviation 1, and keeps the shape."""
small = np.array([[1.0, 2.0], [3.0, 6.0]])
result = standardize(small)
assert isinstance(result, np.ndarray), f"standardize should return a NumPy array, not {type(result).__name__}"
assert result.shape == small.shape, f"standardize changed the shape {small.shape} into {result.shape}"
assert np.allclose(result.mean(axis=0), 0), \
    "the columns of standardize([[1, 2], [3, 6]]) do not have mean 0: subtract each column's mean (axis=0)"
assert np.allclose(result.std(axis=0), 1), \
    "the columns of standardize([[1, 2], [3, 6]]) do not have standard deviation 1: divide by each " \
    "column's x.std(axis=0) (NumPy's default, ddof=0)"
assert np.allclose(result, [[-1.0, -1.0], [1.0, 1.0]]), "standardize([[1, 2], [3, 6]]) is wrong"
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(11)
for _trial in range(5):
    n, d = (int(k) for k in rng.integers(2, 9, size=2))
    x = rng.normal(loc=rng.normal(size=d) * 5, scale=rng.uniform(0.5, 4, size=d), size=(n, d))
    expected = (x - x.mean(axis=0)) / np.sqrt(((x - x.mean(axis=0)) ** 2).mean(axis=0))
    result = standardize(x)
    assert isinstance(result, np.ndarray) and result.shape == x.shape, \
        f"standardize on a table of shape {(n, d)} should return an array of that shape"
    if not np.allclose(result.mean(axis=0), 0, atol=1e-8):
        raise AssertionError(f"on a table of shape {(n, d)} the columns of standardize's result do not "
                             "have mean 0: take the mean of each column (axis=0), not of each row")
    if np.allclose(result, expected * np.sqrt((n - 1) / n), atol=1e-8):
        raise AssertionError("standardize divides by the sample standard deviation (ddof=1): use "
                             "NumPy's default x.std(axis=0), with ddof=0")
    assert np.allclose(result, expected, atol=1e-8), \
        f"on a table of shape {(n, d)} the columns of standardize's result do not have std 1"
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · Distances between two sets of points (2 points)
#
# `a` holds `n` points and `b` holds `m` points, each a row of `k` coordinates. Return the
# `(n, m)` array whose entry `[i, j]` is the Euclidean distance between `a[i]` and `b[j]`,
# the square root of the sum of squared coordinate differences. Broadcasting does it
# without loops: `a[:, None, :] - b[None, :, :]` has shape `(n, m, k)`.

# %% nbgrader={"grade": false, "grade_id": "pairwise_distances", "locked": false, "schema_version": 3, "solution": true}
def pairwise_distances(a, b):
    """Euclidean distances (n, m) between the rows of `a` (n, k) and the rows of `b` (m, k)."""
    ### BEGIN SOLUTION
    differences = np.asarray(a, dtype=float)[:, None, :] - np.asarray(b, dtype=float)[None, :, :]
    return np.sqrt((differences ** 2).sum(axis=-1))
    ### END SOLUTION


# %%
corners = np.array([[0.0, 0.0], [3.0, 4.0]])
print(pairwise_distances(corners, corners))

# %% nbgrader={"grade": true, "grade_id": "test_pairwise_distances", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""pairwise_distances has shape (n, m) and holds the Euclidean distance of every pair."""
a = np.array([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]])
result = pairwise_distances(a, a[:2])
assert isinstance(result, np.ndarray), f"pairwise_distances should return a NumPy array, not {type(result).__name__}"
assert result.shape == (3, 2), f"pairwise_distances of 3 points and 2 points should have shape (3, 2), not {result.shape}"
assert not np.isclose(result[1, 0], 25.0), \
    "pairwise_distances gives 25 from (3, 4) to (0, 0), the squared distance: take the square root of the sum"
assert np.isclose(result[1, 0], 5.0), "the distance from (3, 4) to (0, 0) should be 5"
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(12)
for _trial in range(5):
    n, m, k = (int(v) for v in rng.integers(1, 8, size=3))
    a, b = rng.normal(size=(n, k)) * 3, rng.normal(size=(m, k)) * 3
    expected = np.array([[np.sqrt(sum((p - q) ** 2 for p, q in zip(row, col, strict=True))) for col in b] for row in a])
    result = pairwise_distances(a, b)
    assert isinstance(result, np.ndarray) and result.shape == (n, m), \
        f"pairwise_distances of {n} and {m} points in {k} dimensions should have shape {(n, m)}"
    if np.allclose(result, expected ** 2, atol=1e-8) and not np.allclose(result, expected, atol=1e-8):
        raise AssertionError("pairwise_distances returns squared distances: take the square root of the sum")
    assert np.allclose(result, expected, atol=1e-8), \
        f"pairwise_distances of {n} and {m} points in {k} dimensions is wrong: sum the squared differences " \
        "over the coordinates (the last axis), then take the square root"
### END HIDDEN TESTS
