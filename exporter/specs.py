"""Input specs: what the exported model takes, parsed from `NAME:DIMS[:DTYPE]` strings.

DIMS is sizes joined by "x" (or "," when a dim name contains an "x"): `x:1x3x224x224`,
`ids:batchx128:int64`, `ids:1,max_len:int64`. A name instead of a size makes that axis dynamic
under that name; its example size is DYNAMIC_EXAMPLE_SIZE. Axes with the same name must have the
same size at run time.

`NAME=VALUE[:DTYPE]` is a 0-d (scalar) tensor input whose example value is VALUE: `sr=16000:int64`,
`gain=0.5`, `enabled=true:bool` (DTYPE defaults to int64, float32 or bool from how VALUE is written).
A Python int/float/bool argument of forward that should not become an input is `--arg` (baked_args.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import ExportError

# The example size of an axis given only by name. Not 1: torch.export may treat a size-1 axis as
# a broadcast (specialising it), and verification resizes every dynamic axis to size + 1 anyway.
DYNAMIC_EXAMPLE_SIZE = 2

# Input dtypes both PyTorch and ONNX Runtime handle, spelled as numpy spells them.
DTYPES = ("float32", "float16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool")

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class InputSpec:
    """One model input: its name, example shape, dtype and dynamic axes ({axis: dim name})."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    dynamic: dict[int, str] = field(default_factory=dict)
    value: bool | int | float | None = None  # the example value of a 0-d input given as NAME=VALUE

    def dims(self) -> list[int | str]:
        """The shape with dynamic axes replaced by their names, as ONNX will show it."""
        return [self.dynamic.get(axis, size) for axis, size in enumerate(self.shape)]

    def __str__(self) -> str:
        if self.value is not None:
            return f"{self.name}={str(self.value).lower() if isinstance(self.value, bool) else self.value}:{self.dtype}"
        dims = [str(d) for d in self.dims()]
        # The form parse_input_spec reads back: commas once a dim name contains an "x".
        sep = "," if any("x" in d for d in dims) else "x"
        return f"{self.name}:{sep.join(dims)}:{self.dtype}"

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": self.dims(), "dtype": self.dtype}


def _parse_scalar_spec(text: str) -> InputSpec:
    """'sr=16000:int64' -> InputSpec('sr', (), 'int64', value=16000)."""
    head, _, dtype = text.partition(":")
    name, _, value_text = head.partition("=")
    if not _NAME.match(name) or not value_text or ":" in dtype:
        raise ExportError(f"bad --input {text!r}: a scalar input is NAME=VALUE[:DTYPE], e.g. sr=16000:int64")
    lowered = value_text.lower()
    try:
        if lowered in ("true", "false"):
            value: bool | int | float = lowered == "true"
        elif re.fullmatch(r"[+-]?\d+", value_text):
            value = int(value_text)
        else:
            value = float(value_text)
    except ValueError:
        raise ExportError(f"bad --input {text!r}: {value_text!r} is not a number or true/false") from None
    dtype = dtype or ("bool" if isinstance(value, bool) else "int64" if isinstance(value, int) else "float32")
    if dtype not in DTYPES:
        raise ExportError(f"bad --input {text!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    kind = "bool" if dtype == "bool" else "float" if dtype.startswith("float") else "int"
    if (kind == "bool") != isinstance(value, bool) or (kind == "int" and not isinstance(value, int)):
        raise ExportError(f"bad --input {text!r}: {value_text!r} does not fit {dtype}")
    return InputSpec(name, (), dtype, {}, value)


def parse_input_spec(text: str) -> InputSpec:
    """'ids:batchx128:int64' -> InputSpec('ids', (2, 128), 'int64', {0: 'batch'}).

    'sr=16000:int64' -> a 0-d input with that example value.
    Raises ExportError with one sentence naming the bad part and the expected form.
    """
    if "=" in text.partition(":")[0]:
        return _parse_scalar_spec(text)
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts):
        raise ExportError(f"bad --input {text!r}: expected NAME:DIMS[:DTYPE], e.g. x:1x3x224x224 or ids:batchx128:int64 "
                          f"(or NAME=VALUE[:DTYPE] for a scalar, e.g. sr=16000:int64)")
    name, dims_text = parts[0], parts[1]
    dtype = parts[2] if len(parts) == 3 else "float32"
    if dtype not in DTYPES:
        raise ExportError(f"bad --input {text!r}: dtype {dtype!r} is not one of {', '.join(DTYPES)}")
    # "x" separates dims unless the text uses commas, which lets a dim name contain an "x".
    tokens = dims_text.split(",") if "," in dims_text else dims_text.split("x")
    shape: list[int] = []
    dynamic: dict[int, str] = {}
    for axis, token in enumerate(tokens):
        if token.isdigit() and int(token) > 0:
            shape.append(int(token))
        elif _NAME.match(token):
            shape.append(DYNAMIC_EXAMPLE_SIZE)
            dynamic[axis] = token
        else:
            raise ExportError(
                f"bad --input {text!r}: dimension {token!r} is neither a positive size nor a name "
                f"(a name such as 'batch' makes the axis dynamic; DIMS look like 1x3x224x224)"
            )
    return InputSpec(name, tuple(shape), dtype, dynamic)


def parse_dynamic_spec(text: str) -> tuple[str, int, str]:
    """'x:0' -> ('x', 0, 'x_dim0'); 'x:0:batch' -> ('x', 0, 'batch'). ExportError on bad text."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not parts[0] or not re.fullmatch(r"-?\d+", parts[1]):
        raise ExportError(f"bad --dynamic {text!r}: expected NAME:AXIS[:DIM_NAME], e.g. x:0 or ids:1:sequence")
    name, axis = parts[0], int(parts[1])
    dim_name = parts[2] if len(parts) == 3 else default_dim_name(name, axis)
    if not _NAME.match(dim_name):
        raise ExportError(f"bad --dynamic {text!r}: dim name {dim_name!r} must be letters, digits and _, not first a digit")
    return name, axis, dim_name


def check_dim_name(name: str) -> str:
    """Returns name if it can name a dynamic dim (a Python identifier, as torch.export requires)."""
    if not _NAME.match(name):
        raise ExportError(f"dynamic dim name {name!r} must be letters, digits and _, not first a digit")
    return name


def default_dim_name(input_name: str, axis: int) -> str:
    """The name a dynamic axis gets when nobody named it: '<input>_dim<axis>' made identifier-safe."""
    base = re.sub(r"\W", "_", input_name)
    return f"{base}_dim{axis}" if _NAME.match(base) else f"input_{base}_dim{axis}"
