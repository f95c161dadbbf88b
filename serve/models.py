"""Models to serve: ONNX files (or a model-repository folder) loaded into OptimEP sessions, their KServe metadata,
the check of a request's tensors against them, and whether they have a batch axis.

A model has a batch axis when dim 0 is symbolic in every input and every output: requests for it can then be
concatenated along dim 0, run once and split back (batching.py). A request's tensors must match the model's inputs
by name, datatype and rank, fixed dims equal, one size per symbolic dim name across the inputs (ProtocolError).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from optim.common.errors import UserError

from .protocol import DATATYPES, InferRequest, ProtocolError, datatype_of, decode_request, encode_response

VERSION = "1"  # the version a single file is served as (a repository folder names its own)
PLATFORM = "onnxruntime_onnx"  # as Triton names ONNX models; clients read it from the model metadata

# ONNX Runtime's type strings -> KServe datatypes (types with none, e.g. strings, are refused when loading).
_ORT_TYPES = {"tensor(bool)": "BOOL", "tensor(float16)": "FP16", "tensor(float)": "FP32", "tensor(double)": "FP64",
              **{f"tensor({t})": t.upper() for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                                                      "uint64")}}


class ModelLoadError(UserError):
    """A model path that cannot be served (missing, not ONNX, a type the protocol has no datatype for, a clash)."""


@dataclass(frozen=True)
class TensorSpec:
    """One input or output: name, KServe datatype, shape with a str (its dim name) or None for symbolic dims."""

    name: str
    datatype: str
    shape: tuple

    @property
    def dtype(self) -> np.dtype:
        return DATATYPES[self.datatype]

    def metadata(self) -> dict:
        return {"name": self.name, "datatype": self.datatype,
                "shape": [d if isinstance(d, int) else -1 for d in self.shape]}

    def expected(self) -> str:
        """'FP32 [-1, 3, 224, 224]' (with dim names: [batch, 3, 224, 224]), for error messages."""
        return f"{self.datatype} [{', '.join(str(d) if d is not None else '?' for d in self.shape)}]"


def _spec(arg) -> TensorSpec:
    if arg.type not in _ORT_TYPES:
        raise ModelLoadError(f"tensor {arg.name!r} has type {arg.type}, which the KServe protocol here does not carry")
    shape = tuple(d if isinstance(d, int) and d >= 0 else (d if isinstance(d, str) else None) for d in arg.shape)
    return TensorSpec(arg.name, _ORT_TYPES[arg.type], shape)


class ServedModel:
    """A model loaded into one OptimEP session (ORT's CPU EP runs what OptimEP leaves). `run` is thread-safe
    (ONNX Runtime's run is), and blocks: call it from a worker thread, not the event loop. language_model: a causal
    LM's CausalLM (its cache kept in place), which `session` (its file_form) shares for the file's interface."""

    def __init__(self, name: str, path: Path, session, version: str = VERSION, language_model=None):
        self.name, self.path, self.session, self.version = name, path, session, version
        self.language_model = language_model
        self.inputs = [_spec(i) for i in session.get_inputs()]
        self.outputs = [_spec(o) for o in session.get_outputs()]
        self._output_names = [o.name for o in self.outputs]
        # Dim 0 symbolic in every input and output: requests can be concatenated along it.
        self.batch_axis = all(t.shape and not isinstance(t.shape[0], int) for t in self.inputs + self.outputs)

    def metadata(self) -> dict:
        return {"name": self.name, "versions": [self.version], "platform": PLATFORM,
                "inputs": [t.metadata() for t in self.inputs], "outputs": [t.metadata() for t in self.outputs]}

    def check_inputs(self, inputs: dict[str, np.ndarray]) -> None:
        """ProtocolError (400) naming the tensor and what the model expects when `inputs` do not fit."""
        given, wanted = set(inputs), {t.name for t in self.inputs}
        if wanted - given:
            missing = [t for t in self.inputs if t.name not in given]
            raise ProtocolError(f"model {self.name!r} needs input(s) " + ", ".join(f"{t.name!r} ({t.expected()})"
                                                                                 for t in missing))
        if given - wanted:
            raise ProtocolError(f"model {self.name!r} has no input(s) {', '.join(map(repr, sorted(given - wanted)))}; "
                                f"its inputs are {', '.join(t.name for t in self.inputs)}")
        batch = self.batch_axis
        sizes: dict[str, tuple[int, str]] = {}  # symbolic dim name -> (size, the input that set it)
        for spec in self.inputs:
            array = inputs[spec.name]
            if array.dtype != spec.dtype:
                raise ProtocolError(f"input {spec.name!r} of model {self.name!r} is {spec.expected()}, "
                                    f"the request gave {datatype_of(array.dtype)}")
            fixed_differs = any(isinstance(d, int) and d != n for d, n in zip(spec.shape, array.shape))
            if len(array.shape) != len(spec.shape) or fixed_differs:
                raise ProtocolError(f"input {spec.name!r} of model {self.name!r} is {spec.expected()}, "
                                    f"the request gave shape {list(array.shape)}")
            for axis, (dim, n) in enumerate(zip(spec.shape, array.shape)):
                if axis == 0 and batch:
                    key = "batch size (dim 0)"
                elif isinstance(dim, str):
                    key = f"dim {dim!r}"
                else:
                    continue
                if key in sizes and sizes[key][0] != n:
                    raise ProtocolError(f"input {spec.name!r} of model {self.name!r} has {key} {n} but input "
                                        f"{sizes[key][1]!r} has {sizes[key][0]}: they must agree")
                sizes.setdefault(key, (n, spec.name))

    def check_outputs(self, names: list[str]) -> None:
        unknown = [n for n in names if n not in self._output_names]
        if unknown:
            raise ProtocolError(f"model {self.name!r} has no output(s) {', '.join(map(repr, unknown))}; its outputs "
                                f"are {', '.join(self._output_names)}")

    def parse(self, body: bytes, header_length: str | None = None) -> InferRequest:
        """An infer request's body decoded and checked against this model (ProtocolError: 400)."""
        request = decode_request(body, header_length)
        self.check_inputs(request.inputs)
        self.check_outputs(request.outputs)
        return request

    def respond(self, request: InferRequest, outputs: dict[str, np.ndarray]) -> tuple[bytes, dict[str, str]]:
        """The response body and headers for `request`'s outputs."""
        return encode_response(self.name, self.version, request, outputs)

    def failure(self, error: Exception) -> str:
        """The sentence a client gets when running this model raised `error` (ONNX Runtime's message, cut down)."""
        from optim.ep_plugin.ort_errors import ort_error_message

        return f"model {self.name!r} failed: {ort_error_message(error)}"

    def run(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """All outputs by name for inputs that passed check_inputs (blocking)."""
        return dict(zip(self._output_names, self.session.run(self._output_names, inputs)))


def load(path: str | Path, name: str | None = None, version: str = VERSION, threads: int | None = None,
         **ep_options) -> ServedModel:
    """One ONNX file as a ServedModel named `name` (default: the file's stem); ModelLoadError when it cannot be."""
    import optim

    path = Path(path)
    if not path.is_file():
        raise ModelLoadError(f"{path} is not a file: give an ONNX model or a model-repository folder")
    language_model = None
    try:
        if is_causal_lm(path):  # one session for /v1 generation (cache in place) and /v2 (the file's interface)
            from optim.llm import CausalLM

            language_model = CausalLM(path, threads=threads, **ep_options)
            session = language_model.file_form()
        else:
            session = optim.session(path, threads=threads, **ep_options)
    except Exception as e:  # noqa: BLE001 - whatever ONNX Runtime says, the user gets one sentence
        from optim.ep_plugin.ort_errors import ort_error_message

        raise ModelLoadError(f"{path} cannot be loaded: {ort_error_message(e)}") from None
    return ServedModel(name or path.stem, path, session, version, language_model)


def is_causal_lm(path: str | Path) -> bool:
    """Whether ONNX file `path` was exported as a causal LM (its metadata says so)."""
    from optim.llm import read_info

    try:
        read_info(path)
    except UserError:
        return False
    return True


def model_files(paths: list[str | Path]) -> dict[str, tuple[Path, str]]:
    """Model name -> (ONNX file, version) for `paths`: ONNX files, named by their stem, or repository folders
    holding NAME.onnx files or Triton's layout NAME/VERSION/model.onnx (the highest numeric version served)."""
    found: dict[str, tuple[Path, str]] = {}

    def add(name: str, file: Path, version: str) -> None:
        if name in found:
            raise ModelLoadError(f"two models are named {name!r} ({found[name][0]} and {file}): rename one")
        found[name] = (file, version)

    for path in map(Path, paths):
        if path.is_file():
            add(path.stem, path, VERSION)
        elif path.is_dir():
            before = len(found)
            for entry in sorted(path.iterdir()):
                if entry.is_file() and entry.suffix == ".onnx":
                    add(entry.stem, entry, VERSION)
                elif entry.is_dir():
                    versions = [v for v in entry.iterdir() if re.fullmatch(r"\d+", v.name) and (v / "model.onnx").is_file()]
                    if versions:
                        newest = max(versions, key=lambda v: int(v.name))
                        add(entry.name, newest / "model.onnx", newest.name)
            if len(found) == before:
                raise ModelLoadError(f"{path} holds no models: expected NAME.onnx files or NAME/1/model.onnx folders")
        else:
            raise ModelLoadError(f"{path} does not exist: give an ONNX model or a model-repository folder")
    if not found:
        raise ModelLoadError("no model given: name an ONNX file or a model-repository folder")
    return found


def load_all(paths: list[str | Path], threads: int | None = None, **ep_options) -> dict[str, ServedModel]:
    """Every model `paths` name (model_files), loaded."""
    return {name: load(file, name, version, threads=threads, **ep_options)
            for name, (file, version) in model_files(paths).items()}
