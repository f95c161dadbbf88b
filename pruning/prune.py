"""prune(): a PyTorch model made narrower (channels, attention heads, feed-forward width), recovered by
distillation, checked on held-out inputs and saved as a torch.export archive that `optim export` takes."""

from __future__ import annotations

import importlib
import os
import time
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import nn

from optim.common.staging import staged_output
from optim.exporter.errors import ExportError
from optim.exporter.inputs import resolve_inputs
from optim.exporter.loading import ZOO_KIND, describe_kind, load_model
from optim.exporter.outputs import flatten_outputs, output_names
from optim.exporter.to_onnx import torch_dynamic_shapes
from optim.models import get as zoo_get
from optim.optimizer.errors import OptimizeError
from optim.optimizer.quantization.accuracy import compare_outputs, lowest
from optim.optimizer.quantization.slices import small_channel_groups
from optim.optimizer.quantization.target import Target, parse_target

from .data import Samples, load_samples
from .errors import PruneError, TargetMissed
from .importance import IMPORTANCES, taylor_gradients
from .pruner import MAX_RATIO, macs_and_params, pruned_copy, scale_for_macs
from .recover import distill, recalibrate_batchnorm
from .report import PruneResult, measure_latency
from .sensitivity import group_sensitivities, ratio_weights
from .structure import find_structure


ALLOCATIONS = ("uniform", "sensitivity")
RUNTIME = "PyTorch"  # where the accuracy rows were measured
PROBE_SAMPLES = 8  # samples the sensitivity search runs on
# Recovery learning rates (Adam) when none is given: pretrained transformers take smaller steps.
LR_DEFAULT = 1e-3
LR_TRANSFORMER = 3e-4


def prune(
    spec: str | os.PathLike,
    output: str | os.PathLike,
    *,
    ratio: float | None = None,
    speedup: float | None = None,
    importance: str = "magnitude",
    allocation: str = "uniform",
    round_to: int | None = 8,
    data: str | os.PathLike | None = None,
    samples: int = 64,
    holdout: float = 0.25,
    steps: int = 200,
    batch_size: int = 16,
    lr: float | None = None,
    target: str | None = None,
    logits: str | None = None,
    inputs: Sequence[str] | None = None,
    weights: str | os.PathLike | None = None,
    trust_pickle: bool = False,
    latency: bool = True,
    latency_batches: Sequence[int] = (1,),
    latency_runs: int = 20,
    threads: int | None = None,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> PruneResult:
    """Prunes SPEC (a zoo name, package.module:factory with `weights`, a Hugging Face folder or, with trust_pickle, a
    pickled nn.Module: the model's Python code is needed) and writes the pruned model to `output` as a torch.export
    archive with the same inputs and dynamic axes.

    ratio: the share of each prunable group's channels (a transformer's heads and feed-forward width) removed;
    speedup: instead, the compute reduction (MACs of convolution and linear layers) to reach. allocation "uniform"
    gives every group the ratio; "sensitivity" measures each group pruned alone and cuts less where the output moves
    most, at the same total compute. importance: "magnitude" (weights) or "taylor" (weights times gradients on the
    samples, squared per mini-batch: how far each channel moves the outputs, or the loss with labels; importance.py).
    Recovery: `steps` of distillation from the original's outputs (and its hidden states where they keep their shape)
    on the training part of the samples, at `lr` (default LR_TRANSFORMER for a model with attention, else
    LR_DEFAULT); `data`: .npz, one array per input with samples along the first axis, `labels` optional
    (default: `samples` random or zoo example inputs), cross-entropy as well on `logits` with labels. target: "cosine>=X",
    "mean_cosine>=X", "sqnr>=DB" or "top1>=F" on the held-out part; recovery stops once it holds, and TargetMissed
    (nothing written) when it never does. latency: export both models, quantize both to int8, time all four on
    OptimEP at each of latency_batches. progress(line) gets a line per phase."""
    say = progress or (lambda _line: None)
    t0 = time.perf_counter()
    _check_options(ratio, speedup, importance, allocation, round_to, samples, holdout, steps, batch_size, lr)
    say(f"loading {os.fspath(spec)}")
    try:
        loaded = load_model(spec, weights=weights, trust_pickle=trust_pickle)
        specs, examples = resolve_inputs(loaded, inputs)
    except ExportError as e:
        raise PruneError(str(e)) from None
    if loaded.program is not None or isinstance(loaded.module, torch.jit.ScriptModule):
        raise PruneError(f"{spec} is {describe_kind(loaded.kind)}, whose layers are fixed in the archive: pruning needs "
                         f"the model's Python code (a zoo name, package.module:factory with --weights, or a Hugging Face "
                         f"folder)")
    original = loaded.module
    _parse_target(target, logits or "?")  # its syntax, before the slow part (top1's --logits: once labels are read)

    def forward(model: nn.Module, batch: Samples) -> list[torch.Tensor]:
        return [t for _, t in flatten_outputs(model(*_tensors(batch, specs)))]

    def transform(out):
        return [t for _, t in flatten_outputs(out)]

    args = tuple(torch.from_numpy(np.array(examples[s.name], copy=True)) for s in specs)
    with torch.no_grad():
        paths = [p for p, _ in flatten_outputs(original(*args))]
    names = output_names(paths)
    if logits is not None and logits not in names:
        raise PruneError(f"--logits {logits!r} is not an output of the model; outputs are {', '.join(names)}")

    zoo_examples = _zoo_examples(loaded)
    data_samples = load_samples(specs, data, samples, seed, loaded.int_ranges, zoo_examples)
    train, held = data_samples.split(holdout, seed)
    if held.labels is not None and logits is None:
        if len(names) != 1:
            raise PruneError(f"--data has labels and the model has {len(names)} outputs: say which holds the class "
                             f"scores with --logits")
        logits = names[0]
    logits_index = names.index(logits) if logits else None
    goal = _parse_target(target, logits)
    say(f"{len(train)} samples to learn from, {len(held)} held out")

    say("tracing the dependency graph")
    structure = find_structure(original, args, transform)
    if not structure.groups:
        raise PruneError(f"{spec} has no layer optim can prune: every convolution and linear layer either produces "
                         f"an output or a transformer's residual stream")
    say("prunable groups: " + ", ".join(f"{n} {k}" for k, n in structure.kinds().items()))
    macs0, params0 = macs_and_params(original, args)

    with torch.no_grad():
        held_ref = [forward(original, b) for b in held.batches(batch_size)]
    held_ref = [[t.numpy() for t in outs] for outs in held_ref]
    slicing = {n: small_channel_groups([outs[k] for outs in held_ref]) for k, n in enumerate(names)}

    def rows_of(model: nn.Module) -> list:
        with torch.no_grad():
            got = [[t.numpy() for t in forward(model, b)] for b in held.batches(batch_size)]
        return [compare_outputs(n, RUNTIME, [r[k] for r in held_ref], [g[k] for g in got], n == logits, slicing[n])
                for k, n in enumerate(names)]

    def score(model: nn.Module) -> float:
        rows = rows_of(model)
        return goal.value(rows, RUNTIME) if goal else min(lowest(rows, "cosine"))

    # The ratios: uniform, or weighted by sensitivity; scaled to the compute asked for.
    grads = taylor_gradients(train, forward, logits_index, seed) if importance == "taylor" else None
    weights_ = [1.0] * len(structure.groups)
    if allocation == "sensitivity":
        say(f"sensitivity: pruning each of {len(structure.groups)} groups alone")
        probe_args = _tensors(train.take(slice(0, PROBE_SAMPLES)), specs)
        sens = group_sensitivities(original, args, probe_args, structure, ratio or 0.5, round_to, transform,
                                   lambda m, a: transform(m(*a)), say)
        weights_ = ratio_weights(sens)
    if speedup is not None:
        goal_macs = macs0 / speedup
        say(f"searching the ratio that leaves {goal_macs / 1e9:.3g} GMACs ({speedup:g}x fewer than {macs0 / 1e9:.3g})")
        scale, _ = scale_for_macs(original, args, structure, weights_, goal_macs, round_to, transform, say)
    elif allocation == "sensitivity":
        uniform = pruned_copy(original, args, structure, [ratio] * len(structure.groups), "magnitude", round_to,
                              transform)
        goal_macs = macs_and_params(uniform, args)[0]
        del uniform
        scale, _ = scale_for_macs(original, args, structure, weights_, goal_macs, round_to, transform, say)
    else:
        scale = ratio
    ratios = [min(scale * w, MAX_RATIO) for w in weights_]

    say(f"pruning ({importance} importance, {allocation} ratios, mean ratio {np.mean(ratios):.3f})")
    student = pruned_copy(original, args, structure, ratios, importance, round_to, transform, grads)
    _check_outputs(original, student, names, forward=lambda m: transform(m(*args)))
    widths = [(g.kind, g.names[0], b, a)
              for g, b, a in zip(structure.groups, _widths(original, structure), _widths(student, structure))]
    macs1, params1 = macs_and_params(student, args)
    say(f"{params0 / 1e6:.3f} M -> {params1 / 1e6:.3f} M parameters, {macs0 / 1e9:.3g} -> {macs1 / 1e9:.3g} GMACs")

    if recalibrate_batchnorm(student, train, batch_size, forward):
        say("BatchNorm statistics re-estimated on the training samples")
    accuracy_pruned = rows_of(student)
    if lr is None:
        lr = LR_TRANSFORMER if structure.attention else LR_DEFAULT
    say(f"recovery: up to {steps} distillation steps (batch {batch_size}, lr {lr:g})")
    recovery = distill(student, original, train, steps=steps, batch_size=batch_size, lr=lr, forward=forward,
                       score=score, logits_index=logits_index, seed=seed,
                       enough=(lambda v: goal.met(v)) if goal else None, progress=say)
    accuracy = rows_of(student)
    label_accuracy = None
    if held.labels is not None:
        label_accuracy = (_top1(original, held, forward, logits_index, batch_size),
                          _top1(student, held, forward, logits_index, batch_size))
    if goal is not None:
        value = goal.value(accuracy, RUNTIME)
        if not goal.met(value):
            raise TargetMissed(
                f"target {goal} missed on the held-out samples after {recovery.steps} recovery steps: {goal.metric} "
                f"{value:.5g}; prune less (--ratio / --speedup), recover longer (--steps), or give more data (--data, "
                f"--samples)", accuracy)

    say(f"saving {output} (torch.export archive)")
    result_latency = []
    with staged_output(output, error=PruneError, example="model.pt2") as staged:
        _save(student, _export_args(specs, train), specs, staged)
        if latency:
            export_kwargs = {"inputs": inputs, "weights": weights, "trust_pickle": trust_pickle}
            calibration = [b.inputs for b in train.batches(max(1, len(train) // 4))]
            shapes = {s.name: list(s.shape) for s in specs}
            result_latency = measure_latency(staged, os.fspath(spec), export_kwargs, calibration, shapes,
                                             list(latency_batches), latency_runs, threads, say)
    return PruneResult(
        path=os.fspath(output), source=loaded.source, importance=importance, allocation=allocation,
        ratio=float(scale if allocation == "uniform" else np.mean(ratios)), groups=structure.kinds(),
        params=(params0, params1), macs=(macs0, macs1), widths=widths, samples=(len(train), len(held)),
        accuracy_pruned=accuracy_pruned, accuracy=accuracy, recovery=recovery, label_accuracy=label_accuracy,
        target=str(goal) if goal else None, latency=result_latency, seconds=time.perf_counter() - t0)


def _check_options(ratio, speedup, importance, allocation, round_to, samples, holdout, steps, batch_size, lr) -> None:
    if (ratio is None) == (speedup is None):
        raise PruneError("give either --ratio (the share of channels and heads to remove, e.g. 0.3) or --speedup "
                         "(the compute reduction to reach, e.g. 1.5)")
    if ratio is not None and not 0 < ratio <= MAX_RATIO:
        raise PruneError(f"--ratio {ratio:g} must lie in (0, {MAX_RATIO}]: it is the share of each group's channels removed")
    if speedup is not None and not speedup > 1:
        raise PruneError(f"--speedup {speedup:g} must be above 1 (the original's MACs over the pruned model's)")
    if importance not in IMPORTANCES:
        raise PruneError(f"--importance {importance!r} is not one of {', '.join(IMPORTANCES)}")
    if allocation not in ALLOCATIONS:
        raise PruneError(f"--allocation {allocation!r} is not one of {', '.join(ALLOCATIONS)}")
    if round_to is not None and round_to < 1:
        raise PruneError(f"--round-to must be at least 1, got {round_to}")
    if samples < 2 or not 0 < holdout < 1 or steps < 0 or batch_size < 1 or (lr is not None and lr <= 0):
        raise PruneError("--samples must be at least 2, --holdout in (0, 1), --steps >= 0, --batch-size >= 1, --lr > 0")


def _parse_target(target: str | None, logits: str | None) -> Target | None:
    if target is None:
        return None
    try:
        return parse_target(target, logits)
    except OptimizeError as e:
        raise PruneError(str(e)) from None


def _zoo_examples(loaded):
    if loaded.kind != ZOO_KIND:
        return None
    entry = zoo_get(loaded.source)
    if entry.examples is None:
        return None
    module_name, _, attr = entry.examples.partition(":")
    function = getattr(importlib.import_module(module_name, package="optim.models"), attr)
    return lambda seed, batch: function(seed=seed, batch=batch)


def _widths(model: nn.Module, structure) -> list[int]:
    modules = dict(model.named_modules())
    attention = {id(a.query): a for a in structure.attention_in(model)}
    result = []
    for g in structure.groups:
        first = modules[g.names[0]]
        a = next((attention[id(modules[n])] for n in g.names if id(modules[n]) in attention), None)
        if a is not None:
            result.append(a.query.out_features // a.head_dim)
        else:
            result.append(first.out_channels if isinstance(first, nn.modules.conv._ConvNd) else first.out_features)
    return result


def _check_outputs(original, student, names, forward) -> None:
    """The pruned model runs and returns outputs of the original's shapes, or PruneError saying what broke."""
    with torch.no_grad():
        want = forward(original)
        try:
            got = forward(student)
        except Exception as e:  # a reshape by a fixed width optim did not see (an attention it did not recognise)
            raise PruneError(f"the pruned model fails ({type(e).__name__}: {str(e).splitlines()[0]}): it reshapes by "
                             f"a channel or head count optim did not find (attention is recognised by query/key/value, "
                             f"q_proj/k_proj/v_proj or q/k/v projections beside a head-count attribute); please "
                             f"report it") from None
    for n, w, g in zip(names, want, got):
        if w.shape != g.shape:
            raise PruneError(f"pruning changed output {n!r} from {tuple(w.shape)} to {tuple(g.shape)}: the model "
                             f"reshapes with a fixed channel or head count optim did not find; please report it")


def _top1(model, held: Samples, forward, logits_index: int, batch_size: int) -> float:
    with torch.no_grad():
        predicted = np.concatenate([forward(model, b)[logits_index].reshape(len(b), -1).argmax(-1).numpy()
                                    for b in held.batches(batch_size)])
    return float(np.mean(predicted == held.labels))


def _export_args(specs, train: Samples) -> tuple:
    """Arguments to capture the pruned model with: two samples where the first axis is dynamic (torch.export
    specialises an axis of size 1), else as many as the spec's fixed size."""
    first = specs[0]
    count = 2 if 0 in first.dynamic else first.shape[0]
    return _tensors(train.take(np.arange(count) % len(train)), specs)


def _tensors(samples: Samples, specs) -> tuple:
    """The samples' arrays as forward's positional arguments."""
    return tuple(torch.from_numpy(np.ascontiguousarray(samples.inputs[s.name])) for s in specs)


def _save(model: nn.Module, args: tuple, specs, path) -> None:
    try:
        try:
            program = torch.export.export(model, args, dynamic_shapes=torch_dynamic_shapes(specs))
        except torch._dynamo.exc.UserError:
            # Named dims without bounds violate a model's own limits (BERT's 512 positions): let torch.export find
            # each dynamic axis's range (the archive then names them after their inputs).
            auto = tuple({a: torch.export.Dim.DYNAMIC for a in s.dynamic} or None for s in specs)
            program = torch.export.export(model, args, dynamic_shapes=auto)
    except Exception as e:
        raise PruneError(f"torch.export cannot capture the pruned model ({type(e).__name__}: "
                         f"{str(e).splitlines()[0]}); please report it") from None
    torch.export.save(program, str(path))
