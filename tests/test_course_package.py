"""The student-facing helper package: checks fail with actionable messages, never the answer."""

from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import course
from course import checks
from course.plots import plot_attention, plot_curves


def fails_with(fn, *args, **kwargs) -> str:
    with pytest.raises(AssertionError) as info:
        fn(*args, **kwargs)
    return str(info.value)


def test_check_shape_names_a_transpose():
    message = fails_with(checks.check_shape, "weights", np.zeros((2, 5, 3)), (2, 3, 5))
    assert "has shape (2, 5, 3), expected (2, 3, 5)" in message and "swapped" in message


def test_check_shape_names_a_lost_axis_and_none():
    assert "number of axes" in fails_with(checks.check_shape, "out", np.zeros((3, 5)), (2, 3, 5))
    assert "forget to return" in fails_with(checks.check_shape, "out", None, (2,))


def test_check_rows_sum_to_one_reports_the_worst_row():
    weights = np.array([[0.5, 0.5], [1.0, 0.73]])
    message = fails_with(checks.check_rows_sum_to_one, "weights", weights, hint="softmax over the key axis?")
    assert "1 of 2 rows" in message and "worst 1.73" in message and "softmax over the key axis?" in message


def test_check_rows_sum_to_one_rejects_negative_and_nan():
    assert "negative" in fails_with(checks.check_rows_sum_to_one, "w", np.array([[1.5, -0.5]]))
    assert "1 NaN" in fails_with(checks.check_rows_sum_to_one, "w", np.array([[np.nan, 1.0]]))


def test_check_finite_counts_nan_and_inf():
    message = fails_with(checks.check_finite, "x", np.array([1.0, np.nan, np.inf, -np.inf]))
    assert "1 NaN and 2 infinite" in message and "index (1,)" in message


@settings(max_examples=40, deadline=None)
@given(arrays(np.float64, st.tuples(st.integers(1, 4), st.integers(1, 4)),
              elements=st.floats(-100, 100)),
       st.floats(0.5, 10))
def test_check_close_never_prints_expected_values(expected, shift):
    actual = expected + shift
    message = fails_with(checks.check_close, "out", actual, expected)
    assert "largest difference" in message
    numbers = {float(x) for x in re.findall(r"-?\d+\.\d+(?:e[-+]?\d+)?", message)}
    shown = {round(float(v), 3) for v in expected.ravel()} - {0.0}
    assert not (shown & {round(n, 3) for n in numbers} - {round(shift, 3)}), message


def test_check_close_names_a_likely_cause():
    expected = np.array([0.5, 0.5])
    message = fails_with(checks.check_close, "w", np.array([0.9, 0.1]), expected,
                         likely_causes={"the scale is missing": np.array([0.9, 0.1]),
                                        "something else": np.array([0.2, 0.8])})
    assert "it matches what you get when the scale is missing" in message


def _moved(expected, change):
    actual = expected.copy()
    change(actual)
    return actual


_E = np.random.default_rng(7).normal(size=(2, 4, 4))
_PATTERNS = [
    (_E * 8 ** 0.5, "times the same factor, 2.83"),
    (-_E, "the sign opposite to the right one"),
    (_E + 0.25, "plus the same amount, 0.25"),
    (np.zeros_like(_E), "every entry is zero"),
    (np.swapaxes(_E, 1, 2), "with axes 1 and 2 swapped"),
    (np.flip(_E, 1), "in reverse order along axis 1"),
    (np.concatenate([_E[:, :1], _E[:, :-1]], axis=1), "shifted by one position along axis 1"),
    (np.sort(_E, axis=2), "each slice along axis 2 holds the right values in another order"),
    (_moved(_E, lambda a: a.__setitem__((Ellipsis, 0, 3), 9.0)), "lie above the diagonal of the last two axes"),
    (_moved(_E, lambda a: a.__setitem__((1,), 0.5)), "lie at index 1 of axis 0; the rest is right"),
    (_moved(_E, lambda a: a.__setitem__((slice(None), slice(2, None)), 0.5)), "lie at indices 2, 3 of axis 1"),
]


@pytest.mark.parametrize("actual, said", _PATTERNS, ids=[said.split(",")[0][:40] for _, said in _PATTERNS])
def test_check_close_names_the_pattern_of_a_difference_no_likely_cause_covers(actual, said):
    """A mistake nobody listed still gets a sentence about its kind (the same values moved, one factor, some
    rows only), before the test's own hint, and never an expected value."""
    message = fails_with(checks.check_close, "out", actual, _E, hint="compare with the formula")
    assert said in message and message.endswith(": compare with the formula"), message
    shown = {f"{v:.3g}" for v in _E.ravel()}
    assert not shown & set(re.findall(r"-?\d+\.\d+", message.split("rtol=0.0001", 1)[1])), message


def test_check_close_names_no_pattern_where_there_is_none():
    """Noise, a likely cause that matches, and expected values that are all alike get no pattern sentence."""
    noise = np.random.default_rng(8).normal(size=_E.shape)
    assert fails_with(checks.check_close, "out", noise, _E).endswith("rtol=0.0001")
    said = fails_with(checks.check_close, "out", -_E, _E, likely_causes={"the sign is flipped": -_E})
    assert "it matches what you get when the sign is flipped" in said and "opposite" not in said
    flat = np.full((3, 3), 0.5)
    assert fails_with(checks.check_close, "w", flat * 2, flat).endswith("rtol=0.0001"), "factor or constant: unknown"
    assert checks.difference_pattern(np.array([1.0]), np.array([2.0])) is None


def test_check_close_accepts_torch_and_passes_close_values():
    torch = pytest.importorskip("torch")
    checks.check_close("x", torch.tensor([1.0, 2.0]), np.array([1.0, 2.0 + 1e-7]))


def test_check_dtype_type_and_true():
    assert "dtype float32, expected float64" in fails_with(
        checks.check_dtype, "x", np.zeros(2, np.float32), np.float64)
    assert "is a list, expected a tuple" in fails_with(checks.check_type, "result", [1], tuple)
    assert fails_with(checks.check_true, False, "say why") == "say why"


def test_short_demos_follows_the_environment(monkeypatch):
    monkeypatch.delenv("COURSE_QUICK_DEMOS", raising=False)
    assert course.short_demos() is False
    monkeypatch.setenv("COURSE_QUICK_DEMOS", "1")
    assert course.short_demos() is True


def test_under_nbgrader_follows_the_environment(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    assert not course.under_nbgrader() and course.grading_mode() is None
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert course.under_nbgrader() and course.grading_mode() == "autograde"


def test_seed_everything_is_reproducible():
    torch = pytest.importorskip("torch")
    a = (course.seed_everything(3).normal(size=3), np.random.rand(), torch.rand(2))
    b = (course.seed_everything(3).normal(size=3), np.random.rand(), torch.rand(2))
    assert np.array_equal(a[0], b[0]) and a[1] == b[1] and torch.equal(a[2], b[2])


def test_plots_label_their_axes():
    import matplotlib

    matplotlib.use("Agg")
    ax = plot_attention(np.full((2, 3), 1 / 3), queries=["a", "b"], keys=["x", "y", "z"], title="t")
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == ("key", "query", "t")
    with pytest.raises(ValueError, match="2-D"):
        plot_attention(np.zeros((2, 2, 2)))
    ax = plot_curves([1, 2], {"raw": [1, 2]}, xlabel="d_k", ylabel="top weight", logx=True)
    assert ax.get_xlabel() == "d_k" and ax.get_xscale() == "log"
    assert ax.lines[0].get_marker() == "o"
    ax = plot_curves(range(3), {"loss": [3, 2, 1]}, xlabel="step", ylabel="loss", marker=None, hlines={"floor": 0.5})
    assert ax.lines[0].get_marker() in ("", "None") and list(ax.lines[1].get_ydata()) == [0.5, 0.5]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["loss", "floor"]


def test_the_student_api_is_declared_once():
    """Each student module lists its public functions in ``__all__``; ``course`` offers their union."""
    from course import env, quiz, seeding

    for module in (checks, env, quiz, seeding):
        public = {name for name, value in vars(module).items() if callable(value) and not name.startswith("_")
                  and getattr(value, "__module__", None) == module.__name__}
        assert public <= set(module.__all__), f"{module.__name__}: public but not in __all__: {public - set(module.__all__)}"
        for name in module.__all__:
            assert getattr(course, name) is getattr(module, name), f"course.{name}"
    assert len(course.__all__) == len(set(course.__all__)), "a name is declared by two modules"


def test_diagrams_label_sublayers_and_residuals():
    import matplotlib

    matplotlib.use("Agg")
    from course.diagrams import draw_encoder_block, draw_encoder_decoder

    def texts(ax):
        return {t.get_text() for t in ax.texts}

    post, pre = draw_encoder_block()
    assert {"multi-head self-attention", "feed-forward (ffn)", "Add & LayerNorm (norm1)", "residual"} <= texts(post)
    assert {"LayerNorm (norm1)", "LayerNorm (norm2)", "+", "residual"} <= texts(pre)
    whole = texts(draw_encoder_decoder())
    assert {"masked self-attention (causal)", "cross-attention", "Add & LayerNorm (norm3)", "K, V", "Q",
            "memory (B, S, D)", "ENCODER", "DECODER"} <= whole


def test_check_choice_reads_every_quiz_answer_by_one_rule():
    """Case and surrounding spaces do not matter; anything else fails, listing the valid letters only."""
    from course import check_choice

    assert check_choice("Q1", " B ") == "b" and check_choice("Q1", "c\n") == "c"
    assert check_choice("Q2", "C", "abc") == "c"
    for wrong in ("e", "ab", "", None, 2, "b)"):
        with pytest.raises(AssertionError) as failure:
            check_choice("Q1", wrong)
        assert str(failure.value).startswith(f"Q1 is {wrong!r}: ") and '"a", "b", "c" or "d"' in str(failure.value)
    with pytest.raises(AssertionError, match='"a", "b" or "c"'):
        check_choice("Q3", "d", "abc")


def test_check_option_names_the_misconception_of_the_option_chosen():
    """The right letter passes; a wrong one fails with its own feedback; feedback must cover all letters but one."""
    from course import check_option

    wrong = {"a": "that is the spread after the division", "b": "that is the variance", "d": "upside down"}
    assert check_option("Q1", " C", wrong) == "c"
    with pytest.raises(AssertionError, match=r"^Q1 is not right: \(b\) that is the variance$"):
        check_option("Q1", "B", wrong)
    with pytest.raises(AssertionError, match="one letter as a string"):
        check_option("Q1", "16", wrong)
    with pytest.raises(ValueError):
        check_option("Q1", "c", {"a": "x", "b": "y"})


def test_check_prediction_names_the_known_mistake_and_never_the_expected_number():
    """Within the tolerance passes; a known wrong value gets its reasoning; anything else the hint."""
    import numpy as np

    from course import check_number, check_prediction

    known = ((400.0, "that is the variance"), (1.0, "that is after the division"))
    assert check_prediction("P", np.float64(20.5), 20.0, hint="h", known=known) == 20.5
    with pytest.raises(AssertionError, match=r"^P = 400 is not right: that is the variance$"):
        check_prediction("P", 400, 20.0, hint="h", known=known)
    with pytest.raises(AssertionError) as failure:
        check_prediction("P", 30, 20.0, hint="square root of the variance", known=known)
    assert "square root of the variance" in str(failure.value) and "20" not in str(failure.value)
    assert "(a prediction within 5 % counts)" in str(failure.value)
    with pytest.raises(AssertionError, match=r"\(a prediction within 0\.2 % counts\)"):
        check_prediction("P", 30, 20.0, hint="h", rel=0.002)
    with pytest.raises(AssertionError, match=r"\(only the exact number counts\)"):
        check_prediction("P", 20.5, 20.0, hint="h", rel=0.0)
    assert check_prediction("P", 20, 20.0, hint="h", rel=0.0) == 20.0
    for wrong in (None, "20", True, float("nan"), [20]):
        with pytest.raises(AssertionError, match="^P is "):
            check_number("P", wrong)


class _RecordingLink:
    """A stand-in for the grader's link to a kernel: records every request, always gives ``answer``."""

    def __init__(self, answer):
        self.answer, self.sent = answer, []

    def request(self, message, generators=None):
        self.sent.append(message)
        return self.answer


def test_attempt_calls_a_kernel_function_for_the_test_but_other_checks_read_no_proxy(monkeypatch):
    """course.attempt(what, fn, ...) is the test's own call (one request); check_true(fn) or a copy of attempt
    written elsewhere may not touch a proxy, and a crash comes back as one sentence with the hint."""
    from nboracle.grader import oracle

    from course import checks

    # nbgrader_config.py: c.OracleExecute.calling_helpers = ["course.checks:attempt"]
    monkeypatch.setattr(oracle, "_CALLING_CODES", {oracle._helper_code("course.checks:attempt")})

    class CallLink(_RecordingLink):  # a call also hands over the generators it sent
        def request(self, message, generators=None):
            return super().request(message)

    link = CallLink(5)
    fn = oracle.make_proxy(link, {"id": 4, "type": ["kernel.function"], "callable": True})
    namespace = {"fn": fn, "attempt": checks.attempt, "check_true": checks.check_true}
    exec(compile("out = attempt('fn(2)', fn, 2, hint='read the text')", "<test cell>", "exec"), namespace)
    assert namespace["out"] == 5 and [(m["op"], m["args"]) for m in link.sent] == [("call", [2])]
    with pytest.raises(AttributeError, match="not an array or tensor"):
        exec(compile("check_true(fn.size, 'x')", "/somewhere/course/checks.py", "exec"), namespace)
    lookalike = {}
    exec(compile("def attempt(what, function, *args):\n    return function(*args)\n", "/elsewhere/helper.py", "exec"),
         lookalike)
    with pytest.raises(checks.CheckFailed, match="not an array or tensor"):  # only the grader's own attempt is let through
        checks.attempt("a copy", lookalike["attempt"], "fn", fn)
    def crash(message, generators=None):
        raise oracle.kernel_error("RuntimeError", "shapes differ.")

    link.request = crash
    with pytest.raises(checks.CheckFailed) as failed:
        exec(compile("attempt('fn(3)', fn, 3, hint='pass the mask as it is.')", "<test cell>", "exec"), namespace)
    assert str(failed.value) == "fn(3) raised RuntimeError (shapes differ): pass the mask as it is"



def test_error_raised_returns_what_the_tests_own_call_raised():
    """course.error_raised(lambda: ...) returns the error the student's code raised (a ValueError is still one under
    the oracle) and None when it returns; the lambda is the test's code, so its call reaches the kernel. Handed a
    kernel function itself, error_raised may not call it: it returns the refusal, never a call."""
    from nboracle.grader import oracle

    from course import checks

    link = _RecordingLink(7)
    fn = oracle.make_proxy(link, {"id": 3, "type": ["kernel.function"], "callable": True})
    namespace = {"fn": fn, "error_raised": checks.error_raised}
    exec(compile("returned = error_raised(lambda: fn(2))", "<test cell>", "exec"), namespace)
    assert namespace["returned"] is None and [m["op"] for m in link.sent] == ["call"]

    def crash(message, generators=None):
        raise oracle.kernel_error("ValueError", "9 tokens, max_len=8")

    link.request = crash
    exec(compile("raised = error_raised(lambda: fn(9))", "<test cell>", "exec"), namespace)
    assert isinstance(namespace["raised"], ValueError) and str(namespace["raised"]) == "9 tokens, max_len=8"
    refused = checks.error_raised(fn)
    assert isinstance(refused, TypeError) and "not an array or tensor" in str(refused)


def test_a_chapters_checks_may_call_a_proxy_and_other_course_code_may_not(monkeypatch):
    """c.OracleExecute.test_modules: the lines of a chapter's checks module (course/decoder_checks.py) use a kernel
    object as a test cell's lines do; the same code compiled as any other file (course/checks.py, a lookalike of the
    module elsewhere) cannot, so only the modules the course lists are test code."""
    from nboracle.grader import oracle

    from course import decoder_checks

    monkeypatch.setattr(oracle, "_TEST_FILES", oracle._test_module_files("course.decoder_checks"))
    assert decoder_checks.check_decoder_causal.__code__.co_filename in oracle._TEST_FILES
    link = _RecordingLink(7)
    fn = oracle.make_proxy(link, {"id": 9, "type": ["kernel.function"], "callable": True})
    code = "def call(f, x):\n    return f(x)\n"
    listed, other, lookalike = {}, {}, {}
    exec(compile(code, decoder_checks.check_decoder_causal.__code__.co_filename, "exec"), listed)
    exec(compile(code, "/somewhere/course/checks.py", "exec"), other)
    exec(compile(code, "/elsewhere/course/decoder_checks.py", "exec"), lookalike)
    assert listed["call"](fn, 3) == 7 and [m["op"] for m in link.sent] == ["call"]
    for namespace in (other, lookalike):
        with pytest.raises(TypeError, match="not an array or tensor"):
            namespace["call"](fn, 3)
    with monkeypatch.context() as patch:  # a module the course does not list is not test code
        patch.setattr(oracle, "_TEST_FILES", set())
        with pytest.raises(TypeError, match="not an array or tensor"):
            listed["call"](fn, 3)

def test_kieu_corpus_ships_whole_and_loads_without_network(monkeypatch):
    """Chapter 10's corpus: the 3,254 lines of Truyện Kiều, NFC, 6 and 8 words alternating, read from the package."""
    import socket
    import unicodedata

    def no_network(*args, **kwargs):
        raise AssertionError("the corpus must load without network")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    lines = course.kieu_lines()
    assert len(lines) == 3254
    assert all(unicodedata.is_normalized("NFC", line) for line in lines)
    assert [len(line.split()) for line in lines] == [6, 8] * 1627
    assert lines[0] == "Trăm năm trong cõi người ta,"
    assert course.KIEU_PATH.stat().st_size < 200_000
