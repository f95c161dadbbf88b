"""The KServe v2 inference protocol's tensors: JSON and binary data in requests and responses. Pure functions.

A request body is JSON, or, with the binary tensor extension (what tritonclient sends), a JSON header of
`Inference-Header-Content-Length` bytes followed by the raw bytes of the inputs whose parameters carry
`binary_data_size`, in the order the inputs are listed. Outputs come back as JSON `data`, or as raw bytes after
the JSON header when the request asks for it (`binary_data` on an output, or `binary_data_output` on the whole
request). Bad input raises ProtocolError: one sentence naming the tensor, sent back as a 400.
Raw bytes are little-endian, row-major, as the protocol says (and numpy on x86 holds them).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import numpy as np

HEADER_LENGTH = "Inference-Header-Content-Length"
BINARY_CONTENT_TYPE = "application/octet-stream"

# KServe v2 datatypes and the numpy dtypes that hold them (BYTES, strings, is not served: no model here takes them).
DATATYPES = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8), "UINT16": np.dtype(np.uint16), "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8), "INT16": np.dtype(np.int16), "INT32": np.dtype(np.int32), "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16), "FP32": np.dtype(np.float32), "FP64": np.dtype(np.float64),
}
_NAMES = {dtype: name for name, dtype in DATATYPES.items()}


class ProtocolError(ValueError):
    """A request that does not follow the protocol or does not fit the model: one sentence, an HTTP 4xx."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def datatype_of(dtype: np.dtype) -> str:
    """The KServe datatype name of a numpy dtype; ProtocolError for one the protocol cannot carry."""
    try:
        return _NAMES[np.dtype(dtype)]
    except KeyError:
        raise ProtocolError(f"dtype {np.dtype(dtype)} has no KServe v2 datatype", status=500) from None


@dataclass
class InferRequest:
    """A decoded infer request: the inputs as arrays (in the request's order), the outputs asked for (empty:
    all), which of them go back as binary, and the request id to echo."""

    inputs: dict[str, np.ndarray]
    outputs: list[str] = field(default_factory=list)
    binary_outputs: set[str] = field(default_factory=set)
    binary_by_default: bool = False
    id: str | None = None


def _header_length(value: str | None, body_length: int) -> int | None:
    if value is None:
        return None
    try:
        length = int(value)
    except ValueError:
        raise ProtocolError(f"{HEADER_LENGTH} must be an integer, got {value!r}") from None
    if not 0 <= length <= body_length:
        raise ProtocolError(f"{HEADER_LENGTH} is {length} but the body has {body_length} bytes")
    return length


def _shape(tensor: dict, name: str) -> tuple[int, ...]:
    shape = tensor.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise ProtocolError(f"input {name!r}: 'shape' must be a list of non-negative integers, got {shape!r}")
    return tuple(shape)


def _from_json_data(data, dtype: np.dtype, shape: tuple[int, ...], name: str) -> np.ndarray:
    # Data may be flat or nested (row-major); either way its element count must be the shape's.
    try:
        array = np.asarray(data)
    except ValueError:
        raise ProtocolError(f"input {name!r}: 'data' is a ragged nested list") from None
    if array.dtype == object or array.dtype.kind in "USV":
        raise ProtocolError(f"input {name!r}: 'data' must hold numbers{' or booleans' if dtype.kind == 'b' else ''}")
    if dtype.kind == "b" and array.size and array.dtype.kind != "b":
        raise ProtocolError(f"input {name!r} is BOOL: 'data' must hold true/false")
    if dtype.kind in "iu" and array.size and array.dtype.kind == "f":
        raise ProtocolError(f"input {name!r} is {datatype_of(dtype)}: 'data' must hold integers")
    count = int(np.prod(shape))
    if array.size != count:
        raise ProtocolError(f"input {name!r}: shape {list(shape)} needs {count} value(s), 'data' has {array.size}")
    with np.errstate(over="ignore", invalid="ignore"):
        converted = array.astype(dtype).reshape(shape)
    if dtype.kind in "iu" and array.size and not np.array_equal(converted, array.reshape(shape)):
        raise ProtocolError(f"input {name!r}: a value in 'data' is out of the range of {datatype_of(dtype)}")
    return converted


def decode_request(body: bytes, header_length: str | None = None) -> InferRequest:
    """An infer request's body (and its Inference-Header-Content-Length header, if any) -> InferRequest.

    Checks the protocol only (JSON, known datatypes, each tensor's data length against its shape); whether the
    tensors fit the model is the model's check (models.ServedModel.check_inputs)."""
    length = _header_length(header_length, len(body))
    header, binary = (body, b"") if length is None else (body[:length], body[length:])
    try:
        request = json.loads(header)
    except (ValueError, UnicodeDecodeError) as e:
        raise ProtocolError(f"the request is not valid JSON ({e})") from None
    if not isinstance(request, dict) or not isinstance(request.get("inputs"), list):
        raise ProtocolError("the request must be a JSON object with an 'inputs' list")
    inputs: dict[str, np.ndarray] = {}
    offset = 0
    for tensor in request["inputs"]:
        if not isinstance(tensor, dict) or not isinstance(tensor.get("name"), str):
            raise ProtocolError("each entry of 'inputs' must be an object with a 'name'")
        name = tensor["name"]
        if name in inputs:
            raise ProtocolError(f"input {name!r} is given twice")
        datatype = tensor.get("datatype")
        if datatype not in DATATYPES:
            raise ProtocolError(f"input {name!r}: datatype {datatype!r} is not served; use one of "
                                f"{', '.join(DATATYPES)}")
        dtype, shape = DATATYPES[datatype], _shape(tensor, name)
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is None:
            if "data" not in tensor:
                raise ProtocolError(f"input {name!r} has neither 'data' nor a binary_data_size parameter")
            inputs[name] = _from_json_data(tensor["data"], dtype, shape, name)
            continue
        if not isinstance(size, int) or size < 0:
            raise ProtocolError(f"input {name!r}: binary_data_size must be a non-negative integer, got {size!r}")
        expected = int(np.prod(shape)) * dtype.itemsize
        if size != expected:
            raise ProtocolError(f"input {name!r}: shape {list(shape)} of {datatype} is {expected} bytes, "
                                f"binary_data_size says {size}")
        if offset + size > len(binary):
            raise ProtocolError(f"input {name!r}: the body ends {offset + size - len(binary)} byte(s) before its "
                                "binary data does")
        inputs[name] = np.frombuffer(binary, dtype=dtype, count=int(np.prod(shape)), offset=offset).reshape(shape)
        offset += size
    if offset != len(binary):
        raise ProtocolError(f"the body has {len(binary) - offset} byte(s) of binary data that no input claims")
    return _with_outputs(request, inputs)


def _with_outputs(request: dict, inputs: dict[str, np.ndarray]) -> InferRequest:
    parameters = request.get("parameters") or {}
    decoded = InferRequest(inputs, binary_by_default=bool(parameters.get("binary_data_output", False)),
                           id=request.get("id") if isinstance(request.get("id"), str) else None)
    for output in request.get("outputs") or []:
        if not isinstance(output, dict) or not isinstance(output.get("name"), str):
            raise ProtocolError("each entry of 'outputs' must be an object with a 'name'")
        decoded.outputs.append(output["name"])
        binary = (output.get("parameters") or {}).get("binary_data")
        if binary if binary is not None else decoded.binary_by_default:
            decoded.binary_outputs.add(output["name"])
    return decoded


def encode_response(model: str, version: str, request: InferRequest,
                    outputs: dict[str, np.ndarray]) -> tuple[bytes, dict[str, str]]:
    """The response body for `outputs` (those the request asked for, in its order; all when it named none) and
    the headers to send with it: JSON alone, or a JSON header then the binary outputs' raw bytes."""
    names = request.outputs or list(outputs)
    binary_names = request.binary_outputs if request.outputs else (set(outputs) if request.binary_by_default else set())
    entries, chunks = [], []
    for name in names:
        array = np.ascontiguousarray(outputs[name])
        entry = {"name": name, "datatype": datatype_of(array.dtype), "shape": list(array.shape)}
        if name in binary_names:
            raw = array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = array.reshape(-1).tolist()
        entries.append(entry)
    response = {"model_name": model, "model_version": version, "outputs": entries}
    if request.id is not None:
        response["id"] = request.id
    header = json.dumps(response, separators=(",", ":")).encode()
    if not chunks:
        return header, {"Content-Type": "application/json"}
    return header + b"".join(chunks), {"Content-Type": BINARY_CONTENT_TYPE, HEADER_LENGTH: str(len(header))}
