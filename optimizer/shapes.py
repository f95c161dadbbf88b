"""Types and shapes of every value, inferred by ONNX's shape inference for the passes to consult."""

from __future__ import annotations

import onnx

from .graph import ValueInfos

# Shape inference reads initializer values only to propagate small shape tensors; large weights
# are stripped from the copy it sees, which makes inference on a 90 MB model four times faster.
_KEEP_DATA_BYTES = 4096


def infer_value_infos(model: onnx.ModelProto) -> ValueInfos:
    """ValueInfos by name for the main graph's values (inputs, outputs, intermediates, initializers).

    Inference failures (unknown ops, models shape inference cannot follow) leave the values
    unknown; passes that need a shape then refuse with a reason.
    """
    skeleton = onnx.ModelProto()
    skeleton.CopyFrom(model)
    for init in skeleton.graph.initializer:
        if init.ByteSize() > _KEEP_DATA_BYTES:
            for field in ("raw_data", "float_data", "int32_data", "int64_data", "double_data", "uint64_data", "external_data"):
                init.ClearField(field)
            init.data_location = onnx.TensorProto.DEFAULT
    try:
        inferred = onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
    except Exception:  # noqa: BLE001 - any inference failure only means "shapes unknown"
        inferred = skeleton
    graph = inferred.graph
    infos: ValueInfos = {}
    for value in [*graph.value_info, *graph.input, *graph.output]:
        infos[value.name] = value
    return infos
