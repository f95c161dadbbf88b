"""The runtimes `optim bench --vs` times OptimEP against: ONNX Runtime's CPU EP (all graph optimizations, or
none) and OpenVINO's CPU plugin. OpenVINO runs float math in bfloat16 by default on CPUs with AVX512-BF16 or
AMX; `openvino` pins it to f32 (what OptimEP computes), `openvino-bf16` asks for bf16 and is refused where
OpenVINO would not use it. Each peer runs in a child process of its own: one that cannot load or run the model, or
crashes doing so, becomes one line in the report, and the benchmark goes on without it."""

from __future__ import annotations

import onnxruntime as ort

from ..ort_errors import ort_error_message
from ..sessions import cpu_session
from ..timing import DropSession
from .child_runtime import ChildFailed, ChildRuntime

# --vs name -> its label in reports.
PEERS = {"cpu": "CPU EP", "cpu-noopt": "CPU EP no-opt", "openvino": "OpenVINO (f32)", "openvino-bf16": "OpenVINO (bf16)"}
_OPENVINO_PRECISION = {"openvino": "f32", "openvino-bf16": "bf16"}


class PeerFailed(DropSession):
    """A --vs runtime could not be used; the message is the report's one line about it. Raised from run(), it
    drops the peer from the timing."""


class OpenVinoRunner:
    """OpenVINO's CPU plugin on the same ONNX file, with an InferenceSession-like run().

    precision: OpenVINO's INFERENCE_PRECISION_HINT, the type its float math runs in ('f32' or 'bf16'); the
    compiled model's own value is checked, so a report never calls bf16 what ran in f32 (or the reverse).
    """

    def __init__(self, model: str, threads: int | None, precision: str = "f32"):
        import openvino as ov  # the optional `openvino` extra

        core = ov.Core()
        config = {"INFERENCE_PRECISION_HINT": precision}
        if threads:
            config["INFERENCE_NUM_THREADS"] = threads
        self._compiled = core.compile_model(core.read_model(model), "CPU", config)
        used = self._compiled.get_property("INFERENCE_PRECISION_HINT").to_string()
        if used != precision:
            raise RuntimeError(f"OpenVINO would run in {used}, not {precision}, on this CPU")
        self.version = ov.__version__.split("-")[0]

    def run(self, _outputs, feeds):
        return list(self._compiled(feeds).values())


def openvino_available() -> bool:
    try:
        import openvino  # noqa: F401
    except ImportError:
        return False
    return True


class _OneLineErrors:
    """A runner whose errors come out as one line (_message): what crosses to the parent."""

    def __init__(self, runner):
        self._runner = runner

    def run(self, outputs, feeds):
        try:
            return self._runner.run(outputs, feeds)
        except Exception as e:  # noqa: BLE001
            raise RuntimeError(_message(e)) from None


def _open(name: str, model: str, threads: int | None, config: dict[str, str], openvino_runner=None):
    """(runner, description) of the --vs runtime `name` on `model`: run in the peer's child process. openvino_runner:
    the class that runs OpenVINO (OpenVinoRunner; the parent passes its own, which a test may have replaced)."""
    try:
        if name in _OPENVINO_PRECISION:
            precision = _OPENVINO_PRECISION[name]
            runner = (openvino_runner or OpenVinoRunner)(model, threads, precision)
            return _OneLineErrors(runner), f"OpenVINO {runner.version} CPU plugin, inference precision {precision}"
        opt = "all" if name == "cpu" else "disable"
        runner = cpu_session(model, threads=threads, optimization=opt, config=config)
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(_message(e)) from None
    return (_OneLineErrors(runner),
            f"ONNX Runtime {ort.__version__} CPU EP, graph optimizations " + ("all" if opt == "all" else "off"))


class Peer:
    """One --vs runtime, opened on `model` in a child process of its own (child_runtime.py): a runtime that crashes,
    loading or running, costs only its child. Its errors and crashes are raised as PeerFailed (`failure` keeps the
    one from run()); `description` says what runs (versions, settings). run() times itself in the child
    (`last_seconds`, which time_alternating counts instead of the pipe's round trip) and returns the outputs of the
    first run of each set of inputs (later runs of the same feeds give the same outputs back without moving them)."""

    def __init__(self, name: str, model: str, threads: int | None, config: dict[str, str]):
        self.name = name
        self.failure: PeerFailed | None = None
        self.last_seconds: float | None = None
        self._outputs = (None, None)  # (feeds, outputs) of the last first run
        if name in _OPENVINO_PRECISION and not openvino_available():
            raise PeerFailed(f"--vs {name} skipped: the openvino package is not installed (pip install 'optim[openvino]')")
        try:
            self._child = ChildRuntime(_open, name, model, threads, config, OpenVinoRunner)
        except ChildFailed as e:
            what = f"{e} loading the model" if e.crashed else f"could not load the model: {e}"
            raise PeerFailed(f"--vs {name} {what}") from None
        self.description = self._child.description

    def run(self, outputs, feeds):
        first = self._outputs[0] is not feeds
        try:
            self.last_seconds, out = self._child.run(feeds, outputs=first)
        except ChildFailed as e:
            what = f"{e} on this model" if e.crashed else f"failed to run the model: {e}"
            self.failure = PeerFailed(f"--vs {self.name} {what}")
            raise self.failure from None
        if first:
            self._outputs = (feeds, out)
        return self._outputs[1]

    def close(self) -> None:
        self._child.close()


def _message(e: Exception) -> str:
    """One line: OpenVINO's errors start with lines of source locations and end with the cause."""
    text = str(e).strip()
    if text.startswith("Exception from src/"):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else type(e).__name__
    return ort_error_message(e)


__all__ = ["PEERS", "OpenVinoRunner", "Peer", "PeerFailed", "openvino_available"]
