"""Single convolutions (Conv + bias + Relu) on OptimEP, for every ISA this machine runs, vs ONNX Runtime's CPU EP.

    .venv/bin/python benchmarks/conv.py [--layers stem,dw5x5] [--isas avx2,amx] [--weight-bits 8] [--budget 3]
        [--runs 50] [--min-runs 5] [--threads 2] [--no-markdown]

The shapes are the ones real-size CNNs spend their time in (ResNet, MobileNet, EfficientNet, ResNeXt),
batch 1. Each layer is a float ONNX model (Conv with bias, then Relu; He-scaled random weights) and its
int8 QDQ version made by optim's quantizer (`optim.optimizer.quantization.quantize`, calibrated on 4
random inputs: uint8 activations, int8 per-channel weights of --weight-bits bits, the Relu folded into the
unit), which OptimEP runs as one integer QConv. Every ISA OptimEP can be forced to here (`isa` EP option:
scalar, avx2, avxvnni, avx512, avx512vnni, amx; --isas picks some) and the CPU EP alternate runs within
`--budget` seconds per layer and precision. Throughput counts 2 x multiply-adds per run (benchmarks/flops.py),
against the measured peak that runtime's kernels can reach (benchmarks/peak.py). Rewrites the conv-layers table
in BENCHMARKS.md (7-bit weights: a table of its own).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # numpy's BLAS threads would spin on the cores being timed

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from flops import count_macs  # noqa: E402
from optim.common.machine import core_count, cpu_summary  # noqa: E402
from optim.ep_plugin import ISAS, cpu_session, placement, session  # noqa: E402  ISAS: `isa` values, worst first
from optim.ep_plugin.timing import NO_SPIN  # noqa: E402
from optim.ep_plugin.tools.doctor import isa_supported  # noqa: E402
from peak import measure as measure_peak  # noqa: E402
from run import HERE, _replace_between  # noqa: E402
import options  # noqa: E402
import timing  # noqa: E402

MARKERS = ("<!-- conv-layers:begin -->", "<!-- conv-layers:end -->")
CALIBRATION_BATCHES = 4


@dataclass(frozen=True)
class Layer:
    key: str  # for --layers
    where: str  # which networks have it
    c_in: int
    c_out: int
    size: int  # input height = width
    kernel: int
    stride: int = 1
    groups: int = 1

    @property
    def pad(self) -> int:
        return self.kernel // 2  # "same" padding at stride 1, as all these layers use

    def describe(self) -> str:
        kind = ("depthwise " if self.groups == self.c_in == self.c_out else
                f"{self.groups} groups, " if self.groups > 1 else "")
        return (f"{kind}{self.c_in}->{self.c_out}, {self.size}x{self.size}, {self.kernel}x{self.kernel}"
                f"{f' stride {self.stride}' if self.stride > 1 else ''}, pad {self.pad}")


LAYERS = [
    Layer("stem", "ResNet stem", 3, 64, 224, 7, stride=2),
    Layer("res3x3", "ResNet stage 1", 64, 64, 56, 3),
    Layer("res3x3_14", "ResNet stage 3", 256, 256, 14, 3),
    Layer("res3x3_7", "ResNet stage 4", 512, 512, 7, 3),
    Layer("down3x3", "ResNet-18 downsampling", 64, 128, 56, 3, stride=2),
    Layer("pw64", "pointwise", 64, 64, 56, 1),
    Layer("pw256to64", "ResNet-50 bottleneck reduce", 256, 64, 56, 1),
    Layer("dw3x3", "MobileNetV2 depthwise", 96, 96, 56, 3, groups=96),
    Layer("dw5x5", "MobileNetV3-small depthwise", 576, 576, 7, 5, groups=576),
    Layer("dw3x3s2", "MobileNetV2 / EfficientNet depthwise, strided", 144, 144, 56, 3, stride=2, groups=144),
    Layer("grouped", "ResNeXt grouped", 128, 128, 28, 3, groups=32),
]


def conv_model(layer: Layer) -> onnx.ModelProto:
    """Conv (with bias) then Relu on a 1 x c_in x size x size input."""
    rng = np.random.default_rng(0)
    fan_in = layer.c_in // layer.groups * layer.kernel ** 2
    w = (rng.standard_normal((layer.c_out, layer.c_in // layer.groups, layer.kernel, layer.kernel))
         * np.sqrt(2.0 / fan_in)).astype(np.float32)
    b = (0.1 * rng.standard_normal(layer.c_out)).astype(np.float32)
    out = (layer.size + 2 * layer.pad - layer.kernel) // layer.stride + 1
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[layer.kernel] * 2, strides=[layer.stride] * 2,
                              pads=[layer.pad] * 4, group=layer.groups),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(nodes, f"conv_{layer.key}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, layer.c_in, layer.size, layer.size])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, layer.c_out, out, out])],
                              [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    onnx.checker.check_model(model)
    return model


def runnable_isas() -> list[str]:
    """The `isa` values OptimEP accepts on this machine, worst first (isa_supported keeps the refusals quiet)."""
    return [i for i in ISAS if isa_supported(i)]


def int8_model(fp32: Path, out: Path, weight_bits: int) -> Path:
    from optim.optimizer.quantization import quantize

    quantize(fp32, out, calibration_random=CALIBRATION_BATCHES, weight_bits=weight_bits)
    return out


def time_layer(path: Path, isas: list[str], feeds: dict, args, failures: list[str], label: str) -> dict:
    """Median stats per runtime ("cpu", then each ISA) for one model file, and OptimEP's integer units."""
    sessions = {"cpu": cpu_session(str(path), threads=args.threads, config=NO_SPIN)}
    units = {}
    for isa in isas:
        try:
            sessions[isa] = session(str(path), threads=args.threads, config=NO_SPIN, isa=isa)
            sessions[isa].run(None, feeds)
            units[isa] = placement(sessions[isa]).integer_units
        except Exception as e:  # noqa: BLE001 - one ISA failing must not hide the others
            failures.append(f"{label}, isa {isa}: {type(e).__name__}: {str(e).strip()}")
            sessions.pop(isa, None)
    stats, runs = timing.time_within_budget(sessions, feeds, budget_s=args.budget, min_runs=args.min_runs,
                                            max_runs=args.runs, warmup=args.warmup)
    return {"stats": stats, "runs": runs, "integer_units": units}


def _cell(stats, flop: float, peak: float, unit: str) -> str:
    if stats is None:
        return "failed"
    rate = flop / (stats.median_ms * 1e-3) / 1e9
    return f"{stats.median_ms:.3f} ms, {rate:.0f} {unit} ({rate / peak:.0%})"


def table(rows: list[dict], isas: list[str], peak, weight_bits: int) -> list[str]:
    """Each cell's share is of the peak its runtime can reach: the machine's for the CPU EP, its kernel set's
    (peak.for_isa) for each OptimEP ISA."""
    best = isas[-1]
    lines = ["| layer | shape | precision | MFLOP | CPU EP | " + " | ".join(f"OptimEP {i}" for i in isas)
             + f" | ratio CPU EP / OptimEP {best} |", "|---|---|---|---:|---:|" + "---:|" * len(isas) + "---:|"]
    for r in rows:
        layer, fp32 = r["layer"], r["precision"] == "fp32"
        unit = "GFLOP/s" if fp32 else "GOP/s"
        st = r["stats"]
        tops = {k: (p.fp32_gflops if fp32 else p.int8_gops)
                for k, p in [("cpu", peak), *[(i, peak.for_isa(i, weight_bits)) for i in isas]]}
        cells = [_cell(st.get(k), r["flop"], tops[k], unit) for k in ("cpu", *isas)]
        ratio = f"{st['cpu'].median_ms / st[best].median_ms:.2f}" if best in st else "-"
        lines.append(f"| {layer.where} | {layer.describe()} | {r['precision']} | {r['flop'] / 1e6:.0f} | "
                     + " | ".join(cells) + f" | {ratio} |")
    return lines


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", help=f"comma-separated subset of: {', '.join(la.key for la in LAYERS)} (default: all)")
    options.add_timing(ap, budget=3.0, budget_for="per layer and precision", runs=50, warmup=3)
    ap.add_argument("--isas", help="comma-separated OptimEP kernel sets to time (default: every one this CPU runs)")
    ap.add_argument("--weight-bits", type=int, default=8, choices=[8, 7],
                    help="the int8 layers' weights (7: AVX2's u8 x s8 kernels run them; own table in BENCHMARKS.md)")
    ap.add_argument("--cache", default=str(HERE / ".cache"), help="folder for the compiled peak program")
    ap.add_argument("--no-markdown", action="store_true", help="do not rewrite BENCHMARKS.md")
    args = ap.parse_args(argv)
    options.check_timing(ap, args)
    keys = options.subset(ap, args.layers, [la.key for la in LAYERS], "layer")
    args.chosen = [la for la in LAYERS if la.key in keys]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    isas = runnable_isas()
    if args.isas:
        isas = [i for i in isas if i in args.isas.split(",")]
    peak = measure_peak(Path(args.cache), args.threads)
    print(f"{cpu_summary()}: OptimEP ISAs {', '.join(isas)}; {peak.describe()}", flush=True)
    rows, failures = [], []
    with tempfile.TemporaryDirectory(prefix="optim-conv-") as tmp:
        for layer in args.chosen:
            fp32 = Path(tmp) / f"{layer.key}.onnx"
            onnx.save(conv_model(layer), str(fp32))
            feeds = {"x": np.random.default_rng(1).standard_normal((1, layer.c_in, layer.size, layer.size)).astype(np.float32)}
            flop = 2 * count_macs(onnx.load(str(fp32)), feeds).total
            for precision in ("fp32", "int8"):
                label = f"{layer.key} {precision}"
                try:
                    path = fp32 if precision == "fp32" else int8_model(fp32, Path(tmp) / f"{layer.key}.int8.onnx",
                                                                       args.weight_bits)
                    timed = time_layer(path, isas, feeds, args, failures, label)
                except Exception as e:  # noqa: BLE001 - reported, the other layers still run
                    failures.append(f"{label}: {type(e).__name__}: {str(e).strip()}")
                    print(f"{label}: FAILED ({failures[-1]})", flush=True)
                    continue
                if precision == "int8" and any(u != 1 for u in timed["integer_units"].values()):
                    failures.append(f"{label}: not one integer QConv unit on OptimEP ({timed['integer_units']})")
                rows.append({"layer": layer, "precision": precision, "flop": flop, **timed})
                best = isas[-1]
                print(f"{label}: " + ", ".join(f"{k} {v.median_ms:.3f} ms" for k, v in timed["stats"].items())
                      + (f"; {flop / (timed['stats'][best].median_ms * 1e6):.0f} G/s on {best}"
                         if best in timed["stats"] else "") + f" ({timed['runs']} runs)", flush=True)
    if not args.no_markdown:
        shown = " ".join(argv if argv is not None else sys.argv[1:])
        command = f".venv/bin/python benchmarks/conv.py {shown}".strip()
        if not shown:  # what `make bench` runs
            command = f"make bench  # = {command}"
        lines = ["", f"Command: `{command}`  ",
                 f"Machine: {cpu_summary()}, {core_count()} cores; onnxruntime {ort.__version__}; batch 1, "
                 f"{args.threads} intra-op threads (no spinning); OptimEP ISAs: {', '.join(isas)}; int8 layers with "
                 f"{args.weight_bits}-bit weights.  ",
                 f"Peaks ({peak.threads} threads, measured): " + ", ".join(f"{k} {v:.0f}" for k, v in peak.measured.items())
                 + " G(FL)OP/s. Each cell: median, throughput (% of the peak that runtime's kernels can reach: the "
                 "machine's best for the CPU EP, the ISA's own for OptimEP's: peak.py for_isa).  ",
                 f"Timing: alternating runs within {args.budget:g} s per layer and precision, {args.min_runs} to "
                 f"{args.runs} runs per runtime.", "", *table(rows, isas, peak, args.weight_bits), ""]
        lines += ["Failures: " + ("none." if not failures else ""), *[f"- {f}" for f in failures]]
        md = HERE / "BENCHMARKS.md"
        markers = MARKERS if args.weight_bits == 8 else ("<!-- conv-layers-w7:begin -->", "<!-- conv-layers-w7:end -->")
        md.write_text(_replace_between(md.read_text(), markers, lines, "Convolution layers, int8 with 7-bit weights"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
