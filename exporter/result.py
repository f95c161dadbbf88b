"""What an export produced: the file, how it was made, its inputs/outputs and the checks it passed."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import onnx
from onnx import helper


@dataclass
class ExportResult:
    """The outcome of export().

    `kind` says what the source was ("zoo", "factory", "torchscript", "torch.export",
    "pickled module"); `exporter` which exporter wrote the file ("dynamo", "torchscript").
    `inputs` / `outputs` are {name, shape (ints, dim names for dynamic axes), dtype} as the ONNX
    file declares them. `baked_args` are forward's int/float/bool arguments fixed in the graph. `report` has one row per output per check ("example", "resized"):
    output, check, max_abs, max_rel, tolerance, atol, rtol, passed, problem.
    """

    path: str
    kind: str
    exporter: str
    opset: int
    inputs: list[dict]
    outputs: list[dict]
    report: list[dict] = field(default_factory=list)
    baked_args: dict = field(default_factory=dict)  # forward's non-tensor arguments fixed by --arg
    verified: bool = True  # False: written unchecked (--no-verify), `report` is empty

    @property
    def passed(self) -> bool:
        """Verified, and every check passed."""
        return self.verified and all(row["passed"] for row in self.report)

    def to_dict(self) -> dict:
        """Plain JSON-ready data; non-finite numbers become None (JSON has no inf or NaN)."""
        data = asdict(self)
        data["report"] = [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
                          for row in data["report"]]
        return data


def describe_values(path: str | Path) -> tuple[list[dict], list[dict]]:
    """The ONNX file's graph inputs and outputs as {name, shape, dtype} (shape entries are ints,
    dim names, or None when unknown)."""
    graph = onnx.load(str(path), load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}

    def info(value) -> dict:
        tensor = value.type.tensor_type
        shape = [d.dim_param if d.HasField("dim_param") else (d.dim_value if d.HasField("dim_value") else None)
                 for d in tensor.shape.dim]
        return {"name": value.name, "shape": shape, "dtype": helper.tensor_dtype_to_np_dtype(tensor.elem_type).name}

    return [info(v) for v in graph.input if v.name not in initializers], [info(v) for v in graph.output]
