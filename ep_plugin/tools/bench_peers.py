"""The runtimes `optim bench --vs` times OptimEP against: ONNX Runtime's CPU EP (all graph optimizations, or
none) and OpenVINO's CPU plugin. OpenVINO runs float math in bfloat16 by default on CPUs with AVX512-BF16 or
AMX; `openvino` pins it to f32 (what OptimEP computes), `openvino-bf16` asks for bf16 and is refused where
OpenVINO would not use it. A peer that cannot load or run the model becomes one line in the report, and the
benchmark goes on without it."""

from __future__ import annotations

import onnxruntime as ort

from ..ort_errors import ort_error_message
from ..sessions import cpu_session
from ..timing import DropSession

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


class Peer:
    """One --vs runtime, opened on `model`. Its errors, loading or running, are raised as PeerFailed
    (`failure` keeps the one from run()); `description` says what runs (versions, settings)."""

    def __init__(self, name: str, model: str, threads: int | None, config: dict[str, str]):
        self.name = name
        self.failure: PeerFailed | None = None
        if name in _OPENVINO_PRECISION and not openvino_available():
            raise PeerFailed(f"--vs {name} skipped: the openvino package is not installed (pip install 'optim[openvino]')")
        try:
            if name in _OPENVINO_PRECISION:
                precision = _OPENVINO_PRECISION[name]
                self._runner = OpenVinoRunner(model, threads, precision)
                self.description = f"OpenVINO {self._runner.version} CPU plugin, inference precision {precision}"
            else:
                opt = "all" if name == "cpu" else "disable"
                self._runner = cpu_session(model, threads=threads, optimization=opt, config=config)
                self.description = (f"ONNX Runtime {ort.__version__} CPU EP, graph optimizations "
                                    + ("all" if opt == "all" else "off"))
        except Exception as e:
            raise PeerFailed(f"--vs {name} could not load the model: {_message(e)}") from None

    def run(self, outputs, feeds):
        try:
            return self._runner.run(outputs, feeds)
        except Exception as e:
            self.failure = PeerFailed(f"--vs {self.name} failed to run the model: {_message(e)}")
            raise self.failure from None


def _message(e: Exception) -> str:
    """One line: OpenVINO's errors start with lines of source locations and end with the cause."""
    text = str(e).strip()
    if text.startswith("Exception from src/"):
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else type(e).__name__
    return ort_error_message(e)


__all__ = ["PEERS", "OpenVinoRunner", "Peer", "PeerFailed", "openvino_available"]
