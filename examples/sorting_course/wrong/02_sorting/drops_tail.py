"""merge stops when one list runs out and forgets the rest of the other."""
# loses: test_merge test_merge_sort
# says: test_merge: keep the rest of both lists
# says: test_merge_sort: every element of `values` belongs in the result

# %% merge
def merge(left, right):
    """One ascending list with every element of the ascending lists `left` and `right`."""
    merged, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if right[j] < left[i]:
            merged.append(right[j])
            j += 1
        else:
            merged.append(left[i])
            i += 1
    return merged
