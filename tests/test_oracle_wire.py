"""The oracle's wire format (course/oracle.py): what the grader accepts from a kernel.

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

from course import oracle as wire


def roundtrip(value, handle=None):
    return wire.decode(wire.dumps(value, handle))


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
        answer = json.loads(wire.serve(json.dumps({"op": "name", "name": "oracle_test_layer"})))
        handle = answer["ok"]
        assert handle["t"] == "h" and handle["type"][0] == "torch.nn.modules.linear.Linear"
        x = json.loads(wire.dumps(torch.ones(4, 3)))
        out = json.loads(wire.serve(json.dumps({"op": "call", "h": handle["id"], "args": [x], "kwargs": {}})))
        assert wire.decode(json.dumps(out["ok"])).shape == (4, 2)
        missing = json.loads(wire.serve(json.dumps({"op": "name", "name": "no_such_name_here"})))
        assert missing["error"][0] == "NameError"
    finally:
        del __main__.oracle_test_layer


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
        layer = json.loads(wire.serve(json.dumps({"op": "name", "name": "oracle_test_layer"})))["ok"]
        named = json.loads(wire.serve(json.dumps({"op": "call", "h": layer["id"], "name": "named_parameters",
                                                   "args": [], "kwargs": {}})))
        assert named["ok"]["t"] == "iter" and "out" not in named
        items = wire.decode(json.dumps(named["ok"]))
        assert iter(items) is items
        assert [(name, tuple(p.shape)) for name, p in items] == [("weight", (2, 3)), ("bias", (2,))]
        x = json.loads(wire.dumps(torch.ones(4, 3)))
        out = json.loads(wire.serve(json.dumps({"op": "call", "h": layer["id"], "args": [x], "kwargs": {}})))
        assert wire.decode(json.dumps(out["ok"])).shape == (4, 2)
        assert out["out"].startswith("forward of (4, 3)\nxxx") and "characters cut by the grader" in out["out"]
        assert len(out["out"]) < wire.MAX_PRINTED + 100
        missing = json.loads(wire.serve(json.dumps({"op": "call", "h": layer["id"], "name": "no_such_method",
                                                     "args": [], "kwargs": {}})))
        assert missing["error"][0] == "AttributeError"
    finally:
        del __main__.oracle_test_layer
    assert wire.listen() == "no kernel"  # outside a kernel there is no shell channel to listen on


def test_an_iterator_entry_is_decoded_as_strictly_as_a_list():
    assert list(wire.decode(json.dumps({"t": "iter", "v": [1, {"t": "tuple", "v": ["a", 2.5]}]}))) == [1, ("a", 2.5)]
    for bad in ({"t": "iter", "v": 3}, {"t": "iter", "v": [], "x": 1}, {"t": "iter", "v": [{"t": "pickle"}]}):
        with pytest.raises(wire.WireError):
            wire.decode(json.dumps(bad))


def test_the_grader_sends_obj_method_call_as_one_request_and_other_reads_as_getattr():
    """``proxy.name(...)`` in a test is one "call" request; ``getattr(proxy, name)`` stays a read."""
    from instructor import oracle

    class Link:
        def __init__(self):
            self.sent = []

        def request(self, message):
            self.sent.append(message)
            return 7

        def proxy(self, entry):
            return oracle.make_proxy(self, entry)

    link = Link()
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
    """course.tracing.largest_tensor on a proxy runs the probe where the function lives; the
    grader gets the result and two numbers, checked to be numbers."""
    import __main__
    from course.tracing import largest_tensor
    from instructor import oracle

    __main__.oracle_test_outer = lambda a, b: (a[:, None] * b[None, :]).sum()
    try:
        fn = json.loads(wire.serve(json.dumps({"op": "name", "name": "oracle_test_outer"})))["ok"]
        args = [{"t": "h", "id": fn["id"]}, json.loads(wire.dumps(torch.ones(300))), json.loads(wire.dumps(torch.ones(200)))]
        answer = json.loads(wire.serve(json.dumps({"op": "probe", "name": "largest_tensor", "args": args, "kwargs": {}})))
        result, entries, shape = wire.decode(json.dumps(answer["ok"]))
        assert float(result) == 60000 and entries == 60000 and shape == (300, 200)
    finally:
        del __main__.oracle_test_outer

    class Link:
        def __init__(self, answer):
            self.answer, self.sent = answer, []

        def request(self, message):
            self.sent.append(message)
            return self.answer

    link = Link((torch.zeros(2), 12, (3, 4)))
    proxy = oracle.make_proxy(link, {"id": 5, "type": ["kernel.function"], "callable": True})
    out, largest = largest_tensor(proxy, torch.ones(2), causal=True)
    assert link.sent[0]["op"] == "probe" and link.sent[0]["name"] == "largest_tensor"
    assert link.sent[0]["kwargs"] == {"causal": True} and (largest.entries, largest.shape) == (12, (3, 4))
    link.answer = (torch.zeros(2), "small", (3, 4))
    with pytest.raises(wire.WireError, match="two numbers"):
        largest_tensor(proxy, torch.ones(2))
