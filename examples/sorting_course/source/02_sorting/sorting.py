# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Exercise 02 · Merge sort
#
# Merge sort splits a list in two halves, sorts each half, and merges the two sorted halves
# by repeatedly taking the smaller of their first elements. You write the merge, then the
# sort. Python's `sorted` and `list.sort` do the same work: do not use them here.

# %% nbgrader={"grade": false, "grade_id": "imports", "locked": true, "schema_version": 3, "solution": false}
import numpy as np
from nboracle import call_keeping_arguments

# %% [markdown]
# ## Part A · Merge two sorted lists (2 points)
#
# `merge(left, right)` receives two lists, each sorted in ascending order, and returns one
# new list, sorted in ascending order, holding every element of both (duplicates included).
# When one list runs out, the rest of the other list follows as it is.

# %% nbgrader={"grade": false, "grade_id": "merge", "locked": false, "schema_version": 3, "solution": true}
def merge(left, right):
    """One ascending list with every element of the ascending lists `left` and `right`."""
    ### BEGIN SOLUTION
    merged, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if right[j] < left[i]:
            merged.append(right[j])
            j += 1
        else:
            merged.append(left[i])
            i += 1
    return merged + list(left[i:]) + list(right[j:])
    ### END SOLUTION


# %%
print(merge([1, 4, 9], [2, 3, 10, 11]))

# %% nbgrader={"grade": true, "grade_id": "test_merge", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""merge returns every element of both lists, in ascending order."""
result = merge([1, 4, 9], [2, 3, 10, 11])
assert isinstance(result, list), f"merge should return a list, not {type(result).__name__}"
assert len(result) == 7, f"merge of 3 and 4 elements returned {len(result)} elements: keep the rest of both lists"
assert result == [1, 2, 3, 4, 9, 10, 11], "merge([1, 4, 9], [2, 3, 10, 11]) is not in ascending order"
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(21)
for _trial in range(8):
    left = sorted(int(v) for v in rng.integers(-20, 20, size=rng.integers(0, 9)))
    right = sorted(int(v) for v in rng.integers(-20, 20, size=rng.integers(0, 9)))
    result = merge(left, right)
    assert isinstance(result, list), f"merge should return a list, not {type(result).__name__}"
    if len(result) < len(left) + len(right) and set(result) == set(left + right):
        raise AssertionError(f"merge of {len(left)} and {len(right)} elements returned {len(result)}, "
                             "dropping repeated values: when both first elements are equal, keep both")
    assert len(result) == len(left) + len(right), \
        f"merge of {len(left)} and {len(right)} elements returned {len(result)}: once one list runs out, " \
        "append the rest of the other"
    assert result == sorted(left + right), \
        f"merge of two sorted lists of {len(left)} and {len(right)} elements (with repeated values) " \
        "is not the ascending list of all their elements"
### END HIDDEN TESTS

# %% [markdown]
# ## Part B · Merge sort (3 points)
#
# `merge_sort(values)` returns a **new** list with the elements of `values` in ascending
# order, and leaves `values` as it was. A list of zero or one element is already sorted;
# otherwise sort both halves with `merge_sort` and `merge` them.

# %% nbgrader={"grade": false, "grade_id": "merge_sort", "locked": false, "schema_version": 3, "solution": true}
def merge_sort(values):
    """A new ascending list of the elements of `values`; `values` is left unchanged."""
    ### BEGIN SOLUTION
    if len(values) <= 1:
        return list(values)
    middle = len(values) // 2
    return merge(merge_sort(values[:middle]), merge_sort(values[middle:]))
    ### END SOLUTION


# %%
print(merge_sort([5, 2, 9, 1, 5, 6]))

# %% nbgrader={"grade": true, "grade_id": "test_merge_sort", "locked": true, "points": 2, "schema_version": 3, "solution": false}
"""merge_sort returns the elements in ascending order, for short, long and repeated values."""
assert merge_sort([]) == [], "merge_sort([]) should be []"
result = merge_sort([3, 1, 2])
assert isinstance(result, list), f"merge_sort should return a list, not {type(result).__name__}"
assert len(result) == 3, f"merge_sort([3, 1, 2]) returned {len(result)} elements: every element of `values` " \
    "belongs in the result"
assert result == [1, 2, 3], "merge_sort([3, 1, 2]) should be [1, 2, 3]"
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(22)
for size in (1, 2, 5, 16, 33, 100):
    values = [int(v) for v in rng.integers(-50, 50, size=size)]
    result = merge_sort(values)
    assert isinstance(result, list), f"merge_sort should return a list, not {type(result).__name__}"
    assert len(result) == size, f"merge_sort of {size} elements returned {len(result)} elements: every " \
        "element of `values` belongs in the result, repeated values included"
    assert result == sorted(values), \
        f"merge_sort of {size} numbers (with repeated values) did not return them in ascending order"
floats = [float(v) for v in rng.normal(size=20)]
assert merge_sort(floats) == sorted(floats), "merge_sort of 20 floating-point numbers is not in ascending order"
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "test_merge_sort_keeps_input", "locked": true, "points": 1, "schema_version": 3, "solution": false}
"""merge_sort leaves the list it is given as it was."""
values = [4, 1, 3, 1, 2]
result, arguments = call_keeping_arguments(merge_sort, values)
assert arguments[0] == [4, 1, 3, 1, 2], \
    "merge_sort changed the list it was given: build a new list instead of sorting `values` in place"
### BEGIN HIDDEN TESTS
rng = np.random.default_rng(23)
for size in (2, 9, 30):
    values = [int(v) for v in rng.integers(0, 10, size=size)]
    result, arguments = call_keeping_arguments(merge_sort, list(values))
    assert arguments[0] == values, \
        f"merge_sort changed the list of {size} numbers it was given: leave `values` as it was"
### END HIDDEN TESTS
