"""What every op model shares: the dtypes a trace names (DTYPES, their precision and size), a trace's recorded
arguments of one op call (Args: "Input Dims", "Input type", "Concrete Inputs", "Input Strides"), what a model
gives (OpWork), and torch's type promotion.

Bytes are ALGORITHMIC: each tensor an op reads and each it writes, once, elements x dtype size:
- outputs are not in a trace: their shape is the op's (broadcast of the operands; the reduced shape), their
  dtype torch's type promotion (`promote`) or the op's dtype argument;
- an in-place op (`add_`) reads and writes `self`: both are counted; `fill_`/`zero_`/`copy_` only write it;
- a 0-dim operand is a value the kernel gets as an argument (a wrapped Python number, a CPU scalar), not
  memory it streams: it takes part in type promotion, not in the bytes; a Scalar is no tensor at all;
- an operand broadcast by stride 0 (recorded "Input Strides") is read once per distinct element;
- gathers read what they gather (embedding: the looked-up rows, not the table).
A tensor list's element dtype is not in a trace (torch.profiler records "TensorList" and each element's
shape; older versions not even the shapes): LIST_DTYPE is assumed, and OpWork.assumed says so.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class OpWork:
    flops: float
    precision: str | None  # the input dtype in ceilings' names (fp64, fp32, fp16, bf16, fp8, int8); None: other
    bytes: float | None  # algorithmic; None where a tensor's dtype size is unknown
    assumed: str | None = None  # an assumption the numbers rest on (LIST_NOTE), else None


# "Input type" string (caffe2 TypeMeta name) -> (precision, bytes per element). Precision names the dtype as
# ceilings names its peaks (fp16, tensor.fp16...); whether a tensor core ran it, and TF32 for fp32, is not in
# a trace. Dtypes without a roof of their own have no precision but a size, for the bytes of masks and indices.
DTYPES: dict[str, tuple[str | None, int]] = {
    "double": ("fp64", 8),
    "float": ("fp32", 4),
    "c10::Half": ("fp16", 2),
    "c10::BFloat16": ("bf16", 2),
    "c10::Float8_e4m3fn": ("fp8", 1),
    "c10::Float8_e5m2": ("fp8", 1),
    "c10::Float8_e4m3fnuz": ("fp8", 1),
    "c10::Float8_e5m2fnuz": ("fp8", 1),
    "signed char": ("int8", 1),
    "unsigned char": (None, 1),
    "bool": (None, 1),
    "short int": (None, 2),
    "int": (None, 4),
    "long int": (None, 8),
    "c10::complex<c10::Half>": (None, 4),
    "c10::complex<float>": (None, 8),
    "c10::complex<double>": (None, 16),
}
ALIASES = {"long": "long int"}  # older traces (torch 1.x) write int64 so
# torch's names of dtypes (torch.float32 is "float32") -> the "Input type" a trace writes for them
TORCH_TYPES = {"float32": "float", "float64": "double", "float16": "c10::Half", "bfloat16": "c10::BFloat16",
               "float8_e4m3fn": "c10::Float8_e4m3fn", "float8_e5m2": "c10::Float8_e5m2", "int8": "signed char",
               "uint8": "unsigned char", "bool": "bool", "int16": "short int", "int32": "int", "int64": "long int",
               "complex64": "c10::complex<float>", "complex128": "c10::complex<double>"}
# c10's ScalarType names, as record_param_comms writes a collective's "dtype" ("BFloat16", "Long")
SCALAR_NAMES = {"Double": "double", "Float": "float", "Half": "c10::Half", "BFloat16": "c10::BFloat16",
                "Float8_e4m3fn": "c10::Float8_e4m3fn", "Float8_e5m2": "c10::Float8_e5m2", "Char": "signed char",
                "Byte": "unsigned char", "Bool": "bool", "Short": "short int", "Int": "int", "Long": "long int"}
FLOATING = ("fp64", "fp32", "fp16", "bf16", "fp8")
# c10::ScalarType codes, as "Concrete Inputs" records a dtype argument (torch.float32 is "6")
SCALAR_TYPES = {0: "unsigned char", 1: "signed char", 2: "short int", 3: "int", 4: "long int", 5: "c10::Half",
                6: "float", 7: "double", 11: "bool", 15: "c10::BFloat16", 23: "c10::Float8_e5m2",
                24: "c10::Float8_e4m3fn"}
# the "Input type" of arguments that are no tensor
NOT_TENSORS = ("", "Scalar", "ScalarList", "TensorList", "GenericList")
# a tensor list's elements: fp32, the dtype of optimizer states and of the parameters AMP trains
LIST_DTYPE = "float"
LIST_NOTE = "tensor-list dtypes are not in a trace: taken as fp32"
STAT_DTYPE = "float"  # the saved mean/rstd of norms of half and fp32 inputs (their accumulate type)

Tensor = tuple[list[int], str]  # shape, "Input type"


@dataclass(frozen=True)
class Derived:
    """What a trace did not record of one op call (torch <= 1.11 records no "Concrete Inputs", and no trace
    records outputs) but other events of it show (analysis.readers.torch_derive): argument values by
    position, the output's shape, and the note saying so (the OpWork's `assumed`)."""

    note: str
    values: Mapping[int, object] = field(default_factory=dict)
    output: tuple[int, ...] | None = None


@dataclass(frozen=True)
class Args:
    """One cpu_op's recorded arguments: "Input Dims", "Input type", "Concrete Inputs" (None: not recorded,
    older PyTorch) and "Input Strides" (None: not recorded)."""

    dims: Sequence
    types: Sequence
    concrete: Sequence | None
    convention: str = "executed"  # of analysis.ops.matrix.FLOP_CONVENTIONS
    strides: Sequence | None = None
    # per argument, a TensorList's element dtype where the recorder knows it (analysis.predict); None: a trace
    list_types: Sequence | None = None
    derived: Derived | None = None

    def tensor(self, i: int | None) -> Tensor | None:
        """Shape and type of argument i; None where there is none (an omitted optional is typed "")."""
        if i is None or i >= len(self.types) or i >= len(self.dims) or self.types[i] == "":
            return None
        return list(self.dims[i]), ALIASES.get(self.types[i], self.types[i])

    def operand(self, i: int | None) -> Tensor | None:
        """Argument i if it is a tensor (not a Scalar, a list or an omitted optional)."""
        if i is None or i >= len(self.types) or self.types[i] in NOT_TENSORS:
            return None
        return self.tensor(i)

    def value(self, i: int | None):
        """Argument i's recorded value, read as JSON (ints, floats, lists, Python's True/False); else the value
        derived from other events; None where neither is known."""
        if i is None:
            return None
        if self.concrete is None or i >= len(self.concrete) or self.concrete[i] == "":
            return self.derived.values.get(i) if self.derived is not None else None
        written = self.concrete[i]
        if not isinstance(written, str):  # a damaged event (profilers write text): the value is not known
            return None
        try:
            return json.loads(written.replace("True", "true").replace("False", "false"))
        except (ValueError, RecursionError):  # not JSON, or nested past the parser: not a value it recorded
            return None

    def omitted(self, i: int) -> bool:
        """Argument i was recorded as None (an omitted optional): its type is "" in a trace with Concrete
        Inputs. Older traces type unrecorded lists "" too, so without Concrete Inputs nothing is omitted."""
        return self.concrete is not None and i < len(self.types) and self.types[i] == ""

    def read(self, i: int) -> int | None:
        """Bytes of argument i read once: its distinct elements (a stride-0 dimension is one element) x dtype
        size; 0 for a 0-dim or no tensor; None for a dtype of unknown size."""
        t = self.operand(i)
        if t is None or not t[0]:
            return 0
        shape, dtype = t
        strides = self.strides[i] if self.strides is not None and i < len(self.strides) else None
        if isinstance(strides, list) and len(strides) == len(shape):
            shape = [n for n, s in zip(shape, strides) if s != 0]
        return size_of(shape, dtype)

    def elements(self, k: int) -> Args:
        """The arguments of element k of an op on tensor lists (_foreach_*): each TensorList its k-th tensor
        (of the list's dtype), each ScalarList its k-th value; the other arguments as they are."""
        dims, types, concrete, strides = list(self.dims), list(self.types), \
            list(self.concrete) if self.concrete is not None else None, \
            list(self.strides) if self.strides is not None else None
        for i, kind in enumerate(self.types):
            if kind == "TensorList":
                dims[i], types[i] = self.dims[i][k], self.list_dtype(i)
                if strides is not None and i < len(strides) and isinstance(strides[i], list) and k < len(strides[i]):
                    strides[i] = strides[i][k]
            elif kind == "ScalarList" and isinstance(values := self.value(i), list) and k < len(values):
                types[i] = "Scalar"
                if concrete is not None:
                    concrete[i] = json.dumps(values[k])
        return Args(dims, types, concrete, self.convention, strides, derived=self.derived)

    def list_dtype(self, i: int) -> str:
        """The element dtype of TensorList argument i: the recorder's, else LIST_DTYPE (a trace has none)."""
        known = self.list_types[i] if self.list_types is not None and i < len(self.list_types) else None
        return ALIASES.get(known, known) if known else LIST_DTYPE

    def lists_assumed(self) -> str | None:
        """LIST_NOTE where a TensorList argument's dtype was not recorded, else None."""
        unknown = [i for i, kind in enumerate(self.types) if kind == "TensorList"
                   and not (self.list_types is not None and i < len(self.list_types) and self.list_types[i])]
        return LIST_NOTE if unknown else None

    def list_length(self) -> int | None:
        """How many tensors the op's first argument, a tensor list, holds; None where its shapes were not
        recorded (older traces record [] for a list)."""
        first = self.dims[0] if self.dims and self.types and self.types[0] == "TensorList" else None
        return len(first) if first and all(isinstance(d, list) for d in first) else None


# every name above, lower case (traces differ in case and in a "torch." prefix) -> the "Input type" name
_ANY_NAME = {name.lower(): dtype for names in ({d: d for d in DTYPES}, ALIASES, TORCH_TYPES, SCALAR_NAMES)
             for name, dtype in names.items()}


def itemsize(name) -> int | None:
    """Bytes of one element of a dtype named as any trace or torch names it ("Input type", c10's ScalarType
    name, torch's); None for a name none of them has."""
    dtype = _ANY_NAME.get(str(name).lower().removeprefix("torch."))
    return DTYPES[dtype][1] if dtype else None


def size_of(shape: Sequence[int], dtype: str) -> int | None:
    return math.prod(shape) * DTYPES[dtype][1] if dtype in DTYPES else None


def total_of(*parts: int | None) -> float | None:
    """Bytes summed; None when any part is unknown."""
    return None if any(p is None for p in parts) else float(sum(parts))


def precision_of(dtype: str | None) -> str | None:
    return DTYPES[dtype][0] if dtype in DTYPES else None


def flops_of(per_element: float, elements: int, dtype: str | None) -> float:
    """FLOPs of floating-point work; integer and bool work is none."""
    return float(per_element * elements) if precision_of(dtype) in FLOATING else 0.0


def broadcast(shapes: Sequence[Sequence[int]]) -> list[int] | None:
    """The broadcast of `shapes` (numpy's rule); None where they do not broadcast."""
    width = max((len(s) for s in shapes), default=0)
    out = [1] * width
    for shape in shapes:
        for i, n in enumerate([1] * (width - len(shape)) + list(shape)):
            if n != out[i] and 1 not in (n, out[i]):
                return None
            out[i] = n if out[i] == 1 else out[i]
    return out


# --- type promotion (torch.result_type) ------------------------------------------------------------------

def category(dtype: str) -> int:
    """0 bool, 1 integer, 2 floating, 3 complex."""
    return 0 if dtype == "bool" else 3 if "complex" in dtype else 2 if precision_of(dtype) in FLOATING else 1


def _promote2(a: str | None, b: str | None) -> str | None:
    """torch.promote_types for the dtypes of a trace: the higher category wins, within one the larger size;
    fp16 with bf16 (and any equal-size pair of floats) is fp32, equal-size integers of two kinds the next size."""
    if a is None or b is None or a == b:
        return a or b
    ca, cb = category(a), category(b)
    if ca != cb:
        return a if ca > cb else b
    sa, sb = DTYPES.get(a, (None, 0))[1], DTYPES.get(b, (None, 0))[1]
    if sa != sb:
        return a if sa > sb else b
    return "float" if ca == 2 else "short int" if sa == 1 else a


def _combine(higher: str | None, lower: str | None) -> str | None:
    """c10's combine_categories: a lower-priority operand (0-dim, then Python number) changes the result only
    when its category is higher: int tensor * 0.5 is float, float tensor * double 0-dim stays float."""
    if higher is None or lower is None:
        return higher or lower
    if category(higher) >= 2:
        return higher
    if higher == "bool" or category(lower) >= 2:
        return _promote2(higher, lower)
    return higher


def _wrapped(text) -> str | None:
    """The dtype a Python number argument takes part in promotion as (its default dtype); None: unknown."""
    if isinstance(text, bool):
        return "bool"
    if isinstance(text, int):
        return "long int"
    return "float" if isinstance(text, float) else None


def promote(x: Args, positions: Sequence[int]) -> str | None:
    """torch.result_type of the arguments at `positions`: dimensioned tensors first, then 0-dim tensors, then
    Python numbers (a Scalar whose value was not recorded takes no part)."""
    dims = zero = wrapped = None
    for i in positions:
        t = x.operand(i)
        if t is not None:
            if t[0]:
                dims = _promote2(dims, t[1])
            else:
                zero = _promote2(zero, t[1])
        elif i < len(x.types) and x.types[i] == "Scalar":
            wrapped = _promote2(wrapped, _wrapped(x.value(i)))
    return _combine(dims, _combine(zero, wrapped))


def dtype_arg(x: Args, at: Mapping[int, int], default: str | None) -> str | None:
    """The dtype a dtype argument names (its position by the overload's argument count), `default` when it
    was passed as None; None when not recorded, or for an overload not in `at`."""
    i = at.get(len(x.types))
    if i is None:
        return None
    t = x.operand(i)
    if t is not None:  # to(other): the other tensor's dtype
        return t[1]
    if i < len(x.types) and x.types[i] == "":  # a dtype given is typed "Scalar", in older traces too
        return default
    code = x.value(i)
    return SCALAR_TYPES.get(code) if isinstance(code, int) else None
