"""export(): a PyTorch artifact to a verified ONNX file, the exporter's one public entry point."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import torch

from optim.common.comparison import DEFAULT_TOLERANCE, Tolerance
from optim.common.staging import staged_output

from .baked_args import Scalar, bake_args
from .causal_lm import export_causal_lm, is_causal_lm
from .errors import ExportError, first_line
from .examples import describe, resized_inputs
from .inputs import resolve_inputs
from .loading import describe_kind, load_model
from .outputs import flatten_outputs, output_names
from .result import ExportResult, describe_values
from .specs import InputSpec
from .stability import as_float64, float64_twin
from .to_onnx import EXPORTERS, export_onnx
from .verify import verify_onnx

log = logging.getLogger("optim.exporter")


def export(
    spec: str | os.PathLike,
    output: str | os.PathLike,
    inputs: Sequence[str | InputSpec] | None = None,
    example_inputs: str | os.PathLike | Mapping[str, np.ndarray] | None = None,
    dynamic: Sequence[str] | Mapping[str, Mapping[int, str]] | None = None,
    args: Sequence[str] | Mapping[str, Scalar] | None = None,
    opset: int = 18,
    exporter: str = "auto",
    weights: str | os.PathLike | None = None,
    trust_pickle: bool = False,
    verify: bool = True,
    tolerance: Tolerance = DEFAULT_TOLERANCE,
    verbose: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ExportResult:
    """Exports SPEC to the ONNX file `output` and checks it against PyTorch.

    SPEC: a TorchScript archive, a torch.export .pt2 archive, a zoo name (mlp, cnn, transformer, the LLMs of
    optim.models.LLM), a Hugging Face model folder (config.json + weights) or package.module:factory (+ `weights`, a
    state_dict file). A decoder-only language model (a transformers *ForCausalLM) given without inputs is exported
    with its KV cache for prefill and decode (exporter/causal_lm.py) and verified over a prefill and decode steps. A fully pickled nn.Module loads
    only with trust_pickle=True (unpickling runs code from the file).
    `inputs`: "NAME:DIMS[:DTYPE]" strings (a named dim is dynamic) or InputSpecs;
    `example_inputs`: .npz path or {name: array}; `dynamic`: "NAME:AXIS[:DIM_NAME]" strings or
    {name: {axis: dim name}} (see resolve_inputs for which source wins). A 0-d input with an example
    value is "NAME=VALUE[:DTYPE]" in `inputs`.
    `args`: "NAME=VALUE" strings or {name: value}: int/float/bool arguments of forward baked into the
    graph (not inputs of the ONNX model).
    `exporter`: "auto" (dynamo, then TorchScript), "dynamo" or "torchscript".
    Verification runs the file on ONNX Runtime's CPU EP against PyTorch on the example inputs
    and, with dynamic axes, on inputs resized along every one of them, within `tolerance` (float outputs;
    integer and bool outputs must be equal). When it fails, the model also runs in float64 and the error
    says whether PyTorch's own float32 misses the tolerance (an unstable model, not a wrong export).
    The file appears only after it passed, or unchecked with verify=False (a warning in the log and
    result.verified False); an existing file is replaced then.
    progress(str) gets a short line as each step starts (loading, exporting, verifying) and says
    what SPEC was found to be.
    Raises ExportError with one sentence for anything the user can fix; VerificationError (an
    ExportError) when the file exported but does not match PyTorch.
    """
    say = progress or (lambda _line: None)
    if exporter not in EXPORTERS:
        raise ExportError(f"exporter {exporter!r} is not one of {', '.join(EXPORTERS)}")
    say(f"loading {os.fspath(spec)}")
    loaded = load_model(spec, weights=weights, trust_pickle=trust_pickle)
    say(f"{loaded.source} is {describe_kind(loaded.kind)}")
    if loaded.program is None and is_causal_lm(loaded.module) and not (inputs or example_inputs or dynamic or args):
        # A generative LM: one graph with its KV cache for prefill and decode (given inputs: the plain forward).
        return export_causal_lm(loaded, output, opset, exporter, verify, tolerance, verbose, say)
    baked = bake_args(loaded, args or [])
    if baked:
        say("baking " + ", ".join(f"{k}={v!r}" for k, v in baked.items()) + " into the graph")
    specs, examples = resolve_inputs(loaded, inputs, example_inputs, dynamic)

    def reference(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return [t.detach().cpu().numpy() for _, t in _run_torch(loaded.module, specs, feeds)]

    def reference64(feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return [t.detach().cpu().numpy() for _, t in _run_torch(float64_twin(loaded.module), specs, as_float64(feeds))]

    try:
        outputs = _run_torch(loaded.module, specs, examples)
    except Exception as e:
        raise ExportError(
            f"the PyTorch model fails on the example inputs ({describe(examples)}): {type(e).__name__}: "
            f"{first_line(e)}; check the input shapes and dtypes"
        ) from None
    if not outputs:
        raise ExportError(f"{loaded.source} returns no tensors, so there is nothing to export")
    names = output_names([path for path, _ in outputs])
    args = tuple(torch.from_numpy(np.array(examples[s.name], copy=True)) for s in specs)

    with staged_output(output, error=ExportError) as staged:
        used = export_onnx(loaded, args, specs, names, opset, exporter, staged, verbose=verbose, progress=say)
        log.info("exported %s with the %s exporter (opset %d)", loaded.source, used, opset)
        report = []
        if verify:
            checks = [("example", examples)]
            if any(s.dynamic for s in specs):
                checks.append(("resized", resized_inputs(specs, examples)))
            report = verify_onnx(staged, reference, checks, progress=say, tolerance=tolerance, reference64=reference64)
        else:
            log.warning("%s was not verified against PyTorch (verify=False)", output)
        onnx_inputs, onnx_outputs = describe_values(staged)
    return ExportResult(str(output), loaded.kind, used, opset, onnx_inputs, onnx_outputs, report, baked, verified=verify)


def _run_torch(module, specs: list[InputSpec], feeds: Mapping[str, np.ndarray]):
    # Copies: a model that writes into its inputs must not change the arrays ONNX Runtime sees.
    args = [torch.from_numpy(np.array(feeds[s.name], copy=True)) for s in specs]
    with torch.no_grad():
        return flatten_outputs(module(*args))

