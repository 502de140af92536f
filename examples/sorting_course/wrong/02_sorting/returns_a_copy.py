"""merge_sort returns a copy of the list, unsorted."""
# loses: test_merge_sort
# says: test_merge_sort: merge_sort([3, 1, 2]) should be [1, 2, 3]

# %% merge_sort
def merge_sort(values):
    """A new ascending list of the elements of `values`; `values` is left unchanged."""
    return list(values)
