"""The `optim` command: parses arguments, calls the library, prints. No logic of its own."""

from __future__ import annotations

import functools
import json
import logging
import sys

import click

from optim.common.errors import CheckFailed, UserError
from optim.ep_plugin import EP_NAME, ISAS, PRECISIONS
from optim.ep_plugin.tools.benchmark import VS_CHOICES
from optim.optimizer import DEFAULT_MAX_ROUNDS, FLOAT_ATOL, FLOAT_RTOL, PASS_NAMES, Tolerance
from optim.optimizer.proof import DYNAMIC_DIMS

# Kernel sets OptimEP can be forced to (auto: the best this CPU runs; avxvnni and avx512vnni add VNNI int8 GEMMs
# and convolutions, amx the int8 GEMM on AMX tiles).
ISA_CHOICES = ["auto", *ISAS]
# --precision on run / bench / profile / serve (the EP option `precision`).
_PRECISION_HELP = ("bf16: float MatMul / Gemm with constant weights run with inputs rounded to bfloat16 and float32 "
                   "sums (about twice the FMA rate; needs AVX512-BF16). The error against fp32 is the cost: check it "
                   "with `optim run --compare`.")
# Rows `optim profile` (and `optim bench --profile`) print by default.
PROFILE_TOP = 25

log = logging.getLogger("optim")


class _UsageError(click.ClickException):
    """Bad input from the user: one sentence, exit code 2."""

    exit_code = 2


def _reports_errors(runtime_errors: bool = False, explain=None):
    """Decorates a command so that its errors end it with one sentence instead of a traceback: a UserError
    (bad input: a file, an option, data that does not fit) exits 2; a CheckFailed (the result failed its
    check: the input was fine, nothing was written) exits 1; with runtime_errors, any other exception is
    ONNX Runtime's (or OptimEP's) and exits 1 with its cause. explain(error, verbose) prints what the command
    shows before the sentence (report rows, pass events) and returns the sentence. -v (the command's
    `verbose`) prints the traceback first, with the error the sentence summarises. With --json (the command's
    `as_json`) stdout still gets one JSON object: {"error": the sentence, "stage": the command, "exit_code": ...}."""

    def decorate(command):
        @functools.wraps(command)
        def run(*args, **kwargs):
            try:
                return command(*args, **kwargs)
            except (click.ClickException, click.Abort, click.exceptions.Exit):
                raise
            except Exception as e:
                ours = isinstance(e, (UserError, CheckFailed))
                if not (ours or runtime_errors):
                    raise  # a bug: the traceback is the report
                verbose = kwargs.get("verbose", False)
                if verbose:
                    _print_traceback(e)
                if explain:
                    message = explain(e, verbose)
                else:
                    message = str(e) if ours else _ort_message(e)
                usage = isinstance(e, UserError) and not isinstance(e, CheckFailed)  # a failed check: exit 1
                if kwargs.get("as_json"):
                    click.echo(json.dumps({"error": message, "stage": command.__name__.removesuffix("_cmd"),
                                           "exit_code": 2 if usage else 1}))
                if usage:
                    raise _UsageError(message) from None
                raise click.ClickException(message) from None

        return run

    return decorate


def _ort_message(error: Exception) -> str:
    from optim.ep_plugin.ort_errors import ort_error_message

    return ort_error_message(error)


def _print_traceback(error: BaseException) -> None:
    """-v: the traceback, including the library error that the one-sentence message summarised
    (library errors are raised `from None`, which would hide it)."""
    import traceback

    error.__suppress_context__ = False
    traceback.print_exception(error, file=sys.stderr)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="optim")
def main() -> None:
    """optim: PyTorch -> ONNX -> int8, run on optim's own ONNX Runtime execution provider (OptimEP)."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s: %(message)s")


@main.command()
@click.option("--isa", type=click.Choice(ISA_CHOICES), default="auto", show_default=True,
              help="Kernel instruction set to try.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def doctor(isa: str, as_json: bool) -> None:
    """Check the installation: ONNX Runtime, the OptimEP library, CPU features, kernels chosen."""
    from optim.ep_plugin.tools.doctor import diagnose

    r = diagnose(isa=isa)
    if as_json:
        click.echo(json.dumps(r, indent=2))
    else:
        flags = ", ".join(k for k, v in r["cpu_flags"].items() if v) or "none of avx2/fma/avx512"
        click.echo(f"onnxruntime      {r['onnxruntime']}")
        click.echo(f"EP library       {r['library'] or '-'}")
        click.echo(f"registered       {'yes' if r['registered'] else 'no'}")
        click.echo(f"API version      {r['api_version'] or '-'}")
        click.echo(f"CPU              {r['cpu']} ({flags})")
        click.echo(f"kernel ISA       {r['isa'] or '-'}")
        click.echo(f"kernels          {', '.join(r['kernels']) or '-'}")
        click.echo(f"precision bf16   {r['bf16'] or 'not available (needs AVX512-BF16 and isa avx512 or above)'}")
        click.echo(f"status           {'OK: ' + EP_NAME + ' loads and computes' if r['ok'] else 'FAILED'}")
    if not r["ok"]:
        raise click.ClickException(f"{EP_NAME} cannot be used: {r['error']}")


def _explain_export(error: Exception, _verbose: bool) -> str:
    # A failed verification (exit 1: the export is wrong, not the input) shows its rows first.
    for line in _report_lines(getattr(error, "report", [])):
        click.echo(line, err=True)
    return str(error)


@main.command()
@click.argument("spec")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="ONNX file to write.")
@click.option("--input", "inputs", multiple=True, metavar="NAME:DIMS[:DTYPE]",
              help="Input name and shape, e.g. x:1x3x224x224 or ids:batchx128:int64 (a named dim is dynamic); "
                   "NAME=VALUE[:DTYPE] is a 0-d (scalar) tensor input with that example value, e.g. sr=16000:int64. "
                   "Repeatable.")
@click.option("--arg", "baked", multiple=True, metavar="NAME=VALUE",
              help="A Python int, float or bool argument of forward (e.g. forward(x, sr: int)) fixed to VALUE and "
                   "baked into the graph: not an input of the ONNX model; branches on it are decided now, e.g. "
                   "sr=16000, scale=0.5, flag=true. Repeatable.")
@click.option("--example-inputs", type=click.Path(exists=True, dir_okay=False), help=".npz of example inputs.")
@click.option("--dynamic", multiple=True, metavar="NAME:AXIS[:DIM]",
              help="Mark an input axis dynamic (optionally naming the dim). Repeatable.")
@click.option("--opset", type=int, default=18, show_default=True, help="ONNX opset to export.")
@click.option("--exporter", type=click.Choice(["auto", "dynamo", "torchscript"]), default="auto", show_default=True,
              help="auto tries torch.export (dynamo) first, then the TorchScript exporter.")
@click.option("--weights", type=click.Path(exists=True, dir_okay=False), help="state_dict for a module:factory SPEC.")
@click.option("--trust-pickle", is_flag=True, help="Allow a fully pickled nn.Module (unpickling runs its code).")
@click.option("--atol", type=click.FloatRange(min=0), default=FLOAT_ATOL, show_default=True,
              help="Verification tolerance: |onnx - torch| <= atol + rtol*|torch| on float outputs (integer and bool "
                   "outputs must be equal).")
@click.option("--rtol", type=click.FloatRange(min=0), default=FLOAT_RTOL, show_default=True, help="See --atol.")
@click.option("--no-verify", is_flag=True,
              help="Write the file without checking it against PyTorch (the report says so). When a check fails, "
                   "the error first says whether PyTorch's own float32 misses the tolerance against float64.")
@click.option("--json", "as_json", is_flag=True, help="Print the export report as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Show exporter output and tracebacks.")
@_reports_errors(explain=_explain_export)
def export(spec, output, inputs, example_inputs, dynamic, baked, opset, exporter, weights, trust_pickle, atol, rtol,
           no_verify, as_json, verbose):
    """Export SPEC to ONNX and verify it against PyTorch.

    SPEC is a TorchScript archive, a torch.export .pt2 archive, a zoo model name (mlp, cnn,
    transformer, minilm; the language models llama_tiny, qwen2_tiny, gpt2_tiny, llama_0_1b,
    gpt2_small, qwen2_0_5b), a Hugging Face model folder (config.json and weights),
    package.module:factory (a callable returning an nn.Module; --weights gives its state_dict) or,
    only with --trust-pickle, a fully pickled nn.Module. Files are told apart by their contents.
    A decoder-only language model given without --input is exported with its KV cache (one graph
    for prefill and decode, for `optim generate`) and verified over a prefill and decode steps;
    a folder's tokenizer.json is copied beside the output. Progress lines go to stderr. Exit code 2 for a bad input, 1 when the
    exported model does not match PyTorch (then no file is written).

    \b
    Non-tensor arguments, for forward(x, sr: int):
      --arg sr=16000            the value is fixed in the graph (the model takes x only)
      --input sr=16000:int64    sr becomes a 0-d int64 input (forward must accept a tensor)
    """
    try:
        from optim.exporter import export as do_export
    except ImportError as e:
        raise click.ClickException(f"export needs PyTorch: pip install 'optim[export]' ({e})") from None
    if verbose:
        logging.getLogger().setLevel(logging.INFO)
    result = do_export(spec, output, inputs=list(inputs) or None, example_inputs=example_inputs,
                       dynamic=list(dynamic) or None, args=list(baked) or None, opset=opset, exporter=exporter, weights=weights,
                       trust_pickle=trust_pickle, verify=not no_verify, tolerance=Tolerance(atol, rtol), verbose=verbose,
                       progress=_progress)
    if no_verify:
        _progress("warning: the file was not verified against PyTorch (--no-verify)")
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    click.echo(f"exported {result.kind} with the {result.exporter} exporter (opset {result.opset}) -> {result.path}")
    if result.baked_args:
        click.echo("baked into the graph: " + ", ".join(f"{k}={v!r}" for k, v in result.baked_args.items()))
    if not result.verified:
        click.echo("  not verified against PyTorch (--no-verify)")
    for line in _report_lines(result.report):
        click.echo(line)


def _progress(line: str) -> None:
    # stderr, so that --json output on stdout stays one clean JSON object.
    click.echo(f"optim: {line}", err=True)


def _report_lines(report: list[dict]) -> list[str]:
    def rel(row: dict) -> str:
        return "n/a" if row["max_rel"] is None else f"{row['max_rel']:.3g}"

    return [f"  {row['output']:<16} {row['check']:<8} max abs {row['max_abs']:.3g}  max rel {rel(row)}  "
            f"tolerance {row['tolerance']}  {'ok' if row['passed'] else 'FAILED'}" for row in report]


def _explain_prune(error: Exception, _verbose: bool) -> str:
    # A missed --target (exit 1: nothing written) shows the held-out rows that say by how much.
    for row in getattr(error, "rows", []):
        click.echo(f"  {row}", err=True)
    return str(error)


@main.command()
@click.argument("spec")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="The pruned model, a torch.export archive (e.g. model.pruned.pt2), for `optim export`.")
@click.option("--ratio", type=click.FloatRange(min=0, min_open=True, max=0.9), metavar="R",
              help="Share of each prunable group's channels (a transformer's attention heads and feed-forward width) "
                   "to remove, e.g. 0.3. Compute falls faster than the ratio: a convolution loses input and output "
                   "channels (about (1-R)^2 of its MACs remain).")
@click.option("--speedup", type=click.FloatRange(min=1, min_open=True), metavar="S",
              help="Instead of --ratio: the compute reduction to reach (original MACs / pruned MACs of the convolution "
                   "and linear layers), e.g. 1.5; the ratio is searched.")
@click.option("--importance", type=click.Choice(["magnitude", "taylor"]), default="magnitude", show_default=True,
              help="Which channels go: the smallest by weight magnitude, or by (weight x gradient)^2 on mini-batches "
                   "of the samples (Taylor: activation-aware; the gradient of the cross-entropy on --data's labels, "
                   "else of a random projection of the outputs: how far each channel moves them).")
@click.option("--allocation", type=click.Choice(["uniform", "sensitivity"]), default="uniform", show_default=True,
              help="uniform: every group loses the same share. sensitivity: each group is pruned alone first and the "
                   "groups that move the outputs least lose more (0.5x-1.5x the share), at the same total compute.")
@click.option("--round-to", type=click.IntRange(min=1), default=8, show_default=True,
              help="Keep channel counts multiples of this (SIMD-friendly widths for OptimEP's kernels).")
@click.option("--data", type=click.Path(exists=True, dir_okay=False),
              help=".npz: one array per model input with samples along the first axis, and optionally `labels` (int "
                   "class ids) for a cross-entropy term and true top-1 (default: --samples random inputs, or the zoo "
                   "model's real examples).")
@click.option("--samples", type=click.IntRange(min=2), default=64, show_default=True,
              help="Random (or zoo example) samples to make when --data is not given.")
@click.option("--holdout", type=click.FloatRange(min=0, max=1, min_open=True, max_open=True), default=0.25,
              show_default=True, help="Share of the samples held out for the accuracy report and --target.")
@click.option("--steps", type=click.IntRange(min=0), default=200, show_default=True,
              help="Distillation steps (Adam, cosine-decayed learning rate) toward the original's outputs; 0: none. "
                   "The best held-out state is kept; with --target, recovery stops once it holds.")
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True, help="Samples per step.")
@click.option("--lr", type=click.FloatRange(min=0, min_open=True),
              help="Learning rate of the recovery (default: 3e-4 for a model with attention, else 1e-3).")
@click.option("--target", metavar="METRIC>=VALUE",
              help="Accuracy goal on the held-out samples against the original: cosine>=0.99, mean_cosine>=0.98 (per "
                   "sample, e.g. sentence embeddings), sqnr>=20 (dB) or top1>=0.95 (agreement on --logits). If "
                   "recovery cannot reach it, nothing is written (exit 1).")
@click.option("--logits", metavar="OUTPUT", help="Output holding class scores: top-1 agreement in the report (with "
              "labels in --data: true top-1 and a cross-entropy term; a model with one output needs no --logits then).")
@click.option("--input", "inputs", multiple=True, metavar="NAME:DIMS[:DTYPE]",
              help="Input name and shape as for `optim export` (a named dim is dynamic), for SPECs that do not say.")
@click.option("--weights", type=click.Path(exists=True, dir_okay=False), help="state_dict for a module:factory SPEC.")
@click.option("--trust-pickle", is_flag=True, help="Allow a fully pickled nn.Module (unpickling runs its code).")
@click.option("--no-latency", is_flag=True,
              help="Skip the latency report (which exports both models, quantizes both to int8 and times the four on "
                   "OptimEP).")
@click.option("--latency-batch", "latency_batches", type=click.IntRange(min=1), multiple=True, default=[1],
              show_default=True, help="Batch size of the latency report. Repeatable.")
@click.option("--threads", type=click.IntRange(min=1), help="Threads for the latency report (default: one per core).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the samples, split and mini-batches.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
@_reports_errors(explain=_explain_prune)
def prune(spec, output, ratio, speedup, importance, allocation, round_to, data, samples, holdout, steps, batch_size, lr,
          target, logits, inputs, weights, trust_pickle, no_latency, latency_batches, threads, seed, as_json, verbose):
    """Prune SPEC: fewer channels, attention heads and feed-forward width, recovered by distillation.

    SPEC is what `optim export` takes, as long as the model's Python code comes with it: a zoo name,
    package.module:factory (with --weights), a Hugging Face folder, or a pickled nn.Module with
    --trust-pickle (a TorchScript or torch.export archive has its layer sizes fixed). Channel groups
    follow the model's dependencies (residual adds, concatenations, depthwise convolutions, BatchNorm);
    the outputs keep their shapes. The original's outputs on the samples are the targets of the recovery
    (no labels needed); accuracy is reported on held-out samples before and after it, with parameters,
    MACs and, unless --no-latency, the latency of both models on OptimEP in fp32 and int8. Then:
    optim export OUTPUT -o pruned.onnx, and optimize / quantize as usual.
    """
    try:
        from optim.pruning import format_report, prune as do_prune
    except ImportError as e:
        raise click.ClickException(f"prune needs PyTorch and torch-pruning: pip install 'optim[prune]' ({e})") from None
    result = do_prune(spec, output, ratio=ratio, speedup=speedup, importance=importance, allocation=allocation,
                      round_to=round_to, data=data, samples=samples, holdout=holdout, steps=steps,
                      batch_size=batch_size, lr=lr, target=target, logits=logits, inputs=list(inputs) or None,
                      weights=weights, trust_pickle=trust_pickle, latency=not no_latency, latency_batches=latency_batches,
                      threads=threads, seed=seed, progress=_progress)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    for line in format_report(result):
        click.echo(line)


def _explain_proof(error: Exception, verbose: bool) -> str:
    from optim.optimizer import ProofError

    if not isinstance(error, ProofError):
        return str(error)
    if verbose:  # the rewrites and refusals before the failure
        for event in error.events:
            click.echo(str(event), err=True)
    return f"proof failed: {error}"


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Optimized ONNX file to write (only once the proof passes).")
@click.option("--skip", multiple=True, metavar="PASS", help="Leave out this pass. Repeatable. Passes: " + ", ".join(PASS_NAMES) + ".")
@click.option("--only", multiple=True, metavar="PASS", help="Run only this pass (repeatable); the others are left out.")
@click.option("--no-simplify", is_flag=True, help="Do not run onnxsim (constant folding, shape inference) first.")
@click.option("--inputs", "inputs_file", type=click.Path(exists=True, dir_okay=False),
              help=".npz with one array per model input for the proof (default: random inputs).")
@click.option("--input", "shapes", multiple=True, metavar="NAME:DIMS",
              help="Shape of a random proof input, e.g. x:8x64 (default: each dynamic dim "
                   f"{' and '.join(map(str, DYNAMIC_DIMS))} in turn; if the model cannot take those, the image-like "
                   "dims (past the first axis of float inputs) 224 and 320, then 320 and 640). Repeatable.")
@click.option("--freeze", multiple=True, metavar="NAME=VALUE",
              help="Fix input NAME to VALUE (a number, true or false), e.g. sr=16000: it becomes a constant, the If "
                   "nodes and shape logic it decides fold away, and the optimized model no longer takes it. "
                   "Repeatable.")
@click.option("--atol", type=click.FloatRange(min=0), default=FLOAT_ATOL, show_default=True,
              help="Proof tolerance: |optimized - input| <= atol + rtol*|input| on float outputs.")
@click.option("--rtol", type=click.FloatRange(min=0), default=FLOAT_RTOL, show_default=True, help="See --atol.")
@click.option("--max-rounds", type=click.IntRange(min=1), default=DEFAULT_MAX_ROUNDS, show_default=True,
              help="Cap on pass rounds (the passes repeat until a round changes nothing).")
@click.option("--check-each-pass", is_flag=True, help="Prove after every change (slower; for debugging passes).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random proof inputs.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Print every rewrite and refusal with its reason; tracebacks on errors.")
@_reports_errors(explain=_explain_proof)
def optimize(model, output, skip, only, no_simplify, inputs_file, shapes, freeze, atol, rtol, max_rounds,
             check_each_pass, seed, as_json, verbose):
    """Simplify MODEL and rewrite it with proven passes: fewer nodes, same outputs.

    onnxsim runs first, then the passes to a fixed point; the result must pass onnx.checker, keep
    the signature and match MODEL's outputs on ONNX Runtime's CPU EP, or nothing is written and the
    pass that broke it is named. With --freeze, the signature loses the frozen inputs and MODEL
    runs with their values.
    """
    from optim.optimizer import format_report, optimize as do_optimize
    from optim.optimizer.freeze import parse_freeze

    _check_onnx_file(model)
    valued = next((v for v in shapes if "=" in v), None)
    if valued:
        raise click.UsageError(f"--input {valued} gives a value, not a shape; --freeze {valued.split(':')[0]} fixes "
                               "an input to a value")
    result = do_optimize(model, output, skip=skip, only=only, simplify=not no_simplify, inputs=inputs_file,
                         shapes=_parse_shapes(shapes), freeze=dict(parse_freeze(f) for f in freeze),
                         tolerance=Tolerance(atol, rtol), max_rounds=max_rounds, seed=seed,
                         check_each_pass=check_each_pass)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    if verbose:
        for event in result.events:
            click.echo(str(event))
    for line in format_report(result):
        click.echo(line)


def _parse_shapes(values) -> dict:
    from optim.ep_plugin.inputs import parse_shape

    return dict(parse_shape(v) for v in values)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--inputs", "inputs_file", type=click.Path(exists=True, dir_okay=False), help=".npz with one array per model input.")
@click.option("--input", "shapes", multiple=True, metavar="NAME:DIMS",
              help="Shape for random inputs, needed for dynamic dims, e.g. x:8x64. Repeatable.")
@click.option("--save", type=click.Path(dir_okay=False), help="Write the outputs to this .npz.")
@click.option("--compare", is_flag=True,
              help="Also run ONNX Runtime's CPU EP and print the max abs/rel error against it (a QDQ model: with graph "
                   "optimizations off, the graph as written, which OptimEP's integer units equal).")
@click.option("--threads", type=click.IntRange(min=1), help="Intra-op threads (default: ONNX Runtime's choice).")
@click.option("--isa", type=click.Choice(ISA_CHOICES), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True, help=_PRECISION_HELP)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
@_reports_errors(runtime_errors=True)
def run(model, inputs_file, shapes, save, compare, threads, isa, precision, seed, as_json, verbose):
    """Run MODEL on OptimEP: outputs, placement report (with refusal reasons) and wall time."""
    import numpy as np
    from optim.ep_plugin.tools.runner import run_model

    _check_onnx_file(model)
    result = run_model(model, inputs=inputs_file, shapes=_parse_shapes(shapes), compare_cpu=compare, threads=threads,
                       seed=seed, isa=isa, precision=precision)
    if save:
        from optim.common.staging import staged_output

        with staged_output(save) as tmp:
            with open(tmp, "wb") as f:
                np.savez(f, **result.outputs)
    if as_json:
        out = {
            "model": model,
            "seconds": result.seconds,
            "placement": result.placement.to_dict(),
            "outputs": {k: {"shape": list(v.shape), "dtype": str(v.dtype)} for k, v in result.outputs.items()},
        }
        if compare:
            out["reference"] = result.reference
            out["max_abs_error"] = result.max_abs_error
            out["max_rel_error"] = result.max_rel_error
            out["checks"] = [{"name": c.name, "max_abs": c.max_abs, "max_rel": c.max_rel if c.rel_measured else None}
                             for c in result.checks]
        click.echo(json.dumps(out, indent=2))
        return
    for name, v in result.outputs.items():
        stats = f"min {v.min():.4g} max {v.max():.4g} mean {v.astype(np.float64).mean():.4g}" if v.size and v.dtype.kind in "fiu" else ""
        click.echo(f"output {name}: {v.dtype} {list(v.shape)} {stats}")
    click.echo(result.placement.summary())
    click.echo(f"wall time: {result.seconds * 1e3:.3f} ms (one run after a warm-up)")
    if result.checks:
        click.echo(f"compared with {result.reference}:")
    for c in result.checks:
        unmeasured = f" ({c.problem})" if c.max_abs == float("inf") else ""  # shapes, NaN or infinities differ
        rel = f"{c.max_rel:.3g}" if c.rel_measured else f"n/a (every reference value within {c.atol:g} of 0)"
        click.echo(f"  {c.name}: max abs error {c.max_abs:.3g}, max rel error {rel}{unmeasured}")


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--prompt", "prompts", multiple=True, metavar="TEXT",
              help="Text to continue. Repeatable: several prompts generate together as one batch.")
@click.option("--prompt-ids", "prompt_ids", multiple=True, metavar="ID[,ID...]",
              help="A prompt as token ids (no tokenizer needed). Repeatable.")
@click.option("--max-new-tokens", type=click.IntRange(min=1), default=32, show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="0: greedy (the most likely token each step); above 0: sample, flatter as it grows.")
@click.option("--top-k", type=click.IntRange(min=0), default=0, show_default=True,
              help="Sample among the k most likely tokens only (0: all).")
@click.option("--top-p", type=click.FloatRange(min=0, max=1, min_open=True), default=1.0, show_default=True,
              help="Sample among the most likely tokens whose probability reaches p (nucleus; 1: all).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the sampling.")
@click.option("--stop", multiple=True, metavar="TEXT", help="End a prompt's text where this appears (cut). Repeatable.")
@click.option("--ignore-eos", is_flag=True, help="Go on past the model's end-of-sequence token (exactly --max-new-tokens).")
@click.option("--tokenizer", type=click.Path(exists=True),
              help="tokenizer.json (or its folder); default: the one beside MODEL, else bytes for a 256-token vocabulary.")
@click.option("--runtime", type=click.Choice(["optim", "cpu"]), default="optim", show_default=True,
              help="optim: OptimEP (the CPU EP for what it leaves); cpu: ONNX Runtime's CPU EP alone.")
@click.option("--threads", type=click.IntRange(min=1), help="Intra-op threads (default: ONNX Runtime's choice).")
@click.option("--isa", type=click.Choice(ISA_CHOICES), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True, help=_PRECISION_HELP)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (texts, token ids, timings) instead.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
@_reports_errors(runtime_errors=True)
def generate(model, prompts, prompt_ids, max_new_tokens, temperature, top_k, top_p, seed, stop, ignore_eos, tokenizer,
             runtime, threads, isa, precision, as_json, verbose):
    """Generate text with MODEL, a causal LM exported by `optim export` (with its KV cache).

    One prompt streams its text to stdout as it is generated; several run as one batch and print when done. The
    timing summary (time to first token, prefill and decode tokens/s) goes to stderr.

    \b
      optim export llama_tiny -o llama.onnx
      optim generate llama.onnx --prompt "Once upon a time" --max-new-tokens 64
    """
    from optim.llm.session import GenerateRequest, run_generate

    _check_onnx_file(model)
    request = GenerateRequest(model, list(prompts), list(prompt_ids), max_new_tokens, temperature, top_k, top_p, seed,
                              list(stop), not ignore_eos, tokenizer, runtime, threads,
                              None if isa == "auto" else isa, None if precision == "fp32" else precision)
    streaming = not as_json and len(prompts) + len(prompt_ids) == 1

    def show(_row: int, text: str) -> None:
        click.echo(text, nl=False)

    result = run_generate(request, on_text=show if streaming else None)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    if streaming:
        click.echo()
    else:
        for i, row in enumerate(result.rows):
            click.echo(f"[{i}] {row.text}")
    click.echo(result.stats.summary(), err=True)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--input", "shapes", multiple=True, metavar="NAME:DIMS", help="Input shape (needed for dynamic dims). Repeatable.")
@click.option("--batch", "batch_text", metavar="N[,N...]", help="Batch size(s): sets every input's first dim; a list sweeps.")
@click.option("--warmup", type=click.IntRange(min=0), default=10, show_default=True, help="Warm-up runs per runtime.")
@click.option("--warmup-seconds", type=click.FloatRange(min=0, min_open=True), help="Also warm up for this many seconds per runtime.")
@click.option("--runs", type=click.IntRange(min=1), default=100, show_default=True, help="Timed runs per runtime.")
@click.option("--duration", type=click.FloatRange(min=0, min_open=True), help="Time for this many seconds instead of --runs.")
@click.option("--threads", type=click.IntRange(min=1), help="Intra-op threads (default: ONNX Runtime's, one per core).")
@click.option("--vs", multiple=True, type=click.Choice(VS_CHOICES),
              help="Also time ONNX Runtime's CPU EP (all graph optimizations / none) or OpenVINO (if installed; "
                   "float math in f32, or bf16 with openvino-bf16), alternating runs. Repeatable. Each runs in a "
                   "process of its own: one that fails to load or run the model, or crashes, is reported in one "
                   "line; the others still run.")
@click.option("--concurrency", type=click.IntRange(min=1), help="Also run N threads on one OptimEP session.")
@click.option("--isa", type=click.Choice(ISA_CHOICES), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True, help=_PRECISION_HELP)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--json", "json_file", type=click.Path(dir_okay=False), help="Write the full report as JSON to this file.")
@click.option("--plot", "plot_file", type=click.Path(dir_okay=False), help="Draw the latency distribution (and sweep) to this PNG.")
@click.option("--profile", "with_profile", is_flag=True,
              help="Afterwards, profile the first batch on a separate session (see `optim profile`): time per "
                   "OptimEP step and per CPU EP node.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
@_reports_errors(runtime_errors=True)
def bench(model, shapes, batch_text, warmup, warmup_seconds, runs, duration, threads, vs, concurrency, isa, precision, seed,
          json_file, plot_file, with_profile, verbose):
    """Benchmark MODEL on OptimEP: latency percentiles, throughput, noise, memory, placement; with --vs,
    side by side with ONNX Runtime's CPU EP or OpenVINO (ratio above 1 means OptimEP is faster)."""
    from optim.ep_plugin.tools.bench_report import print_report
    from optim.ep_plugin.tools.benchmark import benchmark

    _check_onnx_file(model)
    try:
        batches = [int(b) for b in batch_text.split(",")] if batch_text else None
    except ValueError:
        raise _UsageError(f"bad --batch {batch_text!r}: expected sizes like 1 or 1,8,32") from None
    if batches and any(b < 1 for b in batches):
        raise _UsageError(f"bad --batch {batch_text!r}: sizes must be >= 1")
    report = benchmark(model, shapes=_parse_shapes(shapes), batches=batches, warmup=warmup, runs=runs, duration=duration,
                       warmup_duration=warmup_seconds, threads=threads, vs=list(vs), concurrency=concurrency, seed=seed,
                       isa=isa, precision=precision, progress=lambda line: click.echo(line, err=True))
    print_report(report, click.echo)
    data = report.to_dict()
    if with_profile:
        from optim.ep_plugin.tools.profile import profile
        from optim.ep_plugin.tools.profile_report import print_profile

        click.echo("")
        prof = profile(model, shapes=report.results[0].shapes, runs=runs, warmup=warmup, threads=threads, isa=isa,
                       precision=precision, seed=seed)
        print_profile(prof, click.echo, top=PROFILE_TOP)
        data["profile"] = prof.to_dict()
    if json_file:
        from optim.common.staging import staged_output

        with staged_output(json_file) as tmp:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(data, f, indent=2)
        click.echo(f"report written to {json_file}")
    if plot_file:
        from optim.ep_plugin.tools.bench_plot import plot_report

        plot_report(report, plot_file)  # without matplotlib: one sentence saying how to install it
        click.echo(f"plot written to {plot_file}")


@main.command("profile")
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("--inputs", "inputs_file", type=click.Path(exists=True, dir_okay=False), help=".npz with one array per model input.")
@click.option("--input", "shapes", multiple=True, metavar="NAME:DIMS", help="Input shape (needed for dynamic dims). Repeatable.")
@click.option("--batch", type=click.IntRange(min=1), help="Set every input's first dim to this batch size.")
@click.option("--warmup", type=click.IntRange(min=0), default=5, show_default=True, help="Warm-up runs (not counted).")
@click.option("--runs", type=click.IntRange(min=1), default=50, show_default=True, help="Profiled runs.")
@click.option("--threads", type=click.IntRange(min=1), help="Intra-op threads (default: ONNX Runtime's, one per core).")
@click.option("--isa", type=click.Choice(ISA_CHOICES), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True, help=_PRECISION_HELP)
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the random inputs.")
@click.option("--top", type=click.IntRange(min=0), default=PROFILE_TOP, show_default=True,
              help="Print the N most expensive rows (0: all).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (every row).")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
@_reports_errors(runtime_errors=True)
def profile_cmd(model, inputs_file, shapes, batch, warmup, runs, threads, isa, precision, seed, top, as_json, verbose):
    """Where the time of a run goes: each step inside OptimEP's fused nodes and each node left to ONNX
    Runtime's CPU EP, with its op type, input shapes, mean ms per run and share, then the share per op type.

    OptimEP times its steps itself (EP option `profile`); ONNX Runtime's profiler times the other nodes and
    each fused node whole (the part outside its steps shows as a '(fused node)' row). Both profilers add a
    little overhead: use the shares to find hot spots, `optim bench` for latency."""
    from optim.ep_plugin.tools.profile import profile
    from optim.ep_plugin.tools.profile_report import print_profile

    _check_onnx_file(model)
    prof = profile(model, shapes=_parse_shapes(shapes), batch=batch, inputs=inputs_file, runs=runs, warmup=warmup,
                   threads=threads, isa=isa, precision=precision, seed=seed)
    if as_json:
        click.echo(json.dumps(prof.to_dict(), indent=2))
    else:
        print_profile(prof, click.echo, top=top)


@main.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="int8 ONNX file to write.")
@click.option("--calib", "calibration", help="Calibration data: an .npz file, a folder of .npz files, or module:function.")
@click.option("--calib-random", type=click.IntRange(min=1), metavar="N",
              help="Calibrate on N random batches (accuracy figures then mean little).")
@click.option("--eval", "evaluation", help="Held-out data for the accuracy report (default: the last 20% of --calib).")
@click.option("--method", type=click.Choice(["minmax", "percentile", "entropy"]), default="minmax", show_default=True,
              help="How activation ranges are calibrated.")
@click.option("--activations", type=click.Choice(["uint8", "int8"]), default="uint8", show_default=True)
@click.option("--per-tensor", is_flag=True, help="One weight scale per tensor instead of per output channel.")
@click.option("--weight-bits", type=click.Choice(["8", "7"]), default="8", show_default=True,
              help="7: weights in [-64, 64] (onnxruntime's reduce_range). OptimEP then runs exact u8 x s8 kernels on "
                   "CPUs without VNNI (AVX2: up to 2x the int8 speed of 8-bit weights there), for some accuracy, which "
                   "the report measures. CPUs with VNNI run both equally fast.")
@click.option("--exclude", multiple=True, metavar="NODE_OR_OP", help="Keep a node (by name) or every node of an op type in float.")
@click.option("--op-types", metavar="OP[,OP...]",
              help="Quantize only nodes of these op types, e.g. MatMul (default: every type onnxruntime quantizes; for "
                   "a model with attention and LayerNorm whose worst output falls below cosine 0.99 that way, MatMul "
                   "and Conv only when that is closer to float, said in the report).")
@click.option("--target", metavar="METRIC>=VALUE",
              help="Accuracy goal on the held-out data, measured on OptimEP: cosine>=0.995, mean_cosine>=0.99 (per "
                   "sample, e.g. sentence embeddings), sqnr>=30 (dB) or top1>=0.99 (needs --logits). The most "
                   "sensitive nodes stay float until it holds; if it cannot be met, nothing is written (exit 2).")
@click.option("--max-float", type=click.IntRange(min=1), metavar="N",
              help="With --target: keep at most N nodes in float (default: as many as it takes).")
@click.option("--dynamic", is_flag=True, help="Weights only (no calibration): dynamic quantization.")
@click.option("--allow-loss", is_flag=True,
              help="Write the model even when an output, or a part of one a Concat made, collapses in int8 (its values "
                   "all one level, or cosine below 0.9 against float); by default that is an error and nothing is "
                   "written.")
@click.option("--logits", metavar="OUTPUT", help="Output holding class logits: report top-1 agreement.")
@click.option("--input", "shapes", multiple=True, metavar="NAME:DIMS", help="Shapes for random data with dynamic dims.")
@click.option("--compare", is_flag=True, help="Also measure the int8 model on ONNX Runtime's CPU EP.")
@click.option("--weights", "weights_only", type=click.Choice(["int4", "int8"]),
              help="Weight-only instead: MatMul / Gemm weights in blocks of --block (com.microsoft MatMulNBits, which "
                   "the CPU EP runs too), activations float, no calibration; for language models. The report: "
                   "logits cosine, top-1 agreement and perplexity against the float model (a causal LM), else each "
                   "output's cosine and SQNR on random inputs.")
@click.option("--block", type=click.Choice([str(b) for b in (16, 32, 64, 128, 256)]), default="32", show_default=True,
              help="With --weights: weights per scale along K.")
@click.option("--symmetric", is_flag=True, help="With --weights: no zero points (codes centred on 2^(bits-1)).")
@click.option("--int8-activations", is_flag=True,
              help="With --weights int4: each MatMul's activations quantized to int8 per block at run time "
                   "(MatMulNBits accuracy_level 4, as the CPU EP and llama.cpp do): decode about 2x faster on AVX2, "
                   "at the cost the report shows.")
@click.option("--text", "text_file", type=click.Path(exists=True, dir_okay=False),
              help="With --weights on a causal LM: the text the report runs on (tokenized with the model's "
                   "tokenizer); default: 128 seeded random token ids.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("-v", "--verbose", is_flag=True, help="Tracebacks on errors.")
@_reports_errors()
def quantize(model, output, calibration, calib_random, evaluation, method, activations, per_tensor, weight_bits, exclude,
             op_types, target, max_float, dynamic, allow_loss, logits, shapes, compare, weights_only, block, symmetric,
             int8_activations, text_file, as_json, verbose):
    """Quantize MODEL to int8 QDQ (int8 weights per channel, uint8/int8 activations per tensor) and
    report its accuracy against the float model on held-out inputs, measured on OptimEP.

    With --target, each quantized node's sensitivity is measured (the metric with only that node
    quantized), then the most sensitive ones are kept in float until the target holds; the report names
    them and the latency they cost on OptimEP. Calibration runs once. If the target cannot be met,
    nothing is written and the exit code is 2."""
    from optim.optimizer.quantization import quantize as do_quantize

    _check_onnx_file(model)
    if weights_only:
        _quantize_weights(model, output, weights_only, int(block), symmetric, int8_activations, text_file, as_json,
                          calibration or calib_random or target or dynamic or evaluation)
        return
    result = do_quantize(model, output, calibration=calibration, calibration_random=calib_random,
                         evaluation=evaluation, method=method, activation_type=activations,
                         per_channel=not per_tensor, weight_bits=int(weight_bits), allow_loss=allow_loss,
                         exclude=list(exclude),
                         op_types=[t.strip() for t in op_types.split(",") if t.strip()] if op_types else None,
                         dynamic=dynamic, logits=logits, target=target, max_float=max_float,
                         compare_cpu=compare, shapes=_parse_shapes(shapes),
                         progress=lambda line: click.echo(f"optim: {line}", err=True))
    for note in result.warnings:
        click.echo(f"warning: {note}", err=True)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    p = result.placement
    how = "dynamic (weights only)" if result.mode == "dynamic" else f"static, {result.method}, {result.activation_type} activations"
    how += f", {result.weight_bits}-bit weights"
    click.echo(f"quantized ({how}) -> {result.path} in {result.seconds:.1f} s; calibration batches "
               f"{result.calibration_batches}, held-out batches {result.evaluation_batches}")
    if result.opset_converted_from is not None:
        click.echo(f"converted from opset {result.opset_converted_from} to 13 first: int8 QDQ (per-channel "
                   "DequantizeLinear) needs opset 13; the converted model gave the same outputs")
    click.echo(f"on OptimEP: {p['optim_nodes']}/{p['total_nodes']} nodes, {p['integer_units']} integer unit(s)")
    if result.recipe and result.recipe["op_types"]:
        click.echo(f"quantized op types: {', '.join(result.recipe['op_types'])} only ({result.recipe['reason']})")
    if result.excluded:
        click.echo(f"kept in float: {', '.join(result.excluded)}")
    for kept in result.kept_float_ranges:
        click.echo(f"kept in float: {kept['reason']}")
    fallback = result.fallback
    if fallback and not fallback["kept_float"]:
        click.echo(f"target {fallback['target']} met with every node quantized ({fallback['int8_value']:.5f})")
    elif fallback:
        cost = fallback["latency_change"]
        click.echo(f"target {fallback['target']}: {fallback['int8_value']:.5f} with every node quantized, "
                   f"{fallback['final_value']:.5f} with {len(fallback['kept_float'])} of {fallback['candidates']} "
                   "quantized node(s) in float")
        if cost is not None:
            ms = fallback["latency_ms"]
            click.echo(f"latency on OptimEP (median): float {ms['float']:.2f} ms, int8 everywhere {ms['int8']:.2f} ms, "
                       f"with the fallback {ms['final']:.2f} ms ({cost:+.0%} over int8 everywhere)")
        for s in fallback["kept_float"]:
            click.echo(f"  kept in float: {s['node']} ({s['op_type']}): {s['value']:.5f} with only it quantized")
    for row in result.accuracy:
        click.echo(f"  {row}")


def _quantize_weights(model, output, kind, block, symmetric, int8_activations, text_file, as_json,
                      static_options) -> None:
    from optim.common.errors import UserError
    from optim.optimizer.quantization.weight_only import WEIGHT_BITS, quantize_weights

    if static_options:
        raise UserError("--weights quantizes weights only: --calib, --calib-random, --eval, --target and --dynamic do "
                        "not apply")
    text_ids = None
    if text_file:
        from optim.llm import load_tokenizer, read_info

        with open(text_file, encoding="utf-8") as f:
            text_ids = load_tokenizer(model, read_info(model).vocab).encode(f.read())
    result = quantize_weights(model, output, bits=WEIGHT_BITS[kind], block=block, symmetric=symmetric,
                              int8_activations=int8_activations, text_ids=text_ids,
                              progress=lambda line: click.echo(f"optim: {line}", err=True))
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=2))
        return
    for line in result.lines():
        click.echo(line)


@main.command()
@click.argument("models", nargs=-1, required=True, type=click.Path(exists=True))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on (0.0.0.0: every interface).")
@click.option("--port", type=click.IntRange(0, 65535), default=8000, show_default=True, help="HTTP port.")
@click.option("--threads", type=click.IntRange(min=1), help="Intra-op threads of each model's session "
              "(default: ONNX Runtime's choice).")
@click.option("--isa", type=click.Choice(ISA_CHOICES), default="auto", show_default=True)
@click.option("--precision", type=click.Choice(PRECISIONS), default="fp32", show_default=True, help=_PRECISION_HELP)
@click.option("--max-batch", type=click.IntRange(min=1), default=8, show_default=True,
              help="Most rows (dim 0) one batch gathers; 1 turns dynamic batching off.")
@click.option("--max-delay-ms", type=click.FloatRange(min=0), default=5.0, show_default=True,
              help="Longest a request waits for others to fill its batch.")
@click.option("--max-queue", type=click.IntRange(min=1), default=256, show_default=True,
              help="Requests a model holds waiting; more are refused with 503 (not with --ray).")
@click.option("--timeout-s", type=click.FloatRange(min=0, min_open=True), default=30.0, show_default=True,
              help="A request not answered by then gets 504 (not with --ray); on the OpenAI text endpoints, one "
                   "that gets no next token for that long (504, or an error event in a stream; its sequence is "
                   "cancelled).")
@click.option("--ray", "use_ray", is_flag=True, help="Deploy on Ray Serve instead (local Ray instance, or RAY_ADDRESS).")
@click.option("--replicas", type=click.IntRange(min=1), default=1, show_default=True, help="With --ray: replicas per model.")
@click.option("-v", "--verbose", is_flag=True, help="Server log at info level; tracebacks on errors.")
@_reports_errors()
def serve(models, host, port, threads, isa, precision, max_batch, max_delay_ms, max_queue, timeout_s, use_ray, replicas,
          verbose):
    """Serve ONNX MODELS on OptimEP over HTTP with the KServe v2 inference protocol (Triton's clients speak it).

    MODELS are ONNX files (served under their file name's stem) or model-repository folders (NAME.onnx files, or
    NAME/VERSION/model.onnx as Triton lays them out). Requests for a model are batched along its batch axis (dim 0
    symbolic in every input and output) up to --max-batch rows or --max-delay-ms; /metrics has Prometheus metrics.
    Ctrl-C shuts down gracefully: requests in flight are answered first.

    \b
    Endpoints: GET /v2, /v2/health/live, /v2/health/ready, /v2/models/NAME, /v2/models/NAME/ready, /metrics;
    POST /v2/models/NAME/infer (JSON tensors or the binary tensor extension).

    A causal LM exported by `optim export` is also served with OpenAI's API: GET /v1/models, POST
    /v1/completions and /v1/chat/completions (streaming with "stream": true; chat through the model's
    own chat template when its tokenizer_config.json has one), its requests batched continuously (new
    ones join between decode steps, up to --max-batch sequences; --max-queue waiting, then 503). Its
    weights load once: /v1 and /v2 share one session. With --ray, the language models' /v1 is one more
    Ray Serve application.
    """
    import optim.serve

    optim.serve.require()
    options = dict(threads=threads, max_batch=max_batch, max_delay_ms=max_delay_ms)
    if isa != "auto":
        options["isa"] = isa
    if precision != "fp32":
        options["precision"] = precision
    if use_ray:
        optim.serve.require(("ray",), extra="ray")
        from optim.serve import ray as serve_ray

        serve_ray.run(list(models), host=host, port=port, replicas=replicas, **options)
        return
    served = optim.serve.app(list(models), max_queue=max_queue, timeout_s=timeout_s, **options)
    click.echo(f"serving {', '.join(served.state.models)} on http://{host}:{port} (KServe v2; Ctrl-C stops)", err=True)
    from optim.serve.server import serve_forever

    serve_forever(served, host=host, port=port, log_level="info" if verbose else "warning")


def _check_onnx_file(path: str) -> None:
    import onnx

    try:
        onnx.load(path, load_external_data=False)
    except Exception:
        raise _UsageError(f"{path} is not an ONNX model (onnx could not parse it)") from None


if __name__ == "__main__":
    sys.exit(main())
