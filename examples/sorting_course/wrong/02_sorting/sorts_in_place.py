"""merge_sort sorts the list it is given in place and returns it."""
# loses: test_merge_sort_keeps_input
# says: test_merge_sort_keeps_input: merge_sort changed the list it was given
# ruff: noqa: F821
# (merge comes from the notebook's solution of Part A)

# %% merge_sort
def merge_sort(values):
    """A new ascending list of the elements of `values`; `values` is left unchanged."""
    if len(values) > 1:
        middle = len(values) // 2
        values[:] = merge(merge_sort(values[:middle]), merge_sort(values[middle:]))
    return values
