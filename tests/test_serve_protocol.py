"""optim.serve.protocol: KServe v2 tensors in JSON and in the binary extension, both ways, and every malformed
request refused with a sentence naming the tensor. Also optim.serve.batching's concatenate / split / groups."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from optim.serve.batching import concatenate, group_key, run_groups, split
from optim.serve.protocol import HEADER_LENGTH, DATATYPES, InferRequest, ProtocolError, decode_request, encode_response


def binary_body(header: dict, *arrays: np.ndarray) -> tuple[bytes, str]:
    """A binary-extension body as tritonclient builds it: JSON header then the raw arrays."""
    head = json.dumps(header).encode()
    return head + b"".join(a.tobytes() for a in arrays), str(len(head))


@pytest.mark.parametrize("datatype", sorted(DATATYPES))
def test_json_and_binary_inputs_decode_to_the_same_array(datatype):
    dtype = DATATYPES[datatype]
    array = (np.arange(6) % 2 == 1) if dtype.kind == "b" else np.arange(6).astype(dtype)
    array = array.reshape(2, 3)
    from_json = decode_request(json.dumps({"inputs": [{"name": "x", "datatype": datatype, "shape": [2, 3],
                                                       "data": array.tolist()}]}).encode())
    body, length = binary_body({"inputs": [{"name": "x", "datatype": datatype, "shape": [2, 3],
                                            "parameters": {"binary_data_size": array.nbytes}}]}, array)
    from_binary = decode_request(body, length)
    for got in (from_json.inputs["x"], from_binary.inputs["x"]):
        assert got.dtype == dtype and got.shape == (2, 3)
        np.testing.assert_array_equal(got, array)


def test_binary_inputs_are_cut_in_order_and_outputs_requested():
    a, b = np.arange(4, dtype=np.float32), np.arange(3, dtype=np.int64)
    body, length = binary_body({"id": "r1", "inputs": [
        {"name": "a", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}},
        {"name": "b", "datatype": "INT64", "shape": [1, 3], "parameters": {"binary_data_size": 24}}],
        "outputs": [{"name": "y", "parameters": {"binary_data": True}}, {"name": "z"}]}, a, b)
    request = decode_request(body, length)
    np.testing.assert_array_equal(request.inputs["a"], a)
    np.testing.assert_array_equal(request.inputs["b"], b.reshape(1, 3))
    assert (request.outputs, request.binary_outputs, request.id) == (["y", "z"], {"y"}, "r1")


def test_response_json_and_binary_outputs():
    y, z = np.arange(6, dtype=np.float32).reshape(2, 3), np.array([[1], [2]], dtype=np.int64)
    request = InferRequest({}, outputs=["z", "y"], binary_outputs={"y"}, id="7")
    body, headers = encode_response("m", "1", request, {"y": y, "z": z})
    length = int(headers[HEADER_LENGTH])
    header = json.loads(body[:length])
    assert header["id"] == "7" and header["model_name"] == "m"
    assert [o["name"] for o in header["outputs"]] == ["z", "y"]  # the request's order
    assert header["outputs"][0] == {"name": "z", "datatype": "INT64", "shape": [2, 1], "data": [1, 2]}
    assert header["outputs"][1]["parameters"]["binary_data_size"] == y.nbytes
    np.testing.assert_array_equal(np.frombuffer(body[length:], np.float32).reshape(2, 3), y)
    # No outputs named: all of them, JSON unless binary_data_output asks otherwise.
    body, headers = encode_response("m", "1", InferRequest({}), {"y": y})
    assert HEADER_LENGTH not in headers and json.loads(body)["outputs"][0]["data"] == y.ravel().tolist()
    body, headers = encode_response("m", "1", InferRequest({}, binary_by_default=True), {"y": y})
    assert int(headers[HEADER_LENGTH]) < len(body)


def _tensor(**fields):
    return {"name": "x", "datatype": "FP32", "shape": [2], "data": [1.0, 2.0], **fields}


@pytest.mark.parametrize("body, header, message", [
    (b"{not json", None, "not valid JSON"),
    (b"[1, 2]", None, "'inputs' list"),
    (json.dumps({"inputs": [_tensor(datatype="FP8")]}).encode(), None, "datatype 'FP8' is not served"),
    (json.dumps({"inputs": [_tensor(datatype="BYTES")]}).encode(), None, "datatype 'BYTES' is not served"),
    (json.dumps({"inputs": [_tensor(shape=[3])]}).encode(), None, "input 'x': shape [3] needs 3 value(s), 'data' has 2"),
    (json.dumps({"inputs": [_tensor(shape=[-1])]}).encode(), None, "non-negative integers"),
    (json.dumps({"inputs": [_tensor(data=[[1.0], [2.0, 3.0]])]}).encode(), None, "ragged"),
    (json.dumps({"inputs": [_tensor(data=["a", "b"])]}).encode(), None, "must hold numbers"),
    (json.dumps({"inputs": [_tensor(datatype="INT8", data=[1, 300])]}).encode(), None, "out of the range of INT8"),
    (json.dumps({"inputs": [_tensor(datatype="INT32", data=[1.5, 2])]}).encode(), None, "must hold integers"),
    (json.dumps({"inputs": [_tensor(), _tensor()]}).encode(), None, "given twice"),
    (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2]}]}).encode(), None, "neither 'data'"),
    (json.dumps({"inputs": [_tensor()]}).encode(), "x", "must be an integer"),
    (json.dumps({"inputs": [_tensor()]}).encode(), "100000", "but the body has"),
])
def test_malformed_requests_name_what_is_wrong(body, header, message):
    with pytest.raises(ProtocolError, match=re.escape(message)) as caught:
        decode_request(body, header)
    assert caught.value.status == 400


def test_binary_sizes_must_match_shape_and_body():
    x = np.zeros(4, np.float32)
    header = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 12}}]}
    with pytest.raises(ProtocolError, match=r"shape \[4\] of FP32 is 16 bytes, binary_data_size says 12"):
        decode_request(*binary_body(header, x))
    header["inputs"][0]["parameters"]["binary_data_size"] = 16
    with pytest.raises(ProtocolError, match="ends 8 byte"):
        decode_request(*binary_body(header, x[:2]))
    with pytest.raises(ProtocolError, match="4 byte.* that no input claims"):
        decode_request(*binary_body(header, x, x[:1]))


def test_batches_concatenate_and_split_back():
    requests = [{"x": np.full((n, 3), n, np.float32)} for n in (1, 2, 3)]
    batch = concatenate(requests)
    assert batch["x"].shape == (6, 3)
    for request, piece in zip(requests, split({"y": batch["x"] * 2}, [1, 2, 3])):
        np.testing.assert_array_equal(piece["y"], request["x"] * 2)
    with pytest.raises(ValueError, match="not 6 rows"):
        split({"y": np.zeros((5, 3))}, [1, 2, 3])


def test_groups_run_by_shape_and_failures_stay_in_their_group():
    calls = []

    def run(inputs):
        calls.append(inputs["x"].shape)
        if inputs["x"].shape[1] == 5:
            raise RuntimeError("bad group")
        return {"y": inputs["x"] + 1}

    requests = [{"x": np.zeros((1, 3), np.float32)}, {"x": np.zeros((2, 5), np.float32)},
                {"x": np.ones((2, 3), np.float32)}]
    assert group_key(requests[0]) == group_key(requests[2]) != group_key(requests[1])
    results = run_groups(run, requests, batch_axis=True)
    assert calls == [(3, 3), (2, 5)]
    np.testing.assert_array_equal(results[0]["y"], np.ones((1, 3)))
    np.testing.assert_array_equal(results[2]["y"], np.full((2, 3), 2))
    assert isinstance(results[1], RuntimeError)
    calls.clear()
    run_groups(run, [requests[0], requests[2]], batch_axis=False)
    assert calls == [(1, 3), (2, 3)]  # no batch axis: one at a time
