"""Checks that fail with a message a student can act on.

Every check raises :class:`CheckFailed`, an ``AssertionError`` (so nbgrader scores the cell
zero), and says what is wrong in terms of the student's own output: its shape, how far it is
off and where, which rows do not sum to one, where a NaN appeared. None of them print the expected values.

``likely_causes`` lets a test name a typical mistake: pass ``{"scores were not divided by
sqrt(d_k)": array_you_would_get_then}``; if the student's output matches one of them the
message says so. Tests build those arrays themselves (in hidden cells), so this module
never contains a reference solution. When none matches, ``check_close`` still names the kind of
difference it sees (:func:`difference_pattern`: the right values transposed, reversed, shifted or
reordered, one factor or one constant everywhere, or some rows only), for the mistakes no test listed.
"""

from __future__ import annotations

import linecache
import os
from typing import Any, Mapping, Sequence

import numpy as np

from .env import under_nbgrader
from .language import translate as _in_kernel_language

__all__ = [
    "CheckFailed",
    "as_numpy",
    "attempt",
    "check_shape",
    "check_close",
    "check_finite",
    "check_rows_sum_to_one",
    "check_type",
    "check_dtype",
    "check_true",
    "difference_pattern",
    "error_raised",
    "matches",
]


def as_numpy(x: Any) -> np.ndarray:
    """Return ``x`` as a NumPy array (detaching and moving torch tensors to the CPU)."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):
        x = x.detach().cpu()
        if str(getattr(x, "dtype", "")) == "torch.bfloat16":
            x = x.float()
        return x.numpy()
    return np.asarray(x)


def _fmt(x: float) -> str:
    return f"{x:.3g}"


_COURSE_DIR = os.path.dirname(os.path.abspath(__file__))


class CheckFailed(AssertionError):
    """A check failed: shown to the student as its message, not as a traceback into ``course/``.

    IPython asks an exception for ``_render_traceback_()`` before it formats one itself (in
    Lab, in nbgrader's Validate and in autograded notebooks and their feedback alike). Ours
    returns the line of the student's cell that called the check, then the message. While
    nbgrader grades, the notebook holds hidden tests, so only the message is shown (also in
    any kernel started with the grader's minimal tracebacks).

    Its message is the one place where a check's words meet the student's language: built here
    (every check of ``course/`` raises it, and a test cell that raises one itself), it is
    translated when the kernel has one (``COURSE_LANGUAGE``, :mod:`course.language`); else,
    and always while nbgrader autogrades, it is kept exactly as written.
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*(_in_kernel_language(args[0]), *args[1:]) if args else ())

    def _caller(self) -> str | None:
        """``Cell In[3], line 4: check_close(...)`` for the innermost frame outside course/."""
        tb, found = self.__traceback__, None
        while tb is not None:
            filename = tb.tb_frame.f_code.co_filename
            if not os.path.abspath(filename).startswith(_COURSE_DIR + os.sep):
                found = (filename, tb.tb_lineno)
            tb = tb.tb_next
        if found is None:
            return None
        filename, lineno = found
        line = linecache.getline(filename, lineno).strip()
        if not line:
            return None
        try:  # IPython names cell files after their execution count: "Cell In[3]"
            count = get_ipython().compile._filename_map[filename]  # noqa: F821
            where = f"Cell In[{count}], line {lineno}"
        except Exception:
            where = f"{os.path.basename(filename)}, line {lineno}"
        return f"{where}: {line}"

    def _render_traceback_(self) -> list[str]:
        header = f"\x1b[0;31m{type(self).__name__}\x1b[0m: {self}"
        caller = None if _source_hidden() else self._caller()
        return [f"\x1b[0;32m{caller}\x1b[0m", header] if caller else [header]


def _source_hidden() -> bool:
    """True while grading: under nbgrader, or in a kernel started with the grader's
    ``--InteractiveShell.xmode=Minimal`` (tracebacks there must not show test source)."""
    if under_nbgrader():
        return True
    try:
        return get_ipython().InteractiveTB.mode == "Minimal"  # noqa: F821
    except Exception:
        return False


def _fail(message: str, hint: str | None = None) -> None:
    raise CheckFailed(f"{message}: {hint}" if hint else message)


def check_type(name: str, value: Any, expected: type | tuple[type, ...], hint: str | None = None) -> None:
    """Fail unless ``value`` is an instance of ``expected``."""
    if not isinstance(value, expected):
        names = (
            " or ".join(t.__name__ for t in expected) if isinstance(expected, tuple) else expected.__name__
        )
        _fail(f"{name} is a {type(value).__name__}, expected a {names}", hint)


def check_shape(name: str, value: Any, expected: Sequence[int], hint: str | None = None) -> None:
    """Fail unless ``value`` has shape ``expected``; spot transposed and squeezed results."""
    if value is None:
        _fail(f"{name} is None: did the function forget to return it?", hint)
    actual = tuple(getattr(value, "shape", np.shape(value)))
    expected = tuple(int(n) for n in expected)
    if actual == expected:
        return
    message = f"{name} has shape {actual}, expected {expected}"
    if (
        len(actual) == len(expected) >= 2
        and actual[:-2] == expected[:-2]
        and actual[-2:] == expected[-2:][::-1]
    ):
        swapped = "the last two axes look swapped (a transpose too many or too few?)"
        hint = f"{swapped}; {hint}" if hint else swapped
    elif len(actual) != len(expected) and hint is None:
        hint = "a different number of axes: was a batch axis dropped, added or summed away?"
    _fail(message, hint)


def check_finite(name: str, value: Any, hint: str | None = None) -> None:
    """Fail if ``value`` contains NaN or infinity, saying how many and where the first one is."""
    array = as_numpy(value)
    if not np.issubdtype(array.dtype, np.number) or np.issubdtype(array.dtype, np.integer):
        return
    bad = ~np.isfinite(array)
    if bad.any():
        n_nan = int(np.isnan(array).sum())
        n_inf = int(bad.sum()) - n_nan
        first = tuple(int(i) for i in np.argwhere(bad)[0])
        _fail(
            f"{name} contains {n_nan} NaN and {n_inf} infinite values (first at index {first})",
            hint,
        )


def matches(actual: Any, candidate: Any, atol: float = 1e-5, rtol: float = 1e-4) -> bool:
    """True when two arrays have the same shape and agree to the tolerances (NaN equals NaN)."""
    a, b = as_numpy(actual), as_numpy(candidate)
    if a.shape != b.shape:
        return False
    try:
        return bool(np.allclose(a, b, atol=atol, rtol=rtol, equal_nan=True))
    except TypeError:
        return False


def check_close(
    name: str,
    actual: Any,
    expected: Any,
    atol: float = 1e-5,
    rtol: float = 1e-4,
    hint: str | None = None,
    likely_causes: Mapping[str, Any] | None = None,
) -> None:
    """Fail unless ``actual`` is close to ``expected``, summarising the difference.

    The message gives the shape, the largest absolute difference and its index and how many
    entries are off, never the expected values themselves. When ``actual`` matches one of
    ``likely_causes`` that cause is named instead of the generic ``hint``; else the pattern of the
    difference, if it has one (:func:`difference_pattern`), comes before the hint.
    """
    check_shape(name, actual, np.shape(as_numpy(expected)), hint)
    a = as_numpy(actual).astype(np.float64)
    e = as_numpy(expected).astype(np.float64)
    check_finite(name, a, hint)
    if np.allclose(a, e, atol=atol, rtol=rtol):
        return
    diff = np.abs(a - e)
    off = diff > atol + rtol * np.abs(e)
    worst = tuple(int(i) for i in np.unravel_index(np.argmax(diff), diff.shape)) if diff.ndim else ()
    message = (
        f"{name} is off: largest difference {_fmt(float(diff.max()))} at index {worst}, "
        f"{int(off.sum())} of {off.size} entries outside atol={atol:g}, rtol={rtol:g}"
    )
    for cause, candidate in (likely_causes or {}).items():
        if matches(actual, candidate, atol=atol, rtol=rtol):
            _fail(message, f"it matches what you get when {cause}")
    pattern = difference_pattern(a, e, atol, rtol)
    _fail(f"{message}; {pattern}" if pattern else message, hint)


def check_rows_sum_to_one(name: str, weights: Any, axis: int = -1, atol: float = 1e-5, hint: str | None = None) -> None:
    """Fail unless every slice along ``axis`` sums to 1 (and nothing is negative or NaN)."""
    w = as_numpy(weights).astype(np.float64)
    check_finite(name, w, hint or "subtract the row maximum before exp to avoid overflow")
    if (w < -atol).any():
        _fail(f"{name} has negative entries (smallest {_fmt(float(w.min()))})", hint)
    sums = w.sum(axis=axis)
    bad = np.abs(sums - 1.0) > atol
    if bad.any():
        worst = float(sums.flat[np.argmax(np.abs(sums - 1.0))])
        _fail(
            f"{int(bad.sum())} of {sums.size} rows of {name} sum to something else than 1 "
            f"(worst {_fmt(worst)}, expected 1)",
            hint or "normalise over the key axis (the last one)",
        )


def check_dtype(name: str, value: Any, expected: Any, hint: str | None = None) -> None:
    """Fail unless ``value.dtype`` equals ``expected`` (works for NumPy and torch)."""
    actual = getattr(value, "dtype", None)
    if isinstance(actual, np.dtype):
        expected = np.dtype(expected)
    if actual != expected:
        _fail(f"{name} has dtype {actual}, expected {expected}", hint)


def check_true(condition: Any, message: str) -> None:
    """Fail with ``message`` unless ``condition`` is truthy (an ``assert`` that survives ``-O``)."""
    if not bool(condition):
        raise CheckFailed(message)


def attempt(what: str, function: Any, *args: Any, hint: str | dict | None = None, **kwargs: Any) -> Any:
    """``function(*args, **kwargs)``; if it raises, a failed check naming the call, the error and ``hint``.

    A crash of the student's code then reads as one sentence, the library's words and the
    course's advice together: ``block(x) raised RuntimeError (shapes do not match): pass ...``.
    ``hint`` may be ``{"IndexError": advice, ..., None: advice for any other error}``: the advice
    that fits the error raised.
    """
    try:
        return function(*args, **kwargs)
    except Exception as error:  # noqa: BLE001 (any error of the student's code becomes a message)
        if type(error).__name__ == "CheckFailed" and type(error).__module__ != "kernel":  # a check inside speaks
            raise
        if isinstance(error, NotImplementedError):  # an untouched stub: not a mistake, `make check` says "not done yet"
            raise
        if isinstance(hint, dict):
            hint = hint.get(type(error).__name__, hint.get(None))
        raise CheckFailed(_raised(what, error, hint)) from None


def error_raised(action: Any) -> BaseException | None:
    """The error ``action()`` raises, or None if it returns: for a test that expects an error, which then
    judges its type and words. ``action`` is a function of no arguments written in the test
    (``error_raised(lambda: LearnedPositions(8, 4)(x))``), so the call is the test's own."""
    try:
        action()
    except Exception as error:  # noqa: BLE001 (the test judges the error's type and words)
        return error
    return None


def _raised(what: str, error: BaseException, hint: str | None = None) -> str:
    """``"<what> raised <Error> (<its words>): <hint>"``, one sentence however the error's text ends."""
    try:
        words = " ".join(str(error).split()).rstrip(" .;:")
    except Exception:  # noqa: BLE001 (an error whose str() fails)
        words = ""
    said = f"{what} raised {type(error).__name__}" + (f" ({words})" if words else "")
    line = getattr(error, "student_line", "")  # where in a notebook cell, as the grader's oracle reports it
    if line and type(line) is str:
        said += f" at {line}"
    return f"{said}: {hint.strip().rstrip('.')}" if hint else said


# ---------------------------------------------------------------- the shape of a difference
# When no likely cause of the test matches, check_close still says what kind of mistake the
# difference looks like, from the student's output and the expected one only: the same values
# transposed, reversed, shifted or reordered, scaled by one factor, moved by one constant, or
# wrong at a few rows only. A sentence names a pattern and the places, never an expected value.

_PATTERN_ENTRIES = 200_000  # past this many entries only the cheap patterns are looked for
_LISTED = 3  # at most this many indices are named


def _indices(found: Sequence[int]) -> str:
    return ", ".join(str(i) for i in found)


def _same_values_elsewhere(a: np.ndarray, e: np.ndarray, atol: float, rtol: float) -> str | None:
    """The right values, moved: axes swapped, reversed, shifted by one, or reordered within slices."""
    for i in range(a.ndim):
        for j in range(i + 1, a.ndim):
            swapped = np.swapaxes(e, i, j) if a.shape[i] == a.shape[j] > 1 else None
            if swapped is not None and not matches(e, swapped, atol, rtol) and matches(a, swapped, atol, rtol):
                return (f"it holds the right values with axes {i} and {j} swapped (a transpose too many or too few, "
                        "or a reshape or view where a transpose was needed?)")
    for axis in range(a.ndim):
        if a.shape[axis] < 2:
            continue
        flipped = np.flip(e, axis)
        if not matches(e, flipped, atol, rtol) and matches(a, flipped, atol, rtol):
            return f"it holds the right values in reverse order along axis {axis}"
        if a.shape[axis] >= 3:
            later, earlier = [slice(None)] * a.ndim, [slice(None)] * a.ndim
            later[axis], earlier[axis] = slice(1, None), slice(None, -1)
            later, earlier = tuple(later), tuple(earlier)
            if not matches(e[later], e[earlier], atol, rtol) and (
                    matches(a[later], e[earlier], atol, rtol) or matches(a[earlier], e[later], atol, rtol)):
                return (f"it holds the right values shifted by one position along axis {axis} (an off-by-one in an "
                        "index, a slice or a range?)")
    if a.size <= _PATTERN_ENTRIES:
        for axis in range(a.ndim):
            if a.shape[axis] >= 2 and matches(np.sort(a, axis=axis), np.sort(e, axis=axis), atol, rtol):
                return (f"each slice along axis {axis} holds the right values in another order (a reshape or view "
                        "that mixes two axes, or an index taken from the wrong axis?)")
    return None


def _one_change_everywhere(a: np.ndarray, e: np.ndarray, atol: float, rtol: float) -> str | None:
    """The right values changed the same way everywhere: zero, the sign, one factor, one constant."""
    if matches(a, np.zeros_like(a), atol, rtol):
        return "every entry is zero (is the result computed, and returned?)"
    if float(np.ptp(e)) <= atol + rtol * float(np.abs(e).max()):
        return None  # the expected values are all alike: a factor and a constant cannot be told apart
    if matches(a, -e, atol, rtol):
        return "every entry has the sign opposite to the right one (a minus sign too many or too few?)"
    factor = float((a * e).sum() / (e * e).sum())
    if matches(a, factor * e, atol, rtol):
        return (f"every entry is the right one times the same factor, {_fmt(factor)} (a scale missing, applied "
                "twice or inverted?)")
    offset = float((a - e).mean())
    if matches(a, e + offset, atol, rtol):
        return f"every entry is the right one plus the same amount, {_fmt(offset)} (a constant added or left out?)"
    return None


def _where_it_is_off(off: np.ndarray) -> str | None:
    """The places of the entries that are off, when they are some rows or one side of the diagonal only."""
    if off.ndim >= 2 and off.shape[-1] == off.shape[-2] >= 2:
        rows, columns = np.indices(off.shape[-2:])
        if not off[..., rows >= columns].any():
            return ("the entries that are off all lie above the diagonal of the last two axes (a later column than "
                    "row: the future of a causal mask?); the rest is right")
        if not off[..., rows <= columns].any():
            return "the entries that are off all lie below the diagonal of the last two axes; the rest is right"
    best = None
    for axis in range(off.ndim):
        size = off.shape[axis]
        if size < 2:
            continue
        hit = off.any(axis=tuple(k for k in range(off.ndim) if k != axis))
        wrong = [int(i) for i in np.flatnonzero(hit)]
        if 0 < len(wrong) < size and (best is None or len(wrong) / size < best[0]):
            best = (len(wrong) / size, axis, wrong, [int(i) for i in np.flatnonzero(~hit)], size)
    if best is None:
        return None
    _, axis, wrong, right, size = best
    if len(wrong) == 1:
        return f"the entries that are off all lie at index {wrong[0]} of axis {axis}; the rest is right"
    if len(wrong) <= _LISTED:
        return f"the entries that are off all lie at indices {_indices(wrong)} of axis {axis}; the rest is right"
    if len(right) == 1:
        return f"the entries at index {right[0]} of axis {axis} are right; every other index there has some off"
    if len(right) <= _LISTED:
        return f"the entries at indices {_indices(right)} of axis {axis} are right; every other index there has some off"
    return f"the entries that are off lie at {len(wrong)} of the {size} indices of axis {axis}; the others are right"


def difference_pattern(actual: Any, expected: Any, atol: float = 1e-5, rtol: float = 1e-4) -> str | None:
    """What kind of mistake ``actual`` (a wrong answer, same shape as ``expected``) looks like, in a
    sentence that names no expected value; ``None`` when the difference has no simple pattern."""
    a, e = as_numpy(actual).astype(np.float64, copy=False), as_numpy(expected).astype(np.float64, copy=False)
    if a.shape != e.shape or a.size < 2 or not (np.isfinite(a).all() and np.isfinite(e).all()):
        return None
    try:
        found = _one_change_everywhere(a, e, atol, rtol) or _same_values_elsewhere(a, e, atol, rtol)
        return found or _where_it_is_off(np.abs(a - e) > atol + rtol * np.abs(e))
    except (ValueError, FloatingPointError, ZeroDivisionError, MemoryError):
        return None
