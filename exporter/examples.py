"""Example inputs: loading them (.npz or dict), checking them against the input specs, making
random ones, and resizing them along the dynamic axes for the second verification run."""

from __future__ import annotations

import os
import zipfile
from collections.abc import Mapping

import numpy as np

from .errors import ExportError
from .specs import InputSpec

# Integer inputs nobody gave a range for are drawn from [0, 2): valid as token ids, indices,
# masks and flags alike. Real ids need --example-inputs.
DEFAULT_INT_RANGE = (0, 2)


def load_example_inputs(source: str | os.PathLike | Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Arrays by input name from a .npz path or a dict; ExportError for a missing or unreadable file.

    The .npz is read with allow_pickle=False: object arrays would run pickle code.
    """
    if isinstance(source, Mapping):
        return {str(k): np.asarray(v) for k, v in source.items()}
    path = os.fspath(source)
    if not os.path.isfile(path):
        raise ExportError(f"example inputs file {path!r} does not exist")
    try:
        data = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise ExportError(f"example inputs {path!r} are not a readable .npz file ({e})") from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise ExportError(f"example inputs {path!r} hold a single array, not named ones: save them with np.savez(path, x=...)")
    with data:
        try:
            return {k: data[k] for k in data.files}
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise ExportError(f"example inputs {path!r} hold something other than plain arrays ({e})") from None


def specs_from_examples(examples: Mapping[str, np.ndarray]) -> list[InputSpec]:
    """Static input specs with the arrays' names, shapes and dtypes, in the arrays' order."""
    return [InputSpec(name, tuple(int(d) for d in a.shape), a.dtype.name) for name, a in examples.items()]


def match_examples(specs: list[InputSpec], examples: Mapping[str, np.ndarray]) -> list[InputSpec]:
    """Checks the arrays fit the specs (names, dtypes, ranks, static sizes); returns the specs
    with the arrays' sizes on dynamic axes. ExportError names the first input that does not fit."""
    expected = [s.name for s in specs]
    for name in examples:
        if name not in expected:
            raise ExportError(f"example input {name!r} is not one of the model's inputs ({', '.join(expected)})")
    matched = []
    for spec in specs:
        if spec.name not in examples:
            have = ", ".join(examples) or "none"
            raise ExportError(f"the example inputs have no array for input {spec.name!r} (they have {have})")
        a = examples[spec.name]
        if a.dtype.name != spec.dtype:
            raise ExportError(
                f"example input {spec.name!r} is {a.dtype.name} but the model takes {spec.dtype}: "
                f"convert it (array.astype(np.{spec.dtype})) or say :{a.dtype.name} in --input"
            )
        if a.ndim != len(spec.shape) or any(
            axis not in spec.dynamic and size != expected_size
            for axis, (size, expected_size) in enumerate(zip(a.shape, spec.shape))
        ):
            raise ExportError(
                f"example input {spec.name!r} has shape {'x'.join(map(str, a.shape)) or 'scalar'} but the model takes "
                f"{'x'.join(str(d) for d in spec.dims())} (named axes may have any size)"
            )
        matched.append(InputSpec(spec.name, tuple(int(d) for d in a.shape), spec.dtype, dict(spec.dynamic), spec.value))
    return matched


def random_inputs(specs: list[InputSpec], seed: int = 0,
                  int_ranges: Mapping[str, tuple[int, int]] | None = None) -> dict[str, np.ndarray]:
    """Arrays of the specs' example shapes: floats standard normal, integers uniform in
    int_ranges[name] (default DEFAULT_INT_RANGE), bools fair coins; the same for the same seed.
    A scalar spec given with a value (NAME=VALUE) gets that value."""
    rng = np.random.default_rng(seed)
    int_ranges = int_ranges or {}
    feeds = {}
    for spec in specs:
        dt = np.dtype(spec.dtype)
        if spec.value is not None:
            feeds[spec.name] = np.array(spec.value, dtype=dt)
        elif dt.kind == "f":
            feeds[spec.name] = rng.standard_normal(spec.shape).astype(dt)
        elif dt.kind in "iu":
            low, high = int_ranges.get(spec.name, DEFAULT_INT_RANGE)
            feeds[spec.name] = rng.integers(low, high, size=spec.shape, dtype=dt)
        else:
            feeds[spec.name] = rng.integers(0, 2, size=spec.shape).astype(dt)
    return feeds


def resized_sizes(specs: list[InputSpec]) -> dict[str, int]:
    """A new size for every dynamic dim name: the example size + 1 (so 1 -> 2 and 16 -> 17).

    Axes sharing a name get the same new size, as the model requires them to be equal.
    """
    sizes: dict[str, int] = {}
    for spec in specs:
        for axis, dim_name in spec.dynamic.items():
            sizes.setdefault(dim_name, spec.shape[axis] + 1)
    return sizes


def resized_inputs(specs: list[InputSpec], examples: Mapping[str, np.ndarray], seed: int = 1) -> dict[str, np.ndarray]:
    """Inputs with every dynamic axis at its resized_sizes() size and values like the examples'.

    Floats get the example's mean and spread; integers and bools are drawn from the values the
    example holds, so ids stay within the vocabulary and masks stay masks.
    """
    rng = np.random.default_rng(seed)
    sizes = resized_sizes(specs)
    feeds = {}
    for spec in specs:
        a = examples[spec.name]
        shape = tuple(sizes[spec.dynamic[axis]] if axis in spec.dynamic else d for axis, d in enumerate(a.shape))
        if a.dtype.kind == "f":
            mean, std = (float(a.mean()), float(a.std())) if a.size else (0.0, 1.0)
            feeds[spec.name] = (rng.standard_normal(shape) * (std or 1.0) + mean).astype(a.dtype)
        else:
            values = np.unique(a) if a.size else np.zeros(1, a.dtype)
            feeds[spec.name] = rng.choice(values, size=shape).astype(a.dtype)
    return feeds


def describe(feeds: Mapping[str, np.ndarray]) -> str:
    """'x: 2x64 float32, ids: 2x16 int64' for messages."""
    return ", ".join(f"{k}: {'x'.join(map(str, v.shape)) or 'scalar'} {v.dtype.name}" for k, v in feeds.items())
