"""The oracle's wire format (nbgrader-oracle/nboracle/kernel/wire.py): what the grader accepts from a kernel.

Only plain data crosses from the kernel: every answer is decoded strictly into fresh numpy
arrays, tensors and Python values; anything else (a pickle, a subclass, a payload that is too
big or too deep, a malformed entry) raises WireError, which fails the test that asked, and
never crashes the grader.
"""

from __future__ import annotations

import base64
import json
import pickle

import numpy as np
import pytest
import torch
from nboracle.kernel import fresh as fresh_module
from nboracle.kernel import probes, server, wire


def roundtrip(value, handle=None):
    return wire.decode(wire.dumps(value, handle))


class RecordingLink:
    """A stand-in for the grader's link to a kernel: records every request, always gives ``answer``."""

    def __init__(self, answer):
        self.answer, self.sent = answer, []

    def request(self, message):
        self.sent.append(message)
        return self.answer

    def proxy(self, entry):
        from nboracle.grader import oracle

        return oracle.make_proxy(self, entry)


def test_data_roundtrips_as_fresh_genuine_objects():
    array = np.arange(12.0).reshape(3, 4)
    tensor = torch.randn(2, 3, dtype=torch.float64)
    value = {"a": (array, [tensor, None, True, 3, 2.5, float("nan")]), 7: "text", ("k", 1): np.float32(1.5)}
    back = roundtrip(value)
    assert type(back["a"][0]) is np.ndarray and np.array_equal(back["a"][0], array)
    assert back["a"][0] is not array and back["a"][0].flags.writeable
    assert type(back["a"][1][0]) is torch.Tensor and torch.equal(back["a"][1][0], tensor)
    assert back["a"][1][1:5] == [None, True, 3, 2.5] and np.isnan(back["a"][1][5])
    assert back[7] == "text" and type(back[("k", 1)]) is np.float32
    assert roundtrip(torch.float64) is torch.float64
    assert roundtrip(torch.ones(2, dtype=torch.bfloat16)).dtype == torch.bfloat16
    trainable = roundtrip(torch.nn.Parameter(torch.ones(2)))
    assert type(trainable) is torch.Tensor and trainable.requires_grad and trainable.is_leaf


def test_subclasses_arrive_as_their_plain_values():
    class Lying(np.ndarray):
        def __eq__(self, other):
            return np.ones(self.shape, bool)

    lying = np.zeros(3).view(Lying)
    back = wire.decode(wire.dumps(lying, handle=lambda v: {"t": "h", "id": 1, "type": [], "callable": False}))
    assert type(back) is np.ndarray and not (back == 1).any()

    class LyingTensor(torch.Tensor):
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            return True

    got = wire.decode(wire.dumps(torch.zeros(2).as_subclass(LyingTensor), handle=lambda v: {}))
    assert type(got) is torch.Tensor and torch.equal(got, torch.zeros(2))

    class SneakyFloat(float):
        def __eq__(self, other):
            return True

    assert type(wire.decode(wire.dumps(SneakyFloat(1.0), handle=lambda v: {}))) is float


def test_arguments_travel_by_value_only():
    with pytest.raises(wire.WireError, match="by value"):
        wire.dumps(lambda x: x)
    with pytest.raises(wire.WireError):
        wire.dumps(np.array([object()]))


def entry(**fields):
    base = {"t": "nd", "dtype": "float64", "shape": [2], "b64": base64.b64encode(np.zeros(2).tobytes()).decode()}
    base.update(fields)
    return json.dumps(base)


@pytest.mark.parametrize("text,fragment", [
    (base64.b64encode(pickle.dumps(np.zeros(3))).decode(), "not JSON"),
    (pickle.dumps(np.zeros(3)).decode("latin-1"), "not JSON"),
    (json.dumps({"t": "pickle", "v": "gASV"}), "unknown entry"),
    (json.dumps([1, 2]), "bare JSON list"),
    (entry(dtype="object"), "dtype"),
    (entry(dtype="O"), "dtype"),
    (entry(dtype="float128", shape=[1]), "dtype 'float128'"),  # the kernel casts it; the grader takes only DTYPES
    (entry(dtype="complex256", shape=[1]), "dtype 'complex256'"),
    (entry(shape=[3]), "needs 24 bytes"),
    (entry(shape=[-2]), "non-negative"),
    (entry(shape=[2.0]), "non-negative"),
    (entry(b64="not base64!"), "base64"),
    (entry(extra=1), "unexpected fields"),
    (entry(shape=[1 << 40]), "MiB"),
    (json.dumps({"t": "tuple", "v": [{"t": "list", "v": []}] * (wire.MAX_ITEMS + 1)}), "more than"),
    (json.dumps({"t": "dict", "v": [[{"t": "list", "v": []}, 1]]}), "dict key"),
    (json.dumps({"t": "float", "v": "1e999999"}), "special float"),
    (json.dumps({"t": "pt", "dtype": "int64", "shape": [], "b64": "AAAAAAAAAAA=", "grad": True}), "gradient"),
    (json.dumps({"t": "h", "id": 1, "type": [], "callable": False}), "only data"),
    (json.dumps({"t": "h", "id": "1", "type": [], "callable": False}), "malformed"),
    ("x" * 100, "not JSON"),
])
def test_decoder_refuses_what_is_not_data(text, fragment):
    with pytest.raises(wire.WireError, match=fragment):
        wire.decode(text)


def test_decoder_refuses_deep_and_huge_answers():
    deep = {"t": "list", "v": []}
    for _ in range(wire.MAX_DEPTH + 5):
        deep = {"t": "list", "v": [deep]}
    with pytest.raises(wire.WireError, match="deep"):
        wire.decode(json.dumps(deep))
    very_deep = "[" * 200_000 + "]" * 200_000
    with pytest.raises(wire.WireError):
        wire.decode(very_deep)
    with pytest.raises(wire.WireError, match="longer than"):
        wire.decode(" " * (wire.MAX_TEXT + 1))


def test_kernel_end_answers_with_data_or_handles():
    """serve(): the kernel's end keeps non-data objects and sends handles to them."""
    import __main__

    __main__.oracle_test_layer = torch.nn.Linear(3, 2)
    try:
        answer = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_layer"})))
        handle = answer["ok"]
        assert handle["t"] == "h" and handle["type"][0] == "torch.nn.modules.linear.Linear"
        x = json.loads(wire.dumps(torch.ones(4, 3)))
        out = json.loads(server.serve(json.dumps({"op": "call", "h": handle["id"], "args": [x], "kwargs": {}})))
        assert wire.decode(json.dumps(out["ok"])).shape == (4, 2)
        missing = json.loads(server.serve(json.dumps({"op": "name", "name": "no_such_name_here"})))
        assert missing["error"][0] == "NameError"
    finally:
        del __main__.oracle_test_layer


def test_extended_precision_and_unsigned_answers_arrive_as_the_nearest_whitelisted_dtype():
    """Honest work in np.longdouble, complex256 or uint64 is data, not a handle (issue 29, item 8).

    Kills the mutant that sends them as handles (the answer would be a handle entry, not an
    array) and the one that casts without checking the range (1e4000 would arrive as inf)."""
    import __main__

    scores = np.array([[1.0, 2.0, 3.0], [0.5, 0.5, -1.0]], dtype=np.longdouble)
    __main__.oracle_test_longdouble = lambda: np.exp(scores) / np.exp(scores).sum(-1, keepdims=True)
    __main__.oracle_test_scalar = lambda: np.longdouble(1) / 3
    __main__.oracle_test_odd = lambda: (np.array([1 + 2j], dtype=np.clongdouble), np.arange(3, dtype=np.uint64),
                                        np.uint32(7), torch.tensor([0, 1, 2], dtype=torch.uint32))
    __main__.oracle_test_huge = lambda: np.array([np.longdouble(10) ** 4000])
    __main__.oracle_test_wide = lambda: np.array([2 ** 64 - 1], dtype=np.uint64)
    try:
        def call(name):
            handle = json.loads(server.serve(json.dumps({"op": "name", "name": name})))["ok"]
            return json.loads(server.serve(json.dumps({"op": "call", "h": handle["id"], "args": [], "kwargs": {}})))

        weights = wire.decode_tree(call("oracle_test_longdouble")["ok"])
        assert type(weights) is np.ndarray and weights.dtype == np.float64
        assert np.array_equal(weights, __main__.oracle_test_longdouble().astype(np.float64))
        third = wire.decode_tree(call("oracle_test_scalar")["ok"])
        assert type(third) is np.float64 and third == 1 / 3
        complex_, unsigned, scalar, tensor = wire.decode_tree(call("oracle_test_odd")["ok"])
        assert complex_.dtype == np.complex128 and complex_[0] == 1 + 2j
        assert unsigned.dtype == np.int64 and unsigned.tolist() == [0, 1, 2]
        assert type(scalar) is np.int64 and scalar == 7
        assert type(tensor) is torch.Tensor and tensor.dtype == torch.int64 and tensor.tolist() == [0, 1, 2]
        for name, dtype in (("oracle_test_huge", "float128"), ("oracle_test_wide", "uint64")):
            error = call(name)["error"]
            assert error[0] == "WireError" and f"dtype {dtype}" in error[1] and "range" in error[1]
    finally:
        for name in ("longdouble", "scalar", "odd", "huge", "wide"):
            delattr(__main__, f"oracle_test_{name}")


def test_a_generator_travels_by_its_state_and_comes_back_moved_on():
    """A NumPy Generator argument: the kernel draws from a copy, and reports where it left it."""
    from nboracle.grader.oracle import _load_states, _send

    import __main__

    __main__.oracle_test_draw = lambda rng, n: rng.standard_normal(n)
    try:
        mine, reference = np.random.default_rng(5), np.random.default_rng(5)
        sent: list = []
        args = [_send(mine, sent), _send(3, sent)]
        assert sent == [mine] and args[0]["t"] == "rng"
        handle = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_draw"})))["ok"]
        answer = json.loads(server.serve(json.dumps({"op": "call", "h": handle["id"], "args": args, "kwargs": {}})))
        assert np.array_equal(wire.decode(json.dumps(answer["ok"])), reference.standard_normal(3))
        assert mine.bit_generator.state != reference.bit_generator.state  # by value: not moved yet
        _load_states(sent, answer["rng"])
        assert mine.bit_generator.state == reference.bit_generator.state
        with pytest.raises(wire.WireError, match="where the generators"):
            _load_states(sent, [])
        forged = {"bit_generator": "MT19937", "state": {"key": [1], "pos": 0}}
        with pytest.raises(wire.WireError, match="not valid"):
            _load_states(sent, [json.loads(wire.dumps(forged))])
        with pytest.raises(wire.WireError, match="MT19937 cannot be sent"):
            _send(np.random.Generator(np.random.MT19937(0)), [])
        with pytest.raises(wire.WireError, match="by value"):
            wire.dumps(np.random.RandomState(0))
    finally:
        del __main__.oracle_test_draw


def test_the_grader_moves_its_generators_on_itself_and_refuses_states_it_does_not_reach():
    """Issue 29, item 6: the kernel's reported state is never loaded. The grader advances its own
    generator by the distance to it and accepts only an exact match within 2**40 draws. Kills the
    mutant that loads the report as it comes (every forged state below would be loaded), the one
    without the distance bound (a far state of the same stream, and one *behind*, would be), and
    the one that ignores the 32 bits a float32 draw keeps (the next float32 draws would differ)."""
    from nboracle.grader.oracle import _load_states

    def reported(generator):
        return json.loads(wire.dumps(generator.bit_generator.state))

    mine, kernel = np.random.default_rng(11), np.random.default_rng(11)
    kernel.standard_normal(5)
    kernel.random(3, dtype=np.float32)  # leaves 32 bits for the next 32-bit draw
    kernel.standard_normal(2)  # ... which outlive 64-bit draws
    _load_states([mine], [reported(kernel)])
    assert np.array_equal(mine.random(5, dtype=np.float32), kernel.random(5, dtype=np.float32))
    assert np.array_equal(mine.standard_normal(4), kernel.standard_normal(4))

    own = mine.bit_generator.state
    far = np.random.default_rng(11)
    far.bit_generator.advance(1 << 41)
    behind = np.random.default_rng(11)
    elsewhere = {**own, "state": {"state": 12345, "inc": own["state"]["inc"]}}
    other_stream = {**own, "state": {"state": own["state"]["state"], "inc": 1}}
    kept = {**own, "has_uint32": 1, "uinteger": 7}  # 32 bits the grader never drew
    for state, fragment in ((far.bit_generator.state, "within"), (behind.bit_generator.state, "within"),
                            (elsewhere, "within"), (other_stream, "another generator"), (kept, "reproduce")):
        with pytest.raises(wire.WireError, match=fragment):
            _load_states([mine], [json.loads(wire.dumps(state))])
        assert mine.bit_generator.state == own  # a refused report moves nothing
    mine.standard_normal(1)
    assert mine.bit_generator.state != own


def test_call_keeping_arguments_returns_the_arguments_as_the_call_left_them():
    def shift(x):
        x += 1
        return x.sum()

    x = torch.zeros(3)
    result, (after,) = probes.call_keeping_arguments(shift, x)  # in JupyterLab: the caller's own x
    assert after is x and torch.equal(x, torch.ones(3)) and float(result) == 3.0
    import __main__

    __main__.oracle_test_shift = shift
    try:  # in the kernel: the copy the call modified comes back as data
        handle = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_shift"})))["ok"]
        request = {"op": "probe", "name": "arguments", "args": [handle, json.loads(wire.dumps(torch.zeros(2)))],
                   "kwargs": {}}
        answer = json.loads(server.serve(json.dumps(request)))
        value = wire.decode(json.dumps(answer["ok"]), make_handle=lambda entry: entry)
        assert float(value[0]) == 2.0 and torch.equal(value[1][0], torch.ones(2))
    finally:
        del __main__.oracle_test_shift


INSTRUCTOR_CELL = '''
import zlib
import numpy as np
import torch
from torch import nn
from nboracle import fresh
TABLE = {"<s>": {"a": 0.5, "<eos>": 0.5}, "a": {"<eos>": 1.0}}

def table_next_probs(prefix):
    return TABLE[prefix[-1]]

def random_table(seed, words=("a", "b")):
    def next_probs(prefix):
        r = np.random.default_rng(zlib.crc32(("|".join(map(str, prefix)) + f"#{seed}").encode()))
        return dict(zip(list(words) + ["<eos>"], r.dirichlet(np.ones(len(words) + 1)).tolist()))
    return next_probs

class Scaled(nn.Module):
    def __init__(self, factor, width=3):
        super().__init__()
        self.factor = factor
        self.linear = nn.Linear(width, 2)
    def forward(self, x):
        return self.factor * self.linear(x)
'''


@pytest.fixture
def grader_side(monkeypatch):
    """A namespace as the grader's oracle builds it: cells run from their source, fresh() sends source."""
    from nboracle.grader.oracle import _run

    monkeypatch.setattr(fresh_module, "_GRADER_SIDE", True)
    namespace = {"__name__": "__grader__"}
    assert _run(INSTRUCTOR_CELL, "<provided wire_test_cell>", namespace) == ("", None)
    return namespace


class Offers:
    """The part of a KernelLink that serves instructor objects, without a kernel."""

    def __init__(self) -> None:
        from nboracle.grader.oracle import KernelLink

        self.link = KernelLink.__new__(KernelLink)
        from nboracle.grader.memory import MemoryCap

        self.link.instructor, self.link._instructor_ids = {}, iter(range(1, 1000))
        self.link.memory = MemoryCap(0)

    def send(self, marker):
        from nboracle.grader.oracle import _send

        return json.loads(json.dumps(_send(marker, None, self.link)))

    def ask(self, entry, op, *args, name=None, **kwargs):
        """What the kernel's stand-in for ``entry`` gets back for one request (the decoded answer)."""
        request = {"cb": entry["id"], "op": op, "args": [wire.encode(a) for a in args],
                   "kwargs": {k: wire.encode(v) for k, v in kwargs.items()}}
        if name is not None:
            request["name"] = name
        text = self.link.answer_instructor(json.dumps(request).encode())
        assert text.startswith(server._REPLY)
        reply = json.loads(text)["cbr"]
        if "error" in reply or (type(reply["ok"]) is dict and reply["ok"].get("t") == "cb"):
            return reply if "error" in reply else reply["ok"]
        return server._value(reply["ok"])  # as the kernel reads it


def test_fresh_outside_the_grader_is_the_callable_itself():
    def next_probs(prefix):
        return {"<eos>": 1.0}

    assert fresh_module.fresh(next_probs) is next_probs
    layer = fresh_module.fresh(torch.nn.Linear, 3, 2)
    assert type(layer) is torch.nn.Linear and layer.in_features == 3


def test_instructor_functions_stay_in_the_grader_and_answer_with_data(grader_side):
    offers = Offers()
    fresh = grader_side["fresh"]
    for made in (grader_side["table_next_probs"], grader_side["random_table"](7), lambda prefix: {"<eos>": 1.0}):
        marker = fresh(made)
        entry = offers.send(marker)
        assert set(entry) == {"t", "id", "callable"} and entry["t"] == "cb" and entry["callable"]
        for prefix in [("<s>",), ("<s>", "a")]:
            assert offers.ask(entry, "call", prefix) == made(prefix) == marker(prefix)
    with pytest.raises(wire.WireError, match="by value"):
        offers.send(grader_side["table_next_probs"])  # not wrapped in fresh(): refused, as any function
    with pytest.raises(wire.WireError, match="argument of a call"):
        json.dumps(__import__("nboracle.grader.oracle", fromlist=["_send"])._send(fresh(made)))


def test_a_stand_in_reads_only_public_attributes_and_changes_only_its_own_copy(grader_side):
    """Every send is a copy of the grader's object: a student's load_state_dict through the
    stand-in changes that copy only; private names and non-data arguments are refused."""
    offers = Offers()
    marker = grader_side["fresh"](grader_side["Scaled"], 2.0, width=4)
    before = marker.linear.weight.detach().clone()
    entry = offers.send(marker)
    part = offers.ask(entry, "getattr", name="linear")
    assert part["t"] == "cb" and part["callable"] and part["id"] != entry["id"]
    assert offers.ask(entry, "getattr", name="factor") == 2.0
    x = torch.randn(5, 4)
    assert torch.equal(offers.ask(entry, "call", x), marker(x))
    assert torch.equal(offers.ask(part, "call", x), marker.linear(x))
    zeros = {"linear.weight": torch.zeros(2, 4), "linear.bias": torch.zeros(2)}
    assert offers.ask(entry, "getattr", name="load_state_dict")["t"] == "cb"
    method = offers.ask(entry, "getattr", name="load_state_dict")
    offers.ask(method, "call", zeros)
    assert torch.equal(offers.ask(entry, "call", x), torch.zeros(5, 2))  # the stand-in's copy changed
    assert torch.equal(marker.linear.weight, before) and not torch.equal(marker(x), torch.zeros(5, 2))
    assert not torch.equal(offers.ask(offers.send(marker), "call", x), torch.zeros(5, 2))  # a new copy
    for name in ("_parameters", "__dict__", "__class__", "forward.__globals__"):
        assert offers.ask(entry, "getattr", name=name)["error"][0] == "AttributeError"
    assert offers.ask({"id": 999}, "call", x)["error"][0] == "LookupError"
    bad = offers.link.answer_instructor(json.dumps({"cb": entry["id"], "op": "call", "args": [
        {"t": "h", "id": 1, "type": [], "callable": True}]}).encode())
    assert json.loads(bad)["cbr"]["error"][0] == "WireError"  # a kernel object cannot reach the grader
    offers.link.instructor.clear()  # the test cell ended (KernelLink.pause)
    assert offers.ask(entry, "call", x)["error"][0] == "LookupError"


def test_a_stand_in_is_opaque_and_does_only_what_the_test_allows(grader_side):
    """Issue 43 item 5: no name, an id drawn at random, a function only called, an object limited by
    ``only`` (its parts as the test says), and the kernel's stand-in says nothing of the object."""
    from nboracle.grader.oracle import KernelLink, _opaque_ids

    ids = _opaque_ids()
    assert len({next(ids) for _ in range(50)}) == 50 and all(0 < next(ids) <= 2 ** 53 for _ in range(50))
    link = KernelLink.__new__(KernelLink)
    link.instructor, link._instructor_ids = {}, _opaque_ids()

    def drops_last(x):
        return x

    entry = link.offer(drops_last)
    assert set(entry) == {"t", "id", "callable"} and entry["id"] != 1  # nothing says which block it is
    offers = Offers()
    function = offers.send(grader_side["fresh"](drops_last))
    assert offers.ask(function, "getattr", name="x")["error"][0] == "AttributeError"  # a function: called only
    marker = grader_side["fresh"](grader_side["Scaled"], 2.0, width=4, only={"linear": None})
    limited = offers.send(marker)
    x = torch.randn(5, 4)
    refused = offers.ask(limited, "call", x)["error"]
    assert refused[0] == "TypeError" and "only the attributes linear" in refused[1]
    assert offers.ask(limited, "getattr", name="factor")["error"][0] == "AttributeError"
    assert offers.ask(limited, "len")["error"][0] == "TypeError"
    part = offers.ask(limited, "getattr", name="linear")  # a part the test allows does anything
    assert torch.equal(offers.ask(part, "call", x), marker.linear(x))
    stand_in = server._instructor({"id": 12345, "callable": True})
    assert repr(stand_in) == "<an object of the tests (it runs in the grader)>"
    for name in ("__name__", "__qualname__", "__doc__", "__module__", "__wrapped__"):
        try:
            value = getattr(stand_in, name)
        except AttributeError:
            continue
        assert value in (None, "nboracle.kernel.server") or "Instructor" in str(value) or "stand-in" in str(value), \
            (name, value)


def test_an_instructor_object_keeps_its_dtype_and_its_parts_are_markers(grader_side):
    """``fresh(C, ...).double()`` is still the marker; ``marker.linear`` is a marker of that part."""
    marker = grader_side["fresh"](grader_side["Scaled"], 3.0).double()
    assert isinstance(marker, fresh_module.Fresh)
    part = marker.linear
    assert isinstance(part, fresh_module.Fresh) and part.local is marker.local.linear
    offers = Offers()
    x = torch.randn(2, 3, dtype=torch.float64)
    assert torch.equal(offers.ask(offers.send(part), "call", x), part(x))
    weight = offers.ask(offers.send(part), "getattr", name="weight")
    assert weight.dtype == torch.float64 and weight.requires_grad
    assert marker.eval() is marker and marker.factor == 3.0


def test_a_part_the_test_reads_keeps_the_tests_limit_for_it(grader_side):
    """``fresh(C, only={"linear": ("weight",)}).linear``, read by the test (a provided helper hands ``lm.block`` to a
    student's function), may do what the limit says for that part only; a part the limit does not name, nothing."""
    offers = Offers()
    x = torch.randn(2, 4)
    limited = grader_side["fresh"](grader_side["Scaled"], 2.0, width=4, only={"linear": ("weight",)})
    part = offers.send(limited.linear)
    refused = offers.ask(part, "call", x)["error"]
    assert refused[0] == "TypeError" and "only the attributes weight" in refused[1]
    assert torch.equal(offers.ask(part, "getattr", name="weight"), limited.linear.weight)
    anything = offers.send(grader_side["fresh"](grader_side["Scaled"], 2.0, width=4, only={"linear": None}).linear)
    assert offers.ask(anything, "call", x).shape == (2, 2)
    unnamed = grader_side["fresh"](grader_side["Scaled"], 2.0, width=4, only={"__call__": None}).linear
    assert offers.ask(offers.send(unnamed), "call", x)["error"][0] == "TypeError"
    free = offers.send(grader_side["fresh"](grader_side["Scaled"], 2.0, width=4).linear)  # no limit: as before
    assert offers.ask(free, "call", x).shape == (2, 2)


def test_library_classes_stay_in_the_grader_too(grader_side):
    marker = grader_side["fresh"](torch.nn.MultiheadAttention, 4, 2, batch_first=True)
    offers = Offers()
    x = torch.randn(1, 3, 4)
    out, weights = offers.ask(offers.send(marker), "call", x, x, x, average_attn_weights=False)
    # the request runs with the grader's grad mode, which picks one of the layer's two kernels (the fast path
    # without autograd): the same numbers up to rounding
    assert torch.allclose(out, marker(x, x, x)[0], atol=1e-6) and tuple(weights.shape) == (1, 2, 3, 3)


def test_a_torch_generator_travels_as_its_state():
    from nboracle.grader.oracle import _send

    generator = torch.Generator().manual_seed(6)
    copy = server._value(json.loads(json.dumps(_send(generator))))
    assert type(copy) is torch.Generator and copy is not generator
    assert torch.equal(torch.randint(0, 100, (8,), generator=copy), torch.randint(0, 100, (8,), generator=generator))


def test_kernel_end_calls_methods_lists_torch_generators_and_reports_prints():
    """One round trip for ``obj.method(...)``; PyTorch's generators arrive as an iterator of data;
    what the student's code prints comes back with the answer, cut to MAX_PRINTED characters."""
    import __main__

    class Noisy(torch.nn.Linear):
        def forward(self, x):
            print("forward of", tuple(x.shape))
            print("x" * (wire.MAX_PRINTED + 10))
            return super().forward(x)

    __main__.oracle_test_layer = Noisy(3, 2)
    try:
        layer = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_layer"})))["ok"]
        named = json.loads(server.serve(json.dumps({"op": "call", "h": layer["id"], "name": "named_parameters",
                                                   "args": [], "kwargs": {}})))
        assert named["ok"]["t"] == "iter" and "out" not in named
        items = wire.decode(json.dumps(named["ok"]))
        assert iter(items) is items
        assert [(name, tuple(p.shape)) for name, p in items] == [("weight", (2, 3)), ("bias", (2,))]
        x = json.loads(wire.dumps(torch.ones(4, 3)))
        out = json.loads(server.serve(json.dumps({"op": "call", "h": layer["id"], "args": [x], "kwargs": {}})))
        assert wire.decode(json.dumps(out["ok"])).shape == (4, 2)
        assert out["out"].startswith("forward of (4, 3)\nxxx") and "characters cut by the grader" in out["out"]
        assert len(out["out"]) < wire.MAX_PRINTED + 100
        missing = json.loads(server.serve(json.dumps({"op": "call", "h": layer["id"], "name": "no_such_method",
                                                     "args": [], "kwargs": {}})))
        assert missing["error"][0] == "AttributeError"
    finally:
        del __main__.oracle_test_layer
    assert server.listen() == "no kernel"  # outside a kernel there is no shell channel to listen on


def test_an_iterator_entry_is_decoded_as_strictly_as_a_list():
    assert list(wire.decode(json.dumps({"t": "iter", "v": [1, {"t": "tuple", "v": ["a", 2.5]}]}))) == [1, ("a", 2.5)]
    for bad in ({"t": "iter", "v": 3}, {"t": "iter", "v": [], "x": 1}, {"t": "iter", "v": [{"t": "pickle"}]}):
        with pytest.raises(wire.WireError):
            wire.decode(json.dumps(bad))


def test_the_grader_sends_obj_method_call_as_one_request_and_other_reads_as_getattr():
    """``proxy.name(...)`` in a test is one "call" request; ``getattr(proxy, name)`` stays a read."""
    from nboracle.grader import oracle

    link = RecordingLink(7)
    block = oracle.make_proxy(link, {"id": 3, "type": ["kernel.Block"], "callable": True})
    code = "a = block.forward(1, k=2)\nb = block.size\nc = getattr(block, 'forward')\nf = block.forward\n"
    namespace = {"block": block}
    exec(compile(code, "<test cell>", "exec"), namespace)
    ops = [(m["op"], m.get("name")) for m in link.sent]
    assert ops == [("call", "forward"), ("getattr", "size"), ("getattr", "forward"), ("getattr", "forward")]
    assert link.sent[0]["args"] == [1] and link.sent[0]["kwargs"] == {"k": 2} and link.sent[0]["h"] == 3
    with pytest.raises(AttributeError, match="not an array or tensor"):
        exec(compile("block.forward(1)", "/somewhere/numpy/core.py", "exec"), {"block": block})


def test_largest_tensor_of_a_kernel_function_is_watched_in_the_kernel():
    """nboracle.kernel.probes.largest_tensor on a proxy runs the probe where the function lives; the
    grader gets the result and two numbers, checked to be numbers."""
    from nboracle.grader import oracle
    from nboracle.kernel.probes import largest_tensor

    import __main__

    __main__.oracle_test_outer = lambda a, b: (a[:, None] * b[None, :]).sum()
    try:
        fn = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_outer"})))["ok"]
        args = [{"t": "h", "id": fn["id"]}, json.loads(wire.dumps(torch.ones(300))), json.loads(wire.dumps(torch.ones(200)))]
        answer = json.loads(server.serve(json.dumps({"op": "probe", "name": "largest_tensor", "args": args, "kwargs": {}})))
        result, entries, shape = wire.decode(json.dumps(answer["ok"]))
        assert float(result) == 60000 and entries == 60000 and shape == (300, 200)
    finally:
        del __main__.oracle_test_outer

    link = RecordingLink((torch.zeros(2), 12, (3, 4)))
    proxy = oracle.make_proxy(link, {"id": 5, "type": ["kernel.function"], "callable": True})
    out, largest = largest_tensor(proxy, torch.ones(2), causal=True)
    assert link.sent[0]["op"] == "probe" and link.sent[0]["name"] == "largest_tensor"
    assert link.sent[0]["kwargs"] == {"causal": True} and (largest.entries, largest.shape) == (12, (3, 4))
    link.answer = (torch.zeros(2), "small", (3, 4))
    with pytest.raises(wire.WireError, match="two numbers"):
        largest_tensor(proxy, torch.ones(2))


def test_input_gradients_here_and_in_the_kernel_and_isinstance_with_a_kernel_class():
    """input_gradients gives a gradient per floating-point input (None for a mask), locally and as
    the kernel's data; isinstance(obj, StudentClass) is the kernel's bool, and False for the grader's objects."""
    from nboracle.grader import oracle

    import __main__

    def loss(out, target, valid):
        return ((out - target).square().mean(-1) * valid).sum()

    out, target, valid = torch.ones(2, 3), torch.zeros(2, 3), torch.tensor([True, False])
    d_out, d_target, d_valid = probes.input_gradients(loss, (out, target, valid))
    assert torch.allclose(d_out, torch.tensor([[2 / 3] * 3, [0.0] * 3])) and d_valid is None
    assert torch.allclose(d_target, -d_out) and out.grad is None  # the caller's tensors keep no gradient
    with pytest.raises(TypeError, match="no gradient flows"):
        probes.input_gradients(lambda a: a.sum().item(), (out,))
    __main__.oracle_test_loss = loss
    try:
        fn = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_loss"})))["ok"]
        inputs = json.loads(wire.dumps((out, target, valid)))
        request = {"op": "probe", "name": "input_gradients", "args": [{"t": "h", "id": fn["id"]}, inputs, None,
                                                                     {"t": "dict", "v": []}]}
        answer = json.loads(server.serve(json.dumps(request)))
        gradients, output = wire.decode(json.dumps(answer["ok"]))  # and the output the backward pass went through
        assert torch.equal(gradients[0], d_out) and torch.equal(output, loss(out, target, valid))
    finally:
        del __main__.oracle_test_loss

    link = RecordingLink(True)
    cls = oracle.make_proxy(link, {"id": 1, "type": ["builtins.type"], "callable": True})
    obj = oracle.make_proxy(link, {"id": 2, "type": ["__main__.FeedForward", "torch.nn.modules.module.Module"],
                                   "callable": True})
    assert isinstance(obj, cls) and not isinstance(torch.zeros(1), cls)
    assert [(m["op"], m["name"], m["args"]) for m in link.sent] == [("probe", "isinstance", [{"t": "h", "id": 2},
                                                                                              {"t": "h", "id": 1}])]
    link.answer = "yes"
    with pytest.raises(wire.WireError, match="not a bool"):
        isinstance(obj, cls)


def test_a_batch_runs_its_items_in_the_mode_it_carries_and_the_kernel_keeps_its_own():
    """A batched request's items run under the batch's autograd mode (issue 29, item 8); kills
    the mutant that applies the mode to single requests only, and the one that does not restore it."""
    import __main__

    __main__.oracle_test_mode = lambda: [torch.is_grad_enabled(), torch.is_inference_mode_enabled()]
    try:
        handle = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_mode"})))["ok"]
        item = {"op": "call", "h": handle["id"], "args": [], "kwargs": {}}
        batch = {"op": "batch", "mode": {"grad": False, "inference": False}, "v": [item, item]}
        assert wire.decode_tree(json.loads(server.serve(json.dumps(batch)))["ok"]) == [{"ok": {"t": "list", "v": [False, False]}}] * 2
        inference = {**batch, "mode": {"grad": False, "inference": True}}
        answers = wire.decode_tree(json.loads(server.serve(json.dumps(inference)))["ok"])
        assert answers[0]["ok"]["v"] == [False, True]
        assert torch.is_grad_enabled() and not torch.is_inference_mode_enabled()
    finally:
        del __main__.oracle_test_mode


def test_a_student_call_that_rebinds_the_server_does_not_shape_its_reply(monkeypatch):
    """Issue 29, item 6: the server answers with the functions it had at import. A call that
    rebinds nboracle.kernel.wire.encode, _handle, _answer, json.dumps and a probe, then returns, gets
    the genuine reply, with the request's id. Kills the mutant whose _answer/_serve read the
    module's names after the call (every forged reply below would arrive)."""
    import __main__

    for module, name in ((wire, "encode"), (server, "_handle"), (server, "_answer"), (wire, "_array_entry")):
        monkeypatch.setattr(module, name, getattr(module, name))  # restored after the test
    monkeypatch.setattr(json, "dumps", json.dumps)
    monkeypatch.setitem(probes.PROBES, "arguments", probes.PROBES["arguments"])
    forged = {"t": "nd", "dtype": "float64", "shape": [1], "b64": base64.b64encode(np.ones(1).tobytes()).decode()}

    def rebinding(x):
        wire.encode = lambda value, handle=None, _depth=0: forged
        wire._array_entry = lambda kind, array, name: forged
        server._handle = lambda value: forged
        server._answer = lambda request: {"ok": forged}
        probes.PROBES["arguments"] = lambda function, *args, **kwargs: (np.ones(1), args)
        json.dumps = lambda *args, **kwargs: '{"ok": 1}'
        return x * 2

    __main__.oracle_test_rebinding = rebinding
    try:
        dumps = json.dumps  # the test's own, before the call rebinds json.dumps
        handle = json.loads(server.serve(dumps({"op": "name", "name": "oracle_test_rebinding"})))["ok"]
        x = json.loads(wire.dumps(np.arange(3.0)))
        reply = json.loads(server.serve(dumps({"op": "call", "h": handle["id"], "args": [x], "kwargs": {},
                                             "id": "abc123"})))
        assert reply["id"] == "abc123" and np.array_equal(wire.decode_tree(reply["ok"]), [0.0, 2.0, 4.0])
        assert wire.encode(1) is forged and json.dumps(1) == '{"ok": 1}'  # the call did rebind them
        probe = {"op": "probe", "name": "arguments", "args": [handle, x], "kwargs": {}, "id": "p1"}
        reply = json.loads(server.serve(dumps(probe)))
        result, (after,) = wire.decode_tree(reply["ok"])
        assert np.array_equal(result, [0.0, 2.0, 4.0]) and np.array_equal(after, [0.0, 1.0, 2.0])
    finally:
        del __main__.oracle_test_rebinding


def test_an_answer_is_bounded_before_it_is_parsed(monkeypatch):
    """Issue 29, item 7: the number of JSON values is counted before json.loads builds any (a
    64 MiB "[[],[],...]" took the grader from 0.26 to 1.8 GB before MAX_ITEMS could refuse it).
    Kills the mutant that counts after parsing (json.loads would run), and a naive count of
    commas and brackets (the honest string full of them would be refused)."""
    hostile = '{"t":"list","v":[' + ",".join(["[]"] * (wire.MAX_NODES + 1)) + "]}"

    def never(*args, **kwargs):
        raise AssertionError("json.loads ran on an answer over the limit")

    with monkeypatch.context() as patched:
        patched.setattr(json, "loads", never)
        with pytest.raises(wire.WireError, match="JSON values"):
            wire.decode(hostile)
    punctuation = ",[{" * (wire.MAX_STRING // 4)  # a string's commas and brackets are not values
    honest = {"t": "tuple", "v": [punctuation, {"t": "list", "v": [1.5] * (wire.MAX_ITEMS - 10)}]}
    text, values = wire.decode(json.dumps(honest))
    assert text == punctuation and len(values) == wire.MAX_ITEMS - 10


class _LyingLinear(torch.nn.Linear):
    """Answers for itself with lies: its load_state_dict halves what it is given, its listing hides
    the bias, its state_dict reports zeros."""

    def load_state_dict(self, state, strict=True, assign=False):
        return super().load_state_dict({k: v / 2 for k, v in state.items()}, strict=strict)

    def named_parameters(self, *args, **kwargs):
        yield "weight", self.weight

    def state_dict(self, *args, **kwargs):
        return {k: torch.zeros_like(v) for k, v in super().state_dict().items()}


def test_a_modules_tensors_are_read_and_written_as_it_holds_them_never_through_its_methods():
    """module_tensors, draw_parameters, load_tensors and read_state bypass the module's own methods
    and load hooks (issue 29, item 1); kills the mutant that calls load_state_dict or named_parameters."""
    layer = _LyingLinear(3, 2)
    layer._register_load_state_dict_pre_hook(lambda state, prefix, *a: state.update(
        {k: v * 0 for k, v in state.items()}))
    layer.register_buffer("scale", torch.ones(2), persistent=False)
    rows = probes.module_tensors(layer)
    assert [(r["name"], r["kind"], r["shape"], r["persistent"]) for r in rows] == [  # its own listing hides nothing
        ("weight", "parameter", (2, 3), True), ("bias", "parameter", (2,), True), ("scale", "buffer", (2,), False)]
    drawn = probes.draw_parameters(layer, torch.Generator().manual_seed(0))
    assert set(drawn) == {"weight", "bias"}
    assert torch.equal(layer.weight.detach(), drawn["weight"]) and torch.equal(layer.bias.detach(), drawn["bias"])
    state = probes.read_state(layer)
    assert set(state) == {"weight", "bias"} and torch.equal(state["weight"], drawn["weight"])
    probes.load_tensors(layer, {"scale": torch.full((2,), 3.0)})
    assert torch.equal(layer.scale, torch.full((2,), 3.0))
    with pytest.raises(AssertionError, match="no parameter or buffer named 'proj.weight'.*weight, bias, scale"):
        probes.load_tensors(layer, {"proj.weight": torch.zeros(2, 3)})
    with pytest.raises(AssertionError, match=r"weight has shape \(2, 3\), expected \(3, 2\)"):
        probes.load_tensors(layer, {"weight": torch.zeros(3, 2)})


def test_the_test_sets_a_modules_mode_without_its_train_or_eval():
    """set_training writes `training` on every submodule as nn.Module.train does: a train() that keeps eval mode
    (hiding a dropout) changes nothing, and a class whose `training` reads another mode fails (issue 29)."""
    class KeepsEval(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.attention = torch.nn.Dropout(0.5)
            self.shared = self.attention

        def train(self, mode=True):
            return super().train(False)

    module = KeepsEval()
    probes.set_training(module, True)
    assert all(part.training for part in module.modules())
    probes.set_training(module, False)
    assert not any(part.training for part in module.modules())

    class Stuck(torch.nn.Module):
        training = property(lambda self: False, lambda self, mode: None)

    with pytest.raises(TypeError, match="defines training itself"):
        probes.set_training(Stuck(), True)


def test_two_names_for_one_memory_fail_the_read_back():
    """Writing two parameters that share memory leaves one of them holding other values: the read-back says so."""
    module = torch.nn.Module()
    base = torch.zeros(4)
    module.a = torch.nn.Parameter(base[:3])
    module.b = torch.nn.Parameter(base[1:])
    with pytest.raises(AssertionError, match="share memory"):
        probes.load_tensors(module, {"a": torch.ones(3), "b": torch.full((3,), 2.0)})


def test_a_shared_module_is_listed_once_and_loaded_and_read_under_every_name():
    """Tied weights are honest PyTorch: both names load (the last value written wins), as load_state_dict does."""
    module = torch.nn.Module()
    module.first = module.second = torch.nn.Linear(2, 2)
    rows = probes.module_tensors(module)
    assert [(r["name"], r["aliases"]) for r in rows] == [("first.weight", ("second.weight",)),
                                                          ("first.bias", ("second.bias",))]
    probes.load_tensors(module, {"first.bias": torch.zeros(2), "second.bias": torch.ones(2)})
    assert torch.equal(module.first.bias.detach(), torch.ones(2))
    assert set(probes.read_state(module)) == set(module.state_dict())


def test_a_tensor_that_is_not_a_plain_parameter_is_not_read():
    class Odd(torch.nn.Parameter):
        pass

    module = torch.nn.Module()
    module._parameters["w"] = Odd(torch.zeros(2))
    with pytest.raises(TypeError, match="the parameter w is a Odd"):
        probes.module_tensors(module)


class _StraightThrough(torch.nn.Module):
    """Wrong values (no bias), the right gradients: y.detach() + right - right.detach()."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)

    def forward(self, x):
        right = self.linear(x)
        wrong = x @ self.linear.weight.T
        return wrong.detach() + right - right.detach()


def test_gradients_that_do_not_belong_to_the_output_are_refused():
    """parameter_gradients and input_gradients check each gradient against a finite difference of
    the same forward (issue 29, item 3): an honest module passes, in float32 and float64; a
    straight-through sum and a hook that rescales a gradient fail, naming the tensor."""
    x, direction = torch.randn(5, 4), torch.randn(5, 3)
    for dtype in (torch.float32, torch.float64):
        honest = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3)).to(dtype)
        probes.draw_parameters(honest, torch.Generator().manual_seed(1))
        gradients = probes.parameter_gradients(honest, x.to(dtype), direction.to(dtype))
        assert set(gradients) == {"0.weight", "0.bias", "2.weight", "2.bias"}
    with pytest.raises(AssertionError, match="gradient of linear.bias does not belong"):
        probes.parameter_gradients(_StraightThrough(), x, direction)
    hooked = torch.nn.Linear(4, 3)
    hooked.weight.register_hook(lambda grad: grad * 2)
    with pytest.raises(AssertionError, match="gradient of weight does not belong"):
        probes.parameter_gradients(hooked, x, direction)
    along = torch.randn(5, 4)
    assert torch.allclose(probes.input_gradients(lambda a: a.square(), (x,), along)[0], 2 * x * along)
    with pytest.raises(AssertionError, match="gradient of input 1 does not belong"):
        probes.input_gradients(lambda a: a.detach().square() + a - a.detach(), (x,), along)
    module = torch.nn.Linear(4, 3)
    before = {k: v.detach().clone() for k, v in module.state_dict().items()}
    probes.parameter_gradients(module, x, direction)
    assert all(torch.equal(before[k], v) for k, v in module.state_dict().items())  # the weights are back


def test_the_gradients_of_some_parameters_only():
    """parameter_gradients_of: the same backward pass, only the parameters under the prefixes come back, each
    still checked against finite differences of the same forward; prefixes that are not a tuple of names are
    refused."""
    x, direction = torch.randn(5, 4), torch.randn(5, 3)
    model = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU(), torch.nn.Linear(6, 3))
    probes.draw_parameters(model, torch.Generator().manual_seed(2))
    everything = probes.parameter_gradients(model, x, direction)
    some = probes.parameter_gradients_of(model, ("2.",), x, direction)
    assert set(some) == {"2.weight", "2.bias"} and all(torch.equal(some[k], everything[k]) for k in some)
    with pytest.raises(AssertionError, match="gradient of linear.bias does not belong"):
        probes.parameter_gradients_of(_StraightThrough(), ("linear.b",), x, direction)
    for prefixes in ("2.", (), ("",), ["2."], (2,)):
        with pytest.raises(TypeError, match="prefixes"):
            probes.parameter_gradients_of(model, prefixes, x, direction)


class _RightAtThePoints(torch.nn.Module):
    """Issue 50: the wrong output (no bias) with the right gradients at a call, and the right output at
    parameters a hair away from its last call (the points of a gradient check)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 3)
        self.last = None

    def forward(self, x):
        right, wrong = self.linear(x), x @ self.linear.weight.T
        now = torch.cat([p.detach().flatten() for p in self.linear.parameters()])
        if self.last is not None and 0 < float((now - self.last).abs().max()) < 1e-2:
            return right
        self.last = now
        return wrong.detach() + right - right.detach()


def test_the_output_a_gradient_came_from_lies_between_its_points():
    """The output the backward pass went through is judged beside the gradient check's points (their
    second difference): a forward that answers the points otherwise than the graded call fails; honest
    modules and functions pass in float32 and float64, at ReLU kinks too."""
    x, direction = torch.randn(5, 4), torch.randn(5, 3)
    with pytest.raises(AssertionError, match="does not lie between its outputs"):
        probes.parameter_gradients(_RightAtThePoints(), x, direction)
    for dtype in (torch.float32, torch.float64):
        for seed in range(5):
            honest = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3)).to(dtype)
            probes.draw_parameters(honest, torch.Generator().manual_seed(seed))
            probes.parameter_and_input_gradients(honest, (x.to(dtype),), direction.to(dtype))
            probes.input_gradients(lambda a: torch.softmax(a, -1) * a.relu(), (x.to(dtype),), torch.randn(5, 4).to(dtype))


def test_the_kernel_lists_loads_and_evaluates_a_module_by_its_own_tensors():
    """The kernel's probes tensors, load and outputs_at answer as data, on the module's own tensors."""
    import __main__

    __main__.oracle_test_layer = _LyingLinear(2, 2)
    try:
        handle = json.loads(server.serve(json.dumps({"op": "name", "name": "oracle_test_layer"})))["ok"]

        def ask(name, *args):
            request = {"op": "probe", "name": name, "args": [{"t": "h", "id": handle["id"]}, *args]}
            return wire.decode(json.dumps(json.loads(server.serve(json.dumps(request)))["ok"]))

        assert [row[0] for row in ask("tensors")] == ["weight", "bias"]
        values = {"weight": torch.eye(2), "bias": torch.tensor([1.0, -1.0])}
        read_back = ask("load", json.loads(wire.dumps(values)))
        assert torch.equal(read_back["weight"], torch.eye(2)) and torch.equal(__main__.oracle_test_layer.bias.detach(),
                                                                             values["bias"])
        outputs = ask("outputs_at", json.loads(wire.dumps([{"bias": torch.zeros(2)}])), json.loads(wire.dumps(torch.ones(1, 2))))
        assert torch.equal(outputs[0], torch.ones(1, 2)) and torch.equal(__main__.oracle_test_layer.bias.detach(),
                                                                         values["bias"])  # put back
    finally:
        del __main__.oracle_test_layer
