"""From raw ncu metrics (base units, one row per launch) to FLOPs, bytes, time and rates.

Every derived quantity is missing (NaN) when the metrics it needs are absent: never 0.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from ceilings.lazy import lazy
from common.errors import listed

from .readers.contract import COMMUNICATION

np = lazy("numpy")
pd = lazy("pandas")

SECTOR_BYTES = 32  # DRAM, L2 and L1 sectors are 32 bytes on every architecture ncu supports

# Section-layout labels and pre-2020 metric names -> the metric they print (SpeedOfLight/LaunchStats sections).
METRIC_ALIASES = {
    "Duration": "gpu__time_duration.sum",
    "SM Frequency": "sm__cycles_elapsed.avg.per_second",
    "DRAM Frequency": "dram__cycles_elapsed.avg.per_second",
    "Block Size": "launch__block_size",
    "Grid Size": "launch__grid_size",
    "# SMs": "launch__sm_count",  # Launch Statistics: the SMs the launch had (a GPU fact, analysis.ncu.GPU_FACTS)
    "gpu__time_duration": "gpu__time_duration.sum",  # 2019 raw page
    "dram__read_bytes": "dram__bytes_read.sum",
    "dram__write_bytes": "dram__bytes_write.sum",
    "dram__read_sectors": "dram__sectors_read.sum",
    "dram__write_sectors": "dram__sectors_write.sum",
    "gpc__frequency": "gpc__cycles_elapsed.avg.per_second",
    "sm__elapsed_cycles_avg": "sm__cycles_elapsed.avg",
    "Elapsed Cycles": "gpc__cycles_elapsed.max",  # SpeedOfLight section
}

# FLOPs of one warp-level tensor instruction, only where the compute capability leaves one SASS shape: sm_70
# and sm_72 have HMMA.884 alone (2 x 8 x 8 x 4 x 4 quad-pairs = 512, NERSC's x512 rule), sm_80 has DMMA.884
# alone for FP64. Elsewhere one instruction is 2048 or 4096 FLOPs (HMMA.1688 / .16816) or any HGMMA.64xNx16:
# no constant is right, so the FLOPs are missing unless the sm__ops_path_tensor_* counters are collected.
# See ../shared/notes/tensor-flops.md and docs/ncu-ingestion.md.
HMMA_FLOPS_PER_INST = {"7.0": 512, "7.2": 512}
DMMA_FLOPS_PER_INST = {"8.0": 512}
# The counters that count tensor FLOPs themselves (one op = one FLOP: a 4096^3 FP8 GEMM on B300 gives
# 2 x 4096^3 in sm__ops_path_tensor_op_utcqmma_src_fp8_dst_fp32.sum). Names by architecture:
# sm__ops_path_tensor_src_<t>[_dst_<t>], ..._op_<hmma|hgmma|imma|utcqmma|...>_src_..., with _sparsity_on/off
# and _realtime variants; a name without the op or sparsity part is the sum of the names with it.
TENSOR_OPS = re.compile(r"^sm__ops_path_tensor(?:_op_(?P<op>[a-z0-9]+))?_src_(?P<src>[a-z0-9]+(?:_[a-z0-9]+)*?)"
                        r"(?:_dst_(?P<dst>[a-z0-9]+(?:_[a-z0-9]+)*?))?(?:_sparsity_(?P<sparsity>on|off))?"
                        r"(?P<realtime>_realtime)?\.sum$")  # multi-part types: src_fp4_fp6_dst_fp32
INTEGER_TYPES = ("int", "uint", "s", "u", "b1")  # prefixes of integer source types: int8, int4, s8, u4, b1
# HFMA2.MMA register moves: one warp instruction on the tensor pipe is 32 hfma thread instructions
WARP_THREADS = 32
PHANTOM_NOTE = ("hfma thread instructions = 32 x tensor-pipe instructions that are not HMMA/IMMA/DMMA: the "
                "signature of HFMA2.MMA register moves (a compiler idiom of FP32 GEMMs), not arithmetic")

# FLOPs per counted thread instruction: an FMA is 2, add and mul 1. For fp16, ncu's sass_thread_inst
# metrics count a packed HFMA2/HADD2/HMUL2 once per thread (thread-instruction counters; see
# docs/ncu-ingestion.md), the same convention as ncu's own half-precision roofline (2 x hfma): so
# flops_fp16 is a lower bound, by up to 2x for fully packed half2 code.
FMA_FLOPS = 2

PRECISIONS = {"fp64": ("dfma", "dadd", "dmul"), "fp32": ("ffma", "fadd", "fmul"), "fp16": ("hfma", "hadd", "hmul")}
# the tensor-pipe instruction total, then its hmma, imma and dmma parts
TENSOR_METRICS = ("sm__inst_executed_pipe_tensor.sum",
                  *(f"sm__inst_executed_pipe_tensor_op_{op}.sum" for op in ("hmma", "imma", "dmma")))
HFMA_METRIC = "sm__sass_thread_inst_executed_op_hfma_pred_on.sum"
# ncu's count of HFMA2.MMA warp instructions (part of the hmma breakdown), where collected
HFMA2_MMA_METRIC = "sm__inst_executed_pipe_tensor_op_hmma_type_hfma2.sum"

OUTPUT_COLUMNS = ["kernel", "launches", "time_s", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor",
                  "flops", "dram_bytes", "l2_bytes", "l1_bytes", "ai_dram", "ai_l2", "ai_l1", "flop_per_s",
                  "dram_bytes_per_s", "sm_clock_hz", "ops_tensor_int", "alg_bytes", "tensor_type", "coverage",
                  "comm_bytes"]
# tensor_type: the input type of flops_tensor where the profile says it (ops counters, a rule's instruction,
# a torch op's dtype), for the roof of that type; empty when unknown or mixed. coverage: the share of the
# row's time in launches whose FLOPs are known (1: all; 0: none; missing: FLOPs and bytes known on different
# launches), its rates over those launches.
# summed over launches; ops_tensor_int: integer tensor operations (IMMA), which are not FLOPs; alg_bytes:
# algorithmic bytes of framework operators (inputs + outputs, from shapes): a lower bound of DRAM traffic;
# comm_bytes: a collective's bus bytes over the interconnect (analysis.readers.collectives)
EXTENSIVE = ["time_s", "flops_fp64", "flops_fp32", "flops_fp16", "flops_tensor", "flops",
             "dram_bytes", "l2_bytes", "l1_bytes", "ops_tensor_int", "alg_bytes", "comm_bytes"]
# metrics that time a launch or describe it: two passes over the same launches may both hold them
TIME_METRICS = ("gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
                "smsp__cycles_elapsed.avg", "smsp__cycles_elapsed.avg.per_second", "gpc__cycles_elapsed.max",
                "gpc__cycles_elapsed.avg.per_second", "sm__frequency", "dram__cycles_elapsed.avg.per_second")


def canonical_metric(name: str) -> str:
    """`smsp__` and `sm__` sums of instruction counts are the same number: keep one spelling."""
    name = METRIC_ALIASES.get(name, name)
    if name.startswith("smsp__") and name.endswith(".sum") and (
            "sass_thread_inst_executed_op_" in name or "inst_executed_pipe_tensor" in name
            or name.startswith("smsp__ops_path_tensor")):
        return "sm__" + name[len("smsp__"):]
    return name


# The per-launch arithmetic is done on numpy float64 arrays, one per metric (a pandas operation costs
# ~0.1 ms of its own on any length: derive would spend ~15 ms on a table of 46k launches); the frame is built
# once at the end. NaN is a missing metric: it stays NaN through arithmetic and compares False.


def _quiet(func: Callable) -> Callable:
    """Run `func` without numpy's warnings on inf - inf, overflow or x / 0 (their NaN / inf are the result,
    as pandas gives them silently)."""
    @functools.wraps(func)
    def quiet(*args):
        with np.errstate(all="ignore"):
            return func(*args)
    return quiet


def _col(df: pd.DataFrame, name: str) -> np.ndarray:
    if name in df.columns:
        return df[name].to_numpy(dtype="float64")
    return np.full(len(df), np.nan)


def _first(*arrays: np.ndarray) -> np.ndarray:
    """Per launch, the first of `arrays` that is not missing."""
    out = arrays[0]
    for a in arrays[1:]:
        out = np.where(np.isnan(out), a, out)
    return out


def _or0(a: np.ndarray) -> np.ndarray:
    """`a` with 0 where it is missing (pandas' fillna(0))."""
    return np.where(np.isnan(a), 0.0, a)


def _sectors(df: pd.DataFrame, unit: str) -> np.ndarray:
    """32 x (`unit`__t_sectors.sum), else 32 x (read + write [+ atom + red]) when read and write are present."""
    total = _col(df, f"{unit}__t_sectors.sum")
    ops = [_col(df, f"{unit}__t_sectors_op_{op}.sum") for op in ("read", "write", "atom", "red")]
    by_op = ops[0] + ops[1] + _or0(ops[2]) + _or0(ops[3])
    return SECTOR_BYTES * _first(total, by_op)


def _times(count: np.ndarray, per_inst: np.ndarray) -> np.ndarray:
    """count x per_inst, where a zero count is 0 FLOPs even when the per-instruction rule is unknown."""
    return np.where(count != 0, count * per_inst, count)


QUALIFIERS = ("op", "dst", "sparsity")  # the optional parts of an ops counter's name, beside its source type


def tensor_ops_columns(columns) -> dict[str, list[str]]:
    """The ops counters to add up, by source type, none counted twice. A name that leaves a qualifier out
    (op, destination type, sparsity) is the sum of the names that give it, and `_realtime` repeats a name:
    per source type, names are taken coarsest first, and a name is skipped when a taken one covers it (the
    same source, and every qualifier the taken name gives equal) or overlaps it (two names split along
    different qualifiers: `src_fp16_dst_fp32` and `op_hmma_src_fp16` share the hmma->fp32 work)."""
    found = {}
    for name in columns:
        m = TENSOR_OPS.match(name)
        if m:
            found[name] = m.groupdict()
    plain = {tuple(g[q] for q in ("src", *QUALIFIERS)) for g in found.values() if not g["realtime"]}
    chosen: dict[str, list[str]] = {}
    taken: list[dict] = []
    coarse_first = sorted(found, key=lambda n: (sum(found[n][q] is not None for q in QUALIFIERS), n))
    for name in coarse_first:
        g = found[name]
        if g["realtime"] and tuple(g[q] for q in ("src", *QUALIFIERS)) in plain:
            continue
        if any(t["src"] == g["src"] and all(t[q] is None or g[q] is None or t[q] == g[q] for q in QUALIFIERS)
               for t in taken):
            continue
        taken.append(g)
        chosen.setdefault(g["src"], []).append(name)
    return chosen


def _is_integer(src: str) -> bool:
    return src.startswith(INTEGER_TYPES) and any(ch.isdigit() for ch in src)


def tensor_type(src: str) -> str | None:
    """An ops counter's source type in the roofs' vocabulary (roofline.TENSOR_TYPES), or None."""
    if src.startswith(("fp8", "e4m3", "e5m2")):
        return "fp8"
    return src if src in ("fp64", "tf32", "fp16", "bf16", "int8") else None


@_quiet
def tensor_work(df: pd.DataFrame) -> pd.DataFrame:
    """Per launch: flops_tensor, ops_tensor_int (integer tensor ops are not FLOPs), phantom_flops (fp16 and
    tensor FLOPs of HFMA2.MMA moves, PHANTOM_NOTE), hfma_phantom (hfma thread instructions to leave out of
    flops_fp16), tensor_type (the one input type of the tensor FLOPs where the input says it) and
    tensor_rule ("ops counters", "x<N> per instruction (CC)", or "" when unknown).

    flops_tensor comes from the floating-point sm__ops_path_tensor_* counters when the input has any; else
    from warp instruction counts x FLOPs per instruction where the CC allows one shape only; else it is
    missing (0 instructions are 0 FLOPs). HFMA2.MMA moves: ncu's own count of them where collected
    (..._op_hmma_type_hfma2), else the signature hfma thread instructions = 32 x the tensor-pipe
    instructions that are no IMMA/DMMA (the moves count as HMMA in the hmma breakdown).
    """
    out = {}  # column -> values per launch, made a frame at the end
    total, hmma, imma, dmma = (_col(df, name) for name in TENSOR_METRICS)
    cc = df["cc"] if "cc" in df.columns else pd.Series(None, index=df.index, dtype="object")
    has_parts = ~np.isnan(hmma) | ~np.isnan(imma) | ~np.isnan(dmma)
    hfma = _col(df, HFMA_METRIC)
    # Which count holds the moves is not documented: the tensor-pipe instructions beside the hmma/imma/dmma
    # breakdown (outside), or the hmma ones (inside: ncu breaks hmma down into ..._type_hfma2). The
    # signature is tried on both; without the breakdown the whole tensor-pipe count is the candidate.
    outside = np.where(has_parts, total - _or0(hmma) - _or0(imma) - _or0(dmma), total)
    inside = np.where(has_parts, _first(total, hmma) - _or0(imma) - _or0(dmma), np.nan)
    is_outside = (outside > 0) & (hfma == WARP_THREADS * outside)
    is_inside = ~is_outside & (inside > 0) & (hfma == WARP_THREADS * inside)
    counted = _col(df, HFMA2_MMA_METRIC)  # ncu's own count, where collected: inside hmma
    moves = _or0(_first(counted, np.where(is_outside, outside, np.where(is_inside, inside, 0.0))))
    moves_in_hmma = ~np.isnan(counted) | is_inside | ~has_parts
    out["hfma_phantom"] = np.minimum(WARP_THREADS * moves, _or0(hfma))
    ops = tensor_ops_columns(df.columns)
    floats = [src for src in ops if not _is_integer(src)]
    integers = [src for src in ops if _is_integer(src)]

    def summed(srcs) -> np.ndarray:  # pandas' row sum: its order of addition is pandas' own
        names = [n for src in srcs for n in ops[src]]
        return df[names].astype("float64").sum(axis=1, min_count=len(names)).to_numpy()

    # IMMA: integer ops of several shapes, no FLOPs; 0 instructions are 0 ops
    out["ops_tensor_int"] = summed(integers) if integers else np.where(imma == 0, imma, np.nan)
    if floats:  # the FLOP counters themselves: they count no moves
        out["flops_tensor"] = summed(floats)
        out["phantom_flops"] = FMA_FLOPS * out["hfma_phantom"]
        out["tensor_rule"] = "ops counters"
        # the input type of a launch's tensor FLOPs when all of them are of one type: per type (None for a
        # source of no known type), whether any of its sources has FLOPs; one type busy, that one
        busy: dict[str | None, np.ndarray] = {}
        for src in floats:
            busy[tensor_type(src)] = busy.get(tensor_type(src), False) | (summed([src]) > 0)
        alone = sum(busy.values()) == 1
        types = np.full(len(df), None, dtype=object)
        for kind, has in busy.items():
            types[has & alone] = kind
        out["tensor_type"] = types.tolist()  # typed by pandas from the values, as the other branch's
        return pd.DataFrame(out, index=df.index)
    # per distinct CC, not per launch (a million nsys launches have no counters, only a CC)
    cc_codes, ccs = pd.factorize(cc, use_na_sentinel=False)

    def per_cc(table: dict, missing, dtype="float64") -> np.ndarray:
        return np.array([table.get(c, missing) for c in ccs], dtype=dtype)[cc_codes]

    per_hmma = per_cc(HMMA_FLOPS_PER_INST, np.nan)
    per_dmma = per_cc(DMMA_FLOPS_PER_INST, np.nan)
    # without the breakdown the whole count is HMMA; moves counted inside it are taken out of it (and a
    # negative rest is 0: clip(lower=0), NaN kept)
    real_hmma = np.where(has_parts, hmma, total) - np.where(moves_in_hmma, moves, 0.0)
    real_hmma = np.where(real_hmma < 0, 0.0, real_hmma)
    by_rule = _times(real_hmma, per_hmma) + _times(_or0(dmma), per_dmma)
    out["flops_tensor"] = np.where(~np.isnan(real_hmma) | ~np.isnan(dmma), by_rule, np.nan)
    rules = {c: f"x{n:.0f} per instruction (CC {c})" for c, n in HMMA_FLOPS_PER_INST.items()}
    out["tensor_rule"] = pd.Series(per_cc(rules, "", object), index=df.index, dtype="str")
    # the instruction rules know their type: HMMA.884 is FP16 (sm_70/72), DMMA.884 FP64 (sm_80); one type
    # where only one of them has FLOPs
    fp16, fp64 = real_hmma > 0, dmma > 0
    types = np.full(len(df), None, dtype=object)  # filled by mask: np.where would make a str per launch
    types[fp16 & ~fp64], types[fp64 & ~fp16] = "fp16", "fp64"
    out["tensor_type"] = types
    out["phantom_flops"] = FMA_FLOPS * out["hfma_phantom"] + _or0(_times(moves, per_hmma))
    return pd.DataFrame(out, index=df.index)


@_quiet
def launch_time(raw: pd.DataFrame) -> pd.Series:
    """Seconds per launch from the first time source present: gpu__time_duration ("Duration"), else elapsed
    cycles over their rate: sm__, smsp__, then gpc__ (max over GPCs: the kernel's whole span). Indexed as
    `raw` (assigned to its column, it lines up with its rows in any order)."""
    candidates = [_col(raw, "time_s"), _col(raw, "gpu__time_duration.sum")]
    for cycles, rate in (("sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second"),
                         ("smsp__cycles_elapsed.avg", "smsp__cycles_elapsed.avg.per_second"),
                         ("gpc__cycles_elapsed.max", "gpc__cycles_elapsed.avg.per_second")):
        per_second = _col(raw, rate)
        candidates.append(_col(raw, cycles) / np.where(per_second > 0, per_second, np.nan))
    return pd.Series(_first(*candidates), index=raw.index)


def launch_clock(raw: pd.DataFrame) -> pd.Series:
    """The SM clock (Hz) a launch ran at, where the profile has it; indexed as `raw`."""
    return pd.Series(_first(_col(raw, "sm_clock_hz"), _col(raw, "sm__cycles_elapsed.avg.per_second"),
                            _col(raw, "smsp__cycles_elapsed.avg.per_second"),
                            _col(raw, "gpc__cycles_elapsed.avg.per_second"), _col(raw, "sm__frequency")),
                     index=raw.index)


@_quiet
def derive(raw: pd.DataFrame) -> pd.DataFrame:
    """Per-launch output columns from per-launch raw metrics (values per launch, base units).

    Columns already present under their output name (this tool's own CSV read back, nsys times) are used
    as they are. `tensor_rule` says how flops_tensor was found.
    """
    out = {}  # column -> values per launch, made a frame at the end
    tensor = tensor_work(raw)
    inputs = {"flops_tensor": ["flops_tensor", *TENSOR_METRICS, *[n for ns in tensor_ops_columns(raw.columns).values()
                                                                  for n in ns]]}
    for prec, (fma, add, mul) in PRECISIONS.items():
        names = [f"sm__sass_thread_inst_executed_op_{op}_pred_on.sum" for op in (fma, add, mul)]
        ops = [_col(raw, name) for name in names]
        if prec == "fp16":  # HFMA2.MMA moves are no FMAs
            ops[0] = ops[0] - tensor["hfma_phantom"].to_numpy()
        out[f"flops_{prec}"] = _first(_col(raw, f"flops_{prec}"), FMA_FLOPS * ops[0] + ops[1] + ops[2])
        inputs[f"flops_{prec}"] = [f"flops_{prec}", *names]
    out["flops_tensor"] = _first(_col(raw, "flops_tensor"), tensor["flops_tensor"].to_numpy())
    # a precision the input counts but this row lacks (n/a) makes the total unknown, not smaller; added from
    # 0 in the order of `inputs`, left to right, as pandas' row sum of those columns (the same bits)
    counted = [col for col, names in inputs.items() if raw.columns.isin(names).any()]
    total = sum(out[col] for col in counted) if counted else np.nan
    out["flops"] = _first(_col(raw, "flops"), total)
    out["dram_bytes"] = _first(
        _col(raw, "dram_bytes"), _col(raw, "dram__bytes.sum"),
        _col(raw, "dram__bytes_read.sum") + _col(raw, "dram__bytes_write.sum"),
        SECTOR_BYTES * (_col(raw, "dram__sectors_read.sum") + _col(raw, "dram__sectors_write.sum")),
        SECTOR_BYTES * _col(raw, "dram__sectors.sum"))
    out["l2_bytes"] = _first(_col(raw, "l2_bytes"), _col(raw, "lts__t_bytes.sum"), _sectors(raw, "lts"))
    out["l1_bytes"] = _first(_col(raw, "l1_bytes"), _col(raw, "l1tex__t_bytes.sum"), _sectors(raw, "l1tex"))
    out["ops_tensor_int"] = _first(_col(raw, "ops_tensor_int"), tensor["ops_tensor_int"].to_numpy())
    out["alg_bytes"] = _col(raw, "alg_bytes")
    out["comm_bytes"] = _col(raw, "comm_bytes")
    # a launch's FLOPs are known or not; a row of this tool's own table read back says its own share
    out["coverage"] = _col(raw, "coverage") if "coverage" in raw.columns else np.where(np.isnan(out["flops"]), 0.0, 1.0)
    out["phantom_flops"] = _first(_col(raw, "phantom_flops"), tensor["phantom_flops"].to_numpy())
    out["time_s"] = launch_time(raw)
    out["sm_clock_hz"] = launch_clock(raw)
    out["tensor_rule"] = tensor["tensor_rule"]
    given = raw["tensor_type"] if "tensor_type" in raw.columns else pd.Series(None, index=raw.index, dtype=object)
    out["tensor_type"] = given.astype(object).where(given.notna(), tensor["tensor_type"])
    return pd.DataFrame(out, index=raw.index)


def with_rates(table: pd.DataFrame, flops_time: pd.Series | None = None,
               dram_time: pd.Series | None = None) -> pd.DataFrame:
    """Add intensities and rates to a table of totals; a row without time has no rates. `flops_time` and
    `dram_time`: the time of the launches whose FLOPs / DRAM bytes are known, where a row's totals cover
    only some launches (`coverage`, the share of time_s with FLOPs; missing: no intensity either);
    time_s where they are not given."""
    t = table
    covered = t["coverage"].notna() if "coverage" in t.columns else True
    for level in ("dram", "l2", "l1"):
        b = t[f"{level}_bytes"]
        t[f"ai_{level}"] = (t["flops"] / b.where(b > 0)).where(covered)
    flops_time = t["time_s"] if flops_time is None else flops_time
    dram_time = t["time_s"] if dram_time is None else dram_time
    t["flop_per_s"] = t["flops"] / flops_time.where(flops_time > 0)
    t["dram_bytes_per_s"] = t["dram_bytes"] / dram_time.where(dram_time > 0)
    return t


# ------------------------------------------------------------------------------ rates no GPU can reach
# A rate above what its GPU can physically do is a wrong count, shape, time or precision, never a fast
# kernel. The limit is the peak times a margin: 5 % over a peak derived from the profile's own clock and SM
# count (exact physics, rounding aside); 25 % over a datasheet figure, whose boost clock is typical, not the
# maximum (an RTX 4090 boosts to 2.79 GHz against its datasheet's 2.52).
DERIVED_MARGIN = 1.05
DATASHEET_MARGIN = 1.25
# tensor FLOPs of a 2:4 sparse kernel are the dense work, done at up to twice the dense rate
SPARSE_FACTOR = 2
# tensor FLOPs of no known input type: twice again over the best listed type, for types narrower than the
# tables list (FP4 on Blackwell runs at twice FP8)
UNTYPED_TENSOR_FACTOR = 2 * SPARSE_FACTOR
# table column -> the peak key (ceilings.peaks) it is held against; tensor: tensor.<its type>
RATE_LIMITS = {"flops_fp64": "fp64", "flops_fp32": "fp32", "flops_fp16": "fp16", "flops_tensor": "tensor",
               "dram_bytes": "dram"}
RATE_KINDS = {"flops_fp64": "fp64 FLOP/s", "flops_fp32": "fp32 FLOP/s", "flops_fp16": "fp16 FLOP/s",
              "flops_tensor": "tensor FLOP/s", "dram_bytes": "DRAM B/s"}  # what each rate is, in words
IMPOSSIBLE = "IMPOSSIBLE RATE:"  # the first words of the warning
KERNELS_NAMED = 3
KERNEL_NAME_CUT = 60


def physical_peaks(gpu: Mapping) -> dict[str, tuple[float, str]]:
    """The most a GPU of kernel_table's attrs["gpus"] can do, by peak key (FLOP/s; `dram` in B/s), margin
    included, each with its source: its compute capability's units per SM x SM count x max SM clock
    (ceilings.peaks; facts the profile lacks from the GPU's datasheet row), and the datasheet row's own
    figures; the larger where both give one. Empty when neither is known."""
    from ceilings import datasheet, peaks

    row = datasheet.match_device(gpu["gpu"], gpu.get("memory_bytes")) if gpu.get("gpu") else None
    out = {k: (v * DATASHEET_MARGIN, f"{row.display_name} datasheet, +{DATASHEET_MARGIN - 1:.0%}")
           for k, v in row.peaks().items()} if row else {}
    cc = gpu.get("cc") or (row.compute_capability if row else None)
    sms = gpu.get("sm_count") or (row.sm_count if row else None)
    clock = gpu.get("max_sm_clock_hz") or (row.boost_clock_mhz * 1e6 if row else None)
    derived = peaks.clock_derived_peaks({"compute_capability": cc, "sm_count": sms, "max_sm_clock_hz": clock,
                                         "name": gpu.get("gpu")})
    how = f"CC {cc} units x {sms:.0f} SMs x {clock / 1e9:.3g} GHz, +{DERIVED_MARGIN - 1:.0%}" if sms and clock else ""
    for key, value in derived.items():
        if key != "dram" and value * DERIVED_MARGIN > out.get(key, (0.0, ""))[0]:
            out[key] = (value * DERIVED_MARGIN, how)
    return out


def _limit(peaks: Mapping[str, tuple[float, str]], column: str, tensor_type) -> tuple[float, str] | None:
    key = RATE_LIMITS[column]
    if key != "tensor":
        return peaks.get(key)
    if isinstance(tensor_type, str) and f"tensor.{tensor_type}" in peaks:
        value, source = peaks[f"tensor.{tensor_type}"]
        return value * SPARSE_FACTOR, f"tensor.{tensor_type}: {source}, x{SPARSE_FACTOR} for 2:4 sparsity"
    typed = [(v, k, s) for k, (v, s) in peaks.items() if k.startswith("tensor.") and k != "tensor.int8"]
    if not typed:
        return None
    value, key, source = max(typed)
    return (value * UNTYPED_TENSOR_FACTOR, f"{key}, the fastest type: {source}, x{UNTYPED_TENSOR_FACTOR} for "
            f"sparsity and narrower types, the input type being unknown")


def impossible_rates(table: pd.DataFrame, gpus: Sequence[Mapping]) -> list[str]:
    """Warnings (IMPOSSIBLE first) for the rows of a kernel table whose FLOP/s of a precision or DRAM B/s
    exceed the physical peak of the profile's GPU (physical_peaks; the largest when the profile holds
    several GPUs), one per kind naming the first kernels; and one saying which rates could not be checked
    and why (a GPU the profile does not name, or no peak for that kind)."""
    from ceilings.report import format_rate

    per_gpu = [physical_peaks(g) for g in gpus]
    # a kind is checked only where every GPU of the profile gives it a limit: the row may be any one's
    keys = set.intersection(*(set(p) for p in per_gpu)) if per_gpu else set()
    peaks = {k: max(p[k] for p in per_gpu) for k in keys}
    time = table["time_s"].astype("float64")
    time = time.where(time > 0)
    types = table["tensor_type"] if "tensor_type" in table.columns else pd.Series(None, index=table.index)
    out, unchecked = [], []
    for column, kind in RATE_KINDS.items():
        rate = table[column].astype("float64") / time
        rate = rate[np.isfinite(rate) & (rate > 0)]
        if rate.empty:
            continue
        # the limit depends on the row's tensor type only: found once per type, not once per launch
        codes, row_types = pd.factorize(types.reindex(rate.index), use_na_sentinel=False)
        by_type = [_limit(peaks, column, t) for t in row_types]
        if all(limit is None for limit in by_type):
            unchecked.append(kind)
            continue
        bound = np.array([limit[0] if limit else np.inf for limit in by_type])[codes]
        hit = rate.to_numpy() > bound
        over = [(i, r, by_type[c]) for i, r, c in zip(rate.index[hit], rate.to_numpy()[hit], codes[hit])]
        if over:
            unit = kind.split()[-1]
            named = listed(over, KERNELS_NAMED, lambda o, unit=unit: (
                f"{str(table.at[o[0], 'kernel'])[:KERNEL_NAME_CUT]!r} at {format_rate(o[1], unit)} "
                f"(limit {format_rate(o[2][0], unit)}: {o[2][1]})"))
            out.append(f"{IMPOSSIBLE} {len(over)} launch(es) report more {kind} than their GPU can do: {named}; "
                       f"the counters, shapes, time or precision of those rows are wrong, not the kernels fast")
    if unchecked:
        named = "; ".join(str(g.get("gpu") or "the unnamed GPU") for g in gpus)
        why = ("the profile does not say which GPU it ran on (collect device__attribute_display_name with ncu)"
               if not any(g.get("gpu") for g in gpus) else
               f"neither a datasheet row (ceilings/data/datasheets.csv) nor the compute capability's units "
               f"(ceilings.peaks) with SM count and max SM clock give a peak for {named}")
        out.append(f"{', '.join(unchecked)} not checked against a physical peak: {why}")
    return out


KNOWN = "known"  # the time_parts column of the time whose FLOPs are known
COMMUNICATION_PART = "communication"  # the time_parts column of a collective's launches


def time_parts(launches: pd.DataFrame) -> pd.DataFrame:
    """Each launch's time in parts (seconds): COMMUNICATION for a collective's launch, whole; else KNOWN for the
    share whose FLOPs are known (time x coverage) and, for the rest, a column named by why its work is unknown
    (unknown_work: readers.contract.UNKNOWN_WORK). The parts of a launch sum to its time."""
    time = launches["time_s"].to_numpy(dtype="float64", na_value=np.nan)
    time = np.where(np.isnan(time), 0.0, time)
    comm = _matches(launches["kernel"], COMMUNICATION) | _matches(launches["op"], COMMUNICATION)
    coverage = np.clip(np.nan_to_num(launches["coverage"].to_numpy(dtype="float64", na_value=np.nan)), 0.0, 1.0)
    known = np.where(comm, 0.0, time * coverage)
    unknown = np.where(comm, 0.0, time - known)
    codes, causes = pd.factorize(launches["unknown_work"].astype(object).fillna("no counters"))
    unknown_by_cause = {cause: np.where(codes == i, unknown, 0.0) for i, cause in enumerate(causes)
                        if (unknown[codes == i] > 0).any()}
    return pd.DataFrame({KNOWN: known, COMMUNICATION_PART: np.where(comm, time, 0.0), **unknown_by_cause},
                        index=launches.index)


def row_parts(table: pd.DataFrame) -> pd.DataFrame | None:
    """The rows' time in parts (time_parts, summed per row: attrs["time_parts"]), aligned with the table; None
    where the table has none for its rows (a table read back, or rows the parts do not cover)."""
    parts = getattr(table.attrs.get("time_parts"), "frame", None)
    if parts is not None and len(parts) and set(table.index) <= set(parts.index):
        return parts.reindex(table.index).fillna(0.0)
    return None


def communicating(table: pd.DataFrame) -> pd.Series:
    """Whether each row of a kernel table is a collective's, as its time parts say (time_parts: the launch's
    kernel or operator is communication); for a table without them, by its kernel's name."""
    parts = row_parts(table)
    if parts is not None:
        return parts[COMMUNICATION_PART] > 0
    return pd.Series(_matches(table["kernel"], COMMUNICATION), index=table.index)


def _matches(values: pd.Series, pattern) -> np.ndarray:
    """pattern.search over a column of names, once per distinct name (launches repeat a few thousand names)."""
    codes, names = pd.factorize(values.astype(object), use_na_sentinel=True)
    found = np.array([bool(pattern.search(str(name))) for name in names] + [False])  # -1 (missing): no match
    return found[codes]


@dataclass(frozen=True, eq=False)
class TimeParts:
    """A kernel table's rows' time in parts (time_parts, summed per row), as its attrs hold it: compared by
    identity and never copied, as pandas compares and deep-copies attrs on every row iterrows makes."""

    frame: pd.DataFrame

    def __deepcopy__(self, memo) -> TimeParts:
        return self
