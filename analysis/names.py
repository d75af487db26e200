"""Kernel names a reader knows: `elementwise mul fp32`, `reduce sum fp32`, `cutlass 256x128 tf32 gemm`,
`nccl SendRecv RING SIMPLE int8` for the demangled names profilers write (which for eight different torch
kernels all end in `vectorized_elementwise_kernel`).

Data first: RULES maps a pattern of the full name to the name's parts (a format of the pattern's groups) and to
a detail told only where two rows of one table would otherwise read the same (`readable_names`); WORDS names a
type or abbreviation the way people say it. A name no rule knows keeps its own function name (template
arguments, parameters and namespaces dropped) and the type of its first template argument.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

SHORT_NAME_MAX = 44  # characters of a readable name; longer ones end in "…"
# a library kernel wrapped in a generic template (`cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>`): its
# first template argument says what it is
GENERIC_KERNELS = frozenset({"Kernel", "Kernel2", "device_kernel", "kernel"})

# how people say a C++ / CUDA type
TYPES = {
    "float": "fp32", "double": "fp64", "half": "fp16", "__half": "fp16", "c10::Half": "fp16", "at::Half": "fp16",
    "c10::BFloat16": "bf16", "at::BFloat16": "bf16", "__nv_bfloat16": "bf16", "__nv_fp8_e4m3": "fp8",
    "long": "int64", "int64_t": "int64", "int": "int32", "int32_t": "int32", "unsigned int": "uint32",
    "short": "int16", "int8_t": "int8", "char": "int8", "uint8_t": "uint8", "bool": "bool",
    "float2": "complex64", "double2": "complex128", "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128",
}
# ... and a library's abbreviation (applied to every captured group)
WORDS = {
    **TYPES, "f32": "fp32", "f64": "fp64", "f16": "fp16", "f8": "fp8", "e4m3": "fp8", "e5m2": "fp8",
    "s8": "int8", "i8": "int8", "u8": "uint8",
    # the letter of a cuBLAS / CUTLASS / cuDNN kernel: its data type (s1688: fp32 data on TF32 tensor cores)
    "s": "fp32", "d": "fp64", "h": "fp16", "c": "complex64", "gc": "complex64", "z": "complex128",
    "s1688": "tf32", "s884": "fp32", "h1688": "fp16", "h16816": "fp16", "h884": "fp16", "d884": "fp64",
    "i8816": "int8", "i16832": "int8",
    # torch's elementwise kernels: their variant, an operand that is a scalar
    "vectorized": "vec", "elementwise": "strided", "AUnaryFunctor": "scalar first", "BUnaryFunctor": "scalar second",
    "OnSelf": "scalar first", "OnOther": "scalar second",
    # Inductor's kernel kinds (triton_poi_fused_...)
    "poi": "pointwise", "red": "reduction", "per": "persistent reduction", "tem": "template",
    # torch functors and ops whose name is not the op's
    "direct_copy": "copy", "compare_scalar": "compare", "clamp_scalar": "clamp", "CUDAFunctor_add": "add",
}

_NS = r"(?:[\w]+::|\(anonymous namespace\)::|<unnamed>::)*"  # namespaces
_TYPE = r"[\w:]+(?:<\w+>)?"  # a template argument that is a type
_WRAPPERS = r"(?!(?:AUnary|BUnary|Binary|Unary|CUDA)Functor\b)"  # torch functors that wrap the op's functor
# torch's elementwise kernels: vectorized (of a width), unrolled, or the general one over strided tensors
_ELEMENTWISE = (r"\b(?:(?P<kind__1>vectorized)_elementwise_kernel<(?:\(int\))?(?P<width>\d+)|(?P<kind__2>unrolled)"
                r"_elementwise_kernel|(?P<kind__3>elementwise)_kernel)")

# (pattern searched in the full name, name, detail): the first rule that matches names the kernel. Groups named
# `x__1`, `x__2` are alternatives of group `x`; an `op` is said in lower case; an absent group says nothing.
RULES = tuple((re.compile(p), name, detail) for p, name, detail in (
    # NCCL: ncclKernel_<coll>_<algo>_<proto>_<redop>_<type> (up to 2.18), ncclDevKernel_<coll>_<redop>_<type>_
    # <algo>_<proto> (2.19 on)
    (r"ncclKernel_(?P<coll>[A-Za-z]+)_(?P<algo>[A-Z]+(?:_[A-Z]+)*?)_(?P<proto>LL128|LL|SIMPLE)_(?P<redop>[A-Za-z]+)"
     r"_(?P<dtype>\w+?)(?:\(|$)", "nccl {coll} {algo} {proto} {dtype}", "{redop}"),
    (r"ncclDevKernel_(?P<coll>[A-Za-z]+)_(?P<redop>[A-Za-z]+)_(?P<dtype>[a-z]+\d*)_(?P<algo>[A-Z]+(?:_[A-Z]+)*?)_"
     r"(?P<proto>LL128|LL|SIMPLE)\b", "nccl {coll} {algo} {proto} {dtype}", "{redop}"),
    (r"nccl(?:Dev)?Kernel_(?P<coll>[A-Za-z]+)", "nccl {coll}", ""),
    # torch's TensorIterator kernels: the op from its functor (MulFunctor<float>, CUDAFunctor_add<float>) or
    # from the function whose lambda it is (exp_kernel_cuda(...)::{lambda(float)...}); the detail: the
    # kernel's variant, and whether one operand is a scalar
    (_ELEMENTWISE + r".*?(?:(?P<scalar>[AB]UnaryFunctor)<.*?)?" + _NS
     + r"(?:CUDAFunctor(?P<scalar__2>OnSelf|OnOther)?_(?P<op__1>\w+?)|\b" + _WRAPPERS
     + r"(?P<op__2>[A-Z]\w*?)Functor)<(?P<dtype>" + _TYPE + r")[,>]",
     "elementwise {op} {dtype}", "{scalar} {kind}{width}"),
    (_ELEMENTWISE + r".*?\bat::native::" + _NS + r"(?:launch_)?(?P<op>[a-z]\w*?)(?:_kernel)?(?:_cuda|_impl)?"
     r"(?:<\w+>)?\(at::TensorIterator.*?\{lambda\((?:[\w:]+, )*(?P<dtype>[\w:]+)\)#\d+\}", "elementwise {op} {dtype}",
     "{kind}{width}"),
    # the name cut short (ncu's text output): the op, and maybe only its first letters
    (_ELEMENTWISE + r", (?:void )?at::native::" + _NS + r"(?:launch_)?(?P<op>[a-z]\w*?(?:…|(?=(?:_kernel)?(?:_cuda)?"
     r"\()))", "elementwise {op}", "{kind}{width}"),
    (_ELEMENTWISE, "elementwise", "{kind}{width}"),
    (r"index_elementwise_kernel<", "index", ""),
    (r"reduce_kernel<.*?ReduceOp<(?P<dtype>[\w:]+), " + _NS + r"(?:func_wrapper_t<[\w:]+, " + _NS
     + r"(?P<op__1>[a-z]\w*?)_(?:functor|kernel)|(?P<op__2>[A-Z][a-z]\w*?)Ops<)", "reduce {op} {dtype}", ""),
    (r"reduce_kernel<.*?ReduceOp<(?P<dtype>[\w:]+)", "reduce {dtype}", ""),
    (r"multi_tensor_apply_kernel<.*?\b(?P<op>\w+?)Functor<(?P<dtype>\w+)", "multi-tensor {op} {dtype}", ""),
    (r"(?P<kind>Broadcast|Elementwise)Kernel<" + _NS + r"(?P<op>\w+?)Functor<(?P<dtype>\w+)>",
     "elementwise {op} {dtype}", "{kind}"),
    # CUTLASS 2: cutlass_80_tensorop_[<in>_]<acc letter><mma>gemm_..._<tile>_<k>x<stages>_<layout>_align<n>
    (r"cutlass_\d+_(?:wmma_)?(?:tensorop|simt)_(?:(?P<dtype__1>bf16|f16|f32|tf32|e4m3|e5m2|s8|u8)_)?"
     r"(?P<dtype__2>[shdczi]\d*)(?P<kind>gemm|fprop|dgrad|wgrad)\w*?_(?P<tile>\d+x\d+)_(?P<stages>\d+x\d+)_"
     r"(?P<layout>[nt]{2,3})_align(?P<align>\d+)", "cutlass {tile} {dtype} {kind}", "{layout} {stages} align{align}"),
    # CUTLASS 3: cutlass3x_sm100_tensorop_s64x256x32gemm_f8_f8_..._<tile>x<k>_<cluster>_<n>_<layout>_align<n>
    (r"cutlass3x_sm\d+_(?:tensorop|simt)_[a-z]+[\dx]+(?P<kind>gemm)_(?P<dtype>[a-z]+\d*)_\w*?_(?P<tile>\d+x\d+)x\d+_"
     r"\d+x\d+x\d+_\d+_(?P<layout>[nt]{2,3})_align(?P<align>\d+)", "cutlass {tile} {dtype} {kind}",
     "{layout} align{align}"),
    # cuBLAS: ampere_sgemm_128x64_nn, ampere_bf16_s16816gemm_bf16_128x128_..._tn, sm90_xmma_gemm_bf16bf16_..._
    # tilesize128x256x64_...; cuDNN: ampere_scudnn_winograd_128x128_..., sm80_xmma_fprop_implicit_gemm_tf32f32_...
    (r"^(?:void )?(?:maxwell|pascal|volta|turing|ampere|hopper|blackwell|sm\d+)_(?:(?P<dtype__1>bf16|fp16|f16|tf32"
     r"|int8)_)?(?P<dtype__2>[shdcz]\d*|gc)gemm\w*?_(?P<tile>\d+x\d+)(?:_(?P<rest>\w+?))?_(?P<layout>[nt]{2})\b",
     "cublas {tile} {dtype} gemm", "{layout} {rest}"),
    (r"sm\d+_xmma_(?P<pass>fprop|dgrad|wgrad)\w*?_(?P<dtype>(?:tf|bf|f|fp|s|i)\d+)\w*?_tilesize(?P<tile>\d+x\d+)"
     r"x\d+\w*?_(?P<lib>cudnn)", "cudnn {tile} {dtype} conv {pass}", ""),
    (r"sm\d+_xmma_gemm_(?P<dtype>(?:tf|bf|f|fp|s|i)\d+)\w*?_(?P<layout>[nt]{2})_\w*?tilesize(?P<tile>\d+x\d+)x\d+",
     "cublas {tile} {dtype} gemm", "{layout}"),
    (r"(?:maxwell|pascal|volta|turing|ampere|hopper|sm\d+)_(?P<dtype>[shd])cudnn_(?P<algo>winograd)_(?P<tile>\d+x\d+)",
     "cudnn {tile} {dtype} winograd conv", ""),
    (r"(?:maxwell|pascal|volta|turing|ampere|hopper|sm\d+)_(?P<dtype>[shd])cudnn_(?P<tile>\d+x\d+)_(?P<rest>\w+?)"
     r"_(?P<layout>[nt]{2})_v\d", "cudnn {tile} {dtype} conv", "{rest} {layout}"),
    (r"xmma_new::gemm::kernel<xmma_new::implicit_gemm::(?P<pass>\w+)::.*?_(?P<dtype>[a-z]+\d+)_traits.*?Cta_tile<"
     r"[\w:]+, (?P<m>\d+), (?P<n>\d+)", "cudnn {m}x{n} {dtype} conv {pass}", ""),
    (r"implicit_convolve_(?P<dtype>[shd])gemm", "cudnn {dtype} implicit-gemm conv", ""),
    (r"\bgemv(?P<layout>\w*?)_kernel\w*<(?:[\w()]+, ){2}(?P<dtype>\w+)", "cublas gemv {dtype}", "{layout}"),
    # Inductor's Triton kernels: triton_<kind>_fused_<ops>_<n>
    (r"^triton_(?P<kind>poi|red|per|tem)_(?:fused_)?(?P<ops>\w+?)_(?P<n>\d+)$", "triton {kind} {ops}", "{n}"),
))

_GROUP = re.compile(r"\{(\w+)\}")
_NUMBER = re.compile(r"(?:\(\w+\))?(?:\d+u?l?|true|false)")  # a template argument that is a value: `(int)4`, `1ul`


def short_name(name: str) -> str:
    """A readable kernel name (see the module's doc), at most SHORT_NAME_MAX characters."""
    return _cut(_parts(name)[0])


def readable_names(names: Sequence[str]) -> list[str]:
    """The readable names of the rows of one table: where two different kernels would read the same, each
    says its detail (`cutlass 256x128 tf32 gemm (nn 32x3 align1)`), and where that does not tell them apart
    either, its place among them (`[2]`, in the table's order; a hash and a number would read as an issue
    in Markdown)."""
    parts = [_parts(str(n)) for n in names]
    plain = [_cut(p[0]) for p in parts]
    counts = Counter(plain)
    detailed = [_cut(f"{p[0]} ({p[1]})" if counts[s] > 1 and p[1] else p[0]) for p, s in zip(parts, plain)]
    counts = Counter(detailed)
    seen: Counter = Counter()
    out = []
    for name in detailed:
        if counts[name] > 1:
            seen[name] += 1
            suffix = f" [{seen[name]}]"
            name = _cut(name, SHORT_NAME_MAX - len(suffix)) + suffix
        out.append(name)
    return out


def _parts(name: str) -> tuple[str, str]:
    """(name, detail) of a full kernel name."""
    for pattern, template, detail in RULES:
        match = pattern.search(name)
        if match:
            groups = _groups(match)
            return _fill(template, groups), _fill(detail, groups)
    base = _function(name)
    if base in GENERIC_KERNELS:  # `cutlass::Kernel<cutlass_80_tensorop_s1688gemm_...>`: its argument says
        argument = _template_arguments(name)
        if argument:
            return _parts(argument[0])
    arguments = _template_arguments(name)
    dtype = next((TYPES[a] for a in arguments if a in TYPES), "")
    numbers = [a.split(")")[-1] for a in arguments if _NUMBER.fullmatch(a)]  # variants of one template
    return " ".join(filter(None, (base, dtype))), ", ".join(numbers)


def _groups(match: re.Match) -> dict[str, str]:
    """A match's groups as words: alternatives `x__1`, `x__2` merged into `x`, each value said as WORDS says it,
    an op in lower case, underscores of a list of ops (Inductor's) as spaces."""
    out: dict[str, str] = {}
    for key, value in match.groupdict().items():
        key = key.split("__")[0]
        if value is None or out.get(key):
            out.setdefault(key, "")
            continue
        value = WORDS.get(value, value)
        out[key] = value.lower() if key == "op" else value.replace("_", " ") if key == "ops" else value
    return out


def _fill(template: str, groups: dict[str, str]) -> str:
    return " ".join(_GROUP.sub(lambda m: groups.get(m.group(1), ""), template).split())


def _cut(text: str, limit: int = SHORT_NAME_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _function(name: str) -> str:
    """The function's own name: template arguments, parameter lists, return type and namespaces dropped.

    `void at::native::(anonymous namespace)::max_pool_forward_nchw<float, float>(int, ...)` ->
    `max_pool_forward_nchw`; a name without a signature stays as it is.
    """
    kept, depth = [], 0
    for i, ch in enumerate(name):
        if ch in "<(":
            depth += 1
        elif ch in ">)" and depth and not (ch == ">" and name[i - 1] == "-"):  # "->" closes nothing
            depth -= 1
        elif depth == 0:
            kept.append(ch)
    words = "".join(kept).split()
    parts = [p for p in words[-1].split("::") if p] if words else []
    return parts[-1] if parts else name.strip()


def _template_arguments(name: str) -> list[str]:
    """`ns::Kernel<A<x>, B>(...)` -> [`A<x>`, `B`]: the top-level arguments of the name's first template."""
    start = name.find("<")
    if start < 0:
        return []
    depth, begin, out = 0, start + 1, []
    for i in range(start, len(name)):
        if name[i] in "<(":
            depth += 1
        elif name[i] in ">)" and name[i - 1] != "-":
            depth -= 1
            if depth == 0:
                return [a for a in (*out, name[begin:i].strip()) if a]
        elif name[i] == "," and depth == 1:
            out.append(name[begin:i].strip())
            begin = i + 1
    return [a for a in out if a]
