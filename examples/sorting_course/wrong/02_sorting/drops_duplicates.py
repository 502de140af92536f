"""merge keeps one of two equal first elements and drops the other."""
# loses: test_merge test_merge_sort
# says: test_merge: dropping repeated values: when both first elements are equal, keep both
# says: test_merge_sort: repeated values included

# %% merge
def merge(left, right):
    """One ascending list with every element of the ascending lists `left` and `right`."""
    merged, i, j = [], 0, 0
    while i < len(left) and j < len(right):
        if left[i] == right[j]:
            merged.append(left[i])
            i, j = i + 1, j + 1
        elif right[j] < left[i]:
            merged.append(right[j])
            j += 1
        else:
            merged.append(left[i])
            i += 1
    return merged + list(left[i:]) + list(right[j:])
