"""SASS text -> instructions -> control-flow graph -> per-thread work, for `kernels.inspect`.

Pure text processing (no CUDA needed): `parse_cuobjdump` reads `cuobjdump -sass` output, `classify` says what
one instruction contributes (FLOPs by precision, global bytes), and `analyse` finds the kernel's single
innermost loop and splits the counts into loop body / once per thread / conditional. docs/inspect.md states
the counting rules; the tables below are the data they rest on.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field

# --- what one thread-instruction contributes -------------------------------------------------------------

# Scalar/packed arithmetic: class -> (precision, FLOPs per thread-instruction). An FMA is 2 FLOPs, a packed
# half2/bfloat162 FMA 4. Modifiers that do not change the work (.FTZ, .RZ, .SAT, .MMA pipe) are ignored
# for the FLOP count but kept in the class name where the inspect report should show instructions apart
# (HFMA2.MMA: the same math on another pipe).
FLOP_CLASSES: dict[str, tuple[str, int]] = {
    "FFMA": ("fp32", 2), "FADD": ("fp32", 1), "FMUL": ("fp32", 1),
    "DFMA": ("fp64", 2), "DADD": ("fp64", 1), "DMUL": ("fp64", 1),
    "HFMA2": ("fp16", 4), "HADD2": ("fp16", 2), "HMUL2": ("fp16", 2),
    "HFMA2.BF16_V2": ("bf16", 4), "HADD2.BF16_V2": ("bf16", 2), "HMUL2.BF16_V2": ("bf16", 2),
    "IMAD": ("int32", 2),  # plain `IMAD Rd, Ra, Rb, Rc` only (below)
}
# Three-source (FMA) classes: operands are d, a, b, c. Two-source (add/mul): d, a, b.
FMA_BASES = frozenset({"FFMA", "DFMA", "HFMA2", "IMAD"})
# Old immediate encodings (FFMA32I ...) are the same operation.
IMMEDIATE_SUFFIX = "32I"

# IMAD with any modifier (.MOV, .SHL, .WIDE, .IADD, .HI, .X, .U32) is a move, shift, add or 64-bit address
# arithmetic that ptxas puts on the IMAD unit: never benchmark work; counted under its first two tokens.

# Warp-level mma.sync: the shape token in the opcode -> (M, N, K). One warp instruction does 2*M*N*K FLOPs,
# i.e. 2*M*N*K/32 per thread. Seen with NVRTC 13.0 (PTX mma.sync.aligned -> SASS):
#   m16n8k16 f16/bf16 -> HMMA.16816.F32[.BF16] / HMMA.16816.F16     (sm_80, sm_90)
#   m16n8k8 tf32      -> HMMA.1688.F32.TF32                         (sm_80, sm_90)
#   m8n8k4 f64        -> DMMA.884 (sm_80), DMMA.8x8x4 (sm_90)
#   m16n8k32 s8       -> IMMA.16832.S8.S8                           (sm_80, sm_90)
#   m16n8k32 e4m3     -> QMMA.16832.F32.E4M3.E4M3 (sm_89, sm_120); sm_80: not available (PTX needs sm_89);
#                        sm_90: NO native instruction, emulated as F2FP.F16.E4M3.UNPACK_B (fp8 -> fp16)
#                        + 2 x HMMA.16816.F32 + 4 FADD merging the partial accumulators (see SM90_FP8_NOTE).
MMA_SHAPES: dict[str, tuple[int, int, int]] = {
    "16816": (16, 8, 16), "1688": (16, 8, 8), "1684": (16, 8, 4), "884": (8, 8, 4), "8x8x4": (8, 8, 4),
    "16832": (16, 8, 32), "8816": (8, 8, 16), "8832": (8, 8, 32), "16864": (16, 8, 64),
}
MMA_THREADS = 32  # mma.sync is a warp instruction
# wgmma (sm_90a) is a warpgroup instruction, its shape spelled out in the opcode (64xNxK, N from 8 to 256), so
# one SASS instruction does 2*64*N*K FLOPs for the 128 threads that issue it. Seen with NVRTC 13.0:
#   m64n256k16 bf16 -> HGMMA.64x256x16.F32.BF16, f16 -> HGMMA.64x256x16.F32, e4m3 -> QGMMA.64x256x32.F32.E4M3.E4M3
GMMA_THREADS = 128
MMA_BASES = frozenset({"HMMA", "IMMA", "DMMA", "QMMA", "HGMMA", "IGMMA", "QGMMA", "BGMMA"})
SM90_FP8_NOTE = ("sm_90 has no fp8 mma.sync instruction: ptxas converts the e4m3/e5m2 operands to fp16 "
                 "(F2FP.F16.E4M3.UNPACK_B) and issues HMMA.16816.F32 (fp16) plus FADDs")

# The special-function unit: MUFU.<function> -> its Work.special key, one result per thread-instruction
# (MUFU.RCP64H and the other fp64 seeds are no such function: not counted).
SPECIAL_FUNCTIONS = {"EX2": "ex2", "LG2": "lg2", "RCP": "rcp", "RSQ": "rsqrt", "SQRT": "sqrt", "SIN": "sin",
                     "COS": "cos", "TANH": "tanh"}
SPECIAL_BASE = "MUFU"

# Global-memory instructions whose bytes the model counts; width modifier -> bytes per thread.
GLOBAL_LOADS = frozenset({"LDG", "LDGSTS"})  # LDGSTS: cp.async, global -> shared (a global read)
GLOBAL_STORES = frozenset({"STG"})
WIDTH_BYTES = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}
DEFAULT_WIDTH = 4
SHARED_MEMORY = frozenset({"LDS", "STS", "LDSM"})
# Memory instructions that may touch global memory with a size the SASS does not tell (generic LD/ST can
# be global, shared or local; atomics/reductions; TMA bulk copies): in counted code they make bytes unprovable.
UNSIZED_MEMORY = frozenset({"LD", "ST", "ATOM", "ATOMG", "RED", "REDG", "UTMALDG", "UTMASTG", "UBLKCP",
                            "UTMAREDG", "UBLKRED"})
SPILLS = frozenset({"LDL", "STL"})
# Control flow the graph cannot follow (indirect jumps/calls): the whole kernel is unprovable. A direct
# CALL.REL (ptxas' slow paths, e.g. 64-bit division) is followed into its subroutine (up to RET).
OPAQUE_CONTROL = frozenset({"BRX", "JMX", "JMP"})
TERMINATORS = frozenset({"EXIT", "BPT", "KILL"})


@dataclass(frozen=True)
class Instruction:
    address: int
    predicate: str | None  # "P0", "!P1", "UP0"; None when unconditional (no guard or @PT)
    opcode: str  # mnemonic with modifiers, e.g. "LDG.E.128.CONSTANT"
    operands: tuple[str, ...]

    @property
    def base(self) -> str:
        return self.opcode.split(".")[0]

    @property
    def modifiers(self) -> tuple[str, ...]:
        return tuple(self.opcode.split(".")[1:])

    def __str__(self) -> str:
        guard = f"@{self.predicate} " if self.predicate else ""
        return f"/*{self.address:04x}*/ {guard}{self.opcode} {', '.join(self.operands)}"


@dataclass(frozen=True)
class InstructionWork:
    """What one thread executing the instruction contributes."""

    key: str  # the counting class, e.g. "FFMA", "HFMA2.BF16_V2", "IMAD.MOV", "LDG.E.128.CONSTANT"
    precision: str | None = None
    flops: int = 0
    read_bytes: int = 0
    write_bytes: int = 0
    unsized_global: bool = False  # a global access whose bytes cannot be known
    special: str | None = None  # a special-function result (SPECIAL_FUNCTIONS value)

    @property
    def is_work(self) -> bool:
        return bool(self.flops or self.read_bytes or self.write_bytes or self.unsized_global or self.special)


_LINE = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(?:@(!?U?P(?:T|\d+))\s+)?([A-Z][A-Z0-9_.x]*)\s*([^;]*);")
_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
_ZERO_REG = re.compile(r"^-?\|?-?RZ(?:\.\w+)*\|?$")  # RZ, -RZ, -RZ.H0_H0, |RZ|
_IMMEDIATE = re.compile(r"^-?(?:\d+\.?\d*(?:e[+-]?\d+)?|0x[0-9a-f]+|\+?INF|QNAN)$")
ONE_MULTIPLIERS = frozenset({"1", "1.0", "1,1"})  # `a * 1 + c` is an add


def parse_cuobjdump(text: str) -> dict[str, list[Instruction]]:
    """`cuobjdump -sass` output -> {function name: instructions in address order}."""
    functions: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for line in text.splitlines():
        if (m := _FUNCTION.match(line)):
            current = functions.setdefault(m.group(1), [])
            continue
        if current is None or not (m := _LINE.search(line)):
            continue
        address, guard, opcode, rest = m.groups()
        predicate = None if guard in (None, "PT", "UPT") else guard
        operands = tuple(o.strip() for o in _split_operands(rest) if o.strip())
        current.append(Instruction(int(address, 16), predicate, opcode, operands))
    return functions


def _split_operands(text: str) -> list[str]:
    """Split on commas outside brackets (`desc[UR4][R2.64+0x10]`, `c[0x0] [0x168]`)."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def access_bytes(opcode: str) -> int:
    """Bytes per thread of a load/store from its width modifier (LDG.E.128 -> 16, STG.E.U8 -> 1)."""
    return next((WIDTH_BYTES[m] for m in opcode.split(".")[1:] if m in WIDTH_BYTES), DEFAULT_WIDTH)


def _is_immediate(operand: str) -> bool:
    return bool(_IMMEDIATE.match(operand))


def _is_zero(operand: str) -> bool:
    """RZ in any spelling, or an immediate (pair) of zeros."""
    text = operand.replace(" ", "")
    if _ZERO_REG.match(text):
        return True
    return bool(text) and all(re.fullmatch(r"-?0+(?:\.0*)?", p) for p in text.split(","))


def _arith_class(ins: Instruction) -> str | None:
    """The FLOP_CLASSES key of an arithmetic instruction, or None."""
    base = ins.base.removesuffix(IMMEDIATE_SUFFIX) if ins.base.endswith(IMMEDIATE_SUFFIX) else ins.base
    if base == "IMAD":
        return "IMAD" if not ins.modifiers else None
    if base not in {k.split(".")[0] for k in FLOP_CLASSES}:
        return None
    if base in ("HFMA2", "HADD2", "HMUL2"):
        if "F32" in ins.modifiers:  # HADD2.F32: fp16 -> fp32 conversion idiom, not arithmetic
            return None
        return f"{base}.BF16_V2" if "BF16_V2" in ins.modifiers else base
    return base


def classify(ins: Instruction) -> InstructionWork:
    """The counting class and the work of one thread-instruction (docs/inspect.md, "What counts")."""
    base, mods = ins.base, ins.modifiers
    if base in MMA_BASES:
        return _mma(ins)
    if base == SPECIAL_BASE:
        function = SPECIAL_FUNCTIONS.get(mods[0] if mods else "")
        return InstructionWork(ins.opcode, special=function)
    if base in GLOBAL_LOADS or base in GLOBAL_STORES:
        width = access_bytes(ins.opcode)
        if base in GLOBAL_LOADS:
            return InstructionWork(ins.opcode, read_bytes=width)
        return InstructionWork(ins.opcode, write_bytes=width)
    if base in UNSIZED_MEMORY:
        return InstructionWork(ins.opcode, unsized_global=True)
    if base in SHARED_MEMORY or base in SPILLS:
        return InstructionWork(ins.opcode)
    if base == "IMAD" and mods:
        return InstructionWork(".".join(ins.opcode.split(".")[:2]))
    cls = _arith_class(ins)
    if cls is None:  # keep conversions (HADD2.F32) apart from the arithmetic classes
        return InstructionWork(ins.opcode if base in ("HFMA2", "HADD2", "HMUL2") else base)
    precision, flops = FLOP_CLASSES[cls]
    sources = ins.operands[1:]
    pipe = ".MMA" if "MMA" in mods else ""  # HFMA2.MMA: same math, issued on the FMA-heavy pipe
    key = cls.replace("HFMA2", "HFMA2" + pipe) if cls.startswith("HFMA2") else cls
    if ins.base in FMA_BASES or ins.base.removesuffix(IMMEDIATE_SUFFIX) in FMA_BASES:
        a, b, c = _fma_sources(sources)
        if _is_zero(a) or _is_zero(b):
            return InstructionWork(f"{key}(mov)")  # x*0 + c: a move/constant idiom (HFMA2.MMA R5, -RZ, RZ, 0, 0)
        if _is_zero(c):
            return InstructionWork(f"{key}(mul)", precision, flops // 2)  # a*b + 0: a multiply
        if b.replace(" ", "") in ONE_MULTIPLIERS:
            return InstructionWork(f"{key}(add)", precision, flops // 2)  # a*1 + c: an add
        return InstructionWork(key, precision, flops)
    if any(_is_zero(s) for s in sources[:2]):
        return InstructionWork(f"{key}(mov)")  # x + 0, x * 0, -RZ + x: move/negate/convert idioms
    return InstructionWork(key, precision, flops)


def _fma_sources(sources: tuple[str, ...]) -> tuple[str, str, str]:
    """(a, b, c). Packed-half forms spell an immediate pair as two operands: `R11, 1, 1, R4` (pair in b),
    `-RZ, RZ, 0, 0` (pair in c)."""
    s = tuple(x.strip() for x in sources)
    if len(s) == 4:
        if _is_immediate(s[2]) and _is_immediate(s[3]) and not _is_immediate(s[1]):
            return s[0], s[1], f"{s[2]},{s[3]}"
        return s[0], f"{s[1]},{s[2]}", s[3]
    return (s + ("", "", ""))[:3]


_SHAPE = re.compile(r"^(?:\d+x\d+x\d+|\d{3,6})$")


def _mma(ins: Instruction) -> InstructionWork:
    shape = next((m for m in ins.modifiers if _SHAPE.match(m)), None)
    if shape is None:
        raise ValueError(f"no shape in tensor instruction {ins}")
    if "x" in shape:
        m, n, k = (int(v) for v in shape.split("x"))
    elif shape in MMA_SHAPES:
        m, n, k = MMA_SHAPES[shape]
    else:
        raise ValueError(f"unknown mma shape {shape!r} in {ins}; add it to kernels.sass.MMA_SHAPES")
    threads = GMMA_THREADS if ins.base.endswith("GMMA") else MMA_THREADS
    return InstructionWork(ins.opcode, _mma_precision(ins), 2 * m * n * k // threads)


def _mma_precision(ins: Instruction) -> str:
    mods = set(ins.modifiers)
    if ins.base.startswith("D"):
        return "fp64"
    if ins.base.startswith("Q"):
        return "fp8"
    if ins.base.startswith(("I", "B")):
        return "int4" if mods & {"S4", "U4"} else "int8"
    if "TF32" in mods:
        return "tf32"
    if "BF16" in mods:
        return "bf16"
    return "fp16"


# --- control flow -------------------------------------------------------------------------------------------

EXIT_NODE = -1  # the virtual node every EXIT leads to


@dataclass(frozen=True)
class Block:
    index: int
    instructions: tuple[Instruction, ...]
    successors: tuple[int, ...]  # block indices; EXIT_NODE for an exit

    @property
    def start(self) -> int:
        return self.instructions[0].address

    @property
    def end(self) -> int:
        return self.instructions[-1].address


def _branch_target(ins: Instruction) -> int | None:
    for operand in reversed(ins.operands):
        token = operand.strip().split()[-1] if operand.strip() else ""
        if re.fullmatch(r"0x[0-9a-f]+", token):
            return int(token, 16)
    return None


def _is_jump(instructions: list[Instruction], ins: Instruction) -> bool:
    """BRA, or a CALL.REL.NOINC that never returns: sm_80 leaves loops with `@P CALL.REL.NOINC exit` (its
    target reaches EXIT before any RET). A CALL whose target returns (RET) is a subroutine call."""
    if ins.base == "BRA":
        return True
    target = _branch_target(ins) if ins.base == "CALL" else None
    if target is None:
        return False
    following = (i for i in instructions if i.address >= target)
    return next((i.base for i in following if i.base in ("EXIT", "RET")), "RET") == "EXIT"


def build_cfg(instructions: list[Instruction]) -> list[Block]:
    """Basic blocks of the reachable code, entry first."""
    if not instructions:
        return []
    by_address = {ins.address: i for i, ins in enumerate(instructions)}
    jumps = {i for i, ins in enumerate(instructions) if _is_jump(instructions, ins)}
    leaders = {0}
    for i, ins in enumerate(instructions):
        if i in jumps:
            target = _branch_target(ins)
            if target is not None and target in by_address:
                leaders.add(by_address[target])
            leaders.add(i + 1)
        elif ins.base in TERMINATORS:
            leaders.add(i + 1)
    starts = sorted(x for x in leaders if x < len(instructions))
    block_of = {}
    spans = []
    for n, s in enumerate(starts):
        e = starts[n + 1] if n + 1 < len(starts) else len(instructions)
        spans.append((s, e))
        block_of[s] = n
    blocks = []
    for n, (s, e) in enumerate(spans):
        last = instructions[e - 1]
        after = block_of.get(e)
        conditional = last.predicate is not None
        succ: list[int] = []
        if e - 1 in jumps:
            target = _branch_target(last)
            succ.append(block_of[by_address[target]] if target in by_address else EXIT_NODE)
            if (conditional or set(last.modifiers) & {"DIV", "CONV"}) and after is not None:
                succ.append(after)
        elif last.base in TERMINATORS:
            succ.append(EXIT_NODE)
            if conditional and after is not None:
                succ.append(after)
        elif after is not None:
            succ.append(after)
        blocks.append(Block(n, tuple(instructions[s:e]), tuple(dict.fromkeys(succ))))
    # keep what the entry reaches (drops the `BRA self` padding after the last EXIT)
    seen, stack = set(), [0]
    while stack:
        b = stack.pop()
        if b in seen or b == EXIT_NODE:
            continue
        seen.add(b)
        stack.extend(blocks[b].successors)
    return [b for b in blocks if b.index in seen]


def _dominators(nodes: list[int], preds: dict[int, set[int]], root: int) -> dict[int, set[int]]:
    dom = {n: set(nodes) for n in nodes}
    dom[root] = {root}
    changed = True
    while changed:
        changed = False
        for n in nodes:
            if n == root:
                continue
            ps = [dom[p] for p in preds.get(n, ()) if p in dom]
            new = (set.intersection(*ps) if ps else set()) | {n}
            if new != dom[n]:
                dom[n], changed = new, True
    return dom


@dataclass(frozen=True)
class Loop:
    header: int  # block index
    latches: frozenset[int]
    blocks: frozenset[int]

    def span(self, blocks: dict[int, Block]) -> str:
        return f"0x{min(blocks[b].start for b in self.blocks):04x}-0x{max(blocks[b].end for b in self.blocks):04x}"


def find_loops(blocks: list[Block]) -> tuple[list[Loop], list[str]]:
    """Natural loops (back edges to a dominating header) and any backward branch that is not one."""
    ids = [b.index for b in blocks]
    preds = _predecessors(blocks)
    dom = _dominators(ids, preds, ids[0])
    by_header: dict[int, set[int]] = {}
    irreducible = []
    for b in blocks:
        for s in b.successors:
            if s == EXIT_NODE:
                continue
            if s in dom[b.index]:
                by_header.setdefault(s, set()).add(b.index)
            elif _block(blocks, s).start <= b.end:
                irreducible.append(f"backward branch at 0x{b.end:04x} to 0x{_block(blocks, s).start:04x} "
                                   "does not close a natural loop")
    loops = []
    for header, latches in by_header.items():
        body, stack = {header}, [lt for lt in latches]
        while stack:
            n = stack.pop()
            if n not in body:
                body.add(n)
                stack.extend(preds[n])
        loops.append(Loop(header, frozenset(latches), frozenset(body)))
    return loops, irreducible


def _block(blocks: list[Block], index: int) -> Block:
    return next(b for b in blocks if b.index == index)


# --- the loop model -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    """Per-thread sums over a set of instructions (one pass through them)."""

    counts: dict[str, int] = field(default_factory=dict)  # counting class -> instructions
    work: dict[str, int] = field(default_factory=dict)  # the classes among them that carry work
    flops: dict[str, int] = field(default_factory=dict)  # precision -> FLOPs
    read_bytes: int = 0
    write_bytes: int = 0
    special: dict[str, int] = field(default_factory=dict)  # special function -> results

    @staticmethod
    def of(instructions) -> Tally:
        counts: Counter[str] = Counter()
        work: Counter[str] = Counter()
        flops: Counter[str] = Counter()
        special: Counter[str] = Counter()
        read = write = 0
        for ins in instructions:
            op = classify(ins)
            counts[op.key] += 1
            if op.is_work:
                work[op.key] += 1
            if op.flops:
                flops[op.precision] += op.flops
            if op.special:
                special[op.special] += 1
            read += op.read_bytes
            write += op.write_bytes
        return Tally(dict(counts), dict(work), dict(flops), read, write, dict(special))


@dataclass(frozen=True)
class Analysis:
    """A kernel under the loop model: `body` runs loop_trips times per thread, `once` once; `conditional`
    (outside the loop, predicated or on a path a thread may skip) is listed but not counted."""

    function: str
    loop: str | None  # address span of the chosen loop; None when no loop holds work
    body: Tally
    once: Tally
    conditional: Tally
    global_widths: dict[str, int]  # counted (loop + once) global load/store opcodes -> count (128-bit check)
    problems: tuple[str, ...]  # non-empty: the model does not apply (verdict "unprovable")
    notes: tuple[str, ...]
    loop_instructions: tuple[Instruction, ...] = ()  # the chosen loop's, in address order


def _work(instructions) -> list[Instruction]:
    return [i for i in instructions if classify(i).is_work]


def analyse(function: str, instructions: list[Instruction]) -> Analysis:
    blocks = build_cfg(instructions)
    by_index = {b.index: b for b in blocks}
    problems, notes = [], []
    reachable = [i for b in blocks for i in b.instructions]
    opaque = sorted({i.opcode for i in reachable if i.base in OPAQUE_CONTROL
                     or (i.base == "CALL" and _branch_target(i) is None)})
    if opaque:
        problems.append(f"control flow the model cannot follow: {', '.join(opaque)}")
    spills = sorted({i.opcode for i in reachable if i.base in SPILLS})
    if spills:
        notes.append(f"register spills: {', '.join(spills)}")

    loops, irreducible = find_loops(blocks)
    problems.extend(irreducible)
    in_loops = set().union(*(lp.blocks for lp in loops))
    innermost = [lp for lp in loops if not any(o.blocks < lp.blocks for o in loops)]

    def loop_work(lp: Loop) -> int:
        return len(_work(i for b in lp.blocks for i in by_index[b].instructions))

    working = sorted((lp for lp in innermost if loop_work(lp)), key=loop_work, reverse=True)
    loop = working[0] if working else None
    if loop is not None:
        for other in working[1:]:
            problems.append(f"loop {other.span(by_index)} holds {loop_work(other)} work instructions besides "
                            f"loop {loop.span(by_index)} ({loop_work(loop)}), e.g. an unrolled main loop plus "
                            "a remainder loop: one loop_trips cannot describe both "
                            "(keep the run-time loop rolled: #pragma unroll 1)")
        stray = _work(i for b in in_loops - set().union(*(lp.blocks for lp in working))
                      for i in by_index[b].instructions)
        if stray:
            problems.append(f"{len(stray)} work instructions in an enclosing loop, outside the innermost one, "
                            f"run an unknown number of times (first: {stray[0]})")
        idle = [lp for lp in loops if lp is not loop and not loop_work(lp)]
        if idle:
            notes.append("loops without work ignored: " + ", ".join(lp.span(by_index) for lp in idle))
        problems.extend(_loop_problems(loop, blocks, by_index))
        spilled = sorted({i.opcode for b in loop.blocks for i in by_index[b].instructions if i.base in SPILLS})
        if spilled:  # local-memory traffic the declaration does not count, inside the timed loop
            problems.append(f"register spills inside the loop ({', '.join(spilled)}): the kernel moves data the "
                            "plan does not declare; give it more registers (fewer blocks per SM) or less unrolling")
        problems.extend(_bypass_problems(loop, blocks, by_index, instructions))
        anchor = loop.header
    else:
        if loops:
            notes.append("loops without work ignored: " + ", ".join(lp.span(by_index) for lp in loops))
        outside = [b for b in blocks if b.index not in in_loops]
        anchor = max(outside, key=lambda b: len(_work(b.instructions))).index

    # Outside the loop, a thread that runs the loop passes through every block that dominates the loop
    # header (before it) or post-dominates it (after it); anything else, or a predicated instruction, may
    # be skipped.
    dom, pdom = _dominators_both_ways(blocks)
    body, once, conditional = [], [], []
    for b in blocks:
        if loop is not None and b.index in loop.blocks:
            body.extend(b.instructions)
        elif b.index not in in_loops:
            always = b.index in dom[anchor] or b.index in pdom.get(anchor, ())
            for ins in b.instructions:
                (once if always and ins.predicate is None else conditional).append(ins)
    # Subroutines (ptxas slow paths) run on some paths only: their work is conditional; in the loop, unknown.
    for ins in reachable:
        if ins.base == "CALL" and _branch_target(ins) is not None and not _is_jump(instructions, ins):
            callee = _subroutine(instructions, _branch_target(ins))
            if loop is not None and ins in body and _work(callee):
                problems.append(f"the loop calls a subroutine with work: {ins}")
            conditional.extend(callee)
    skipped = Tally.of(conditional)
    # A guarded result (`if (store) out[i] = sum`) keeps a chain alive without writing in timed launches:
    # its FLOPs and store are listed, not counted. A load a thread may skip is no such idiom.
    unsure = [i for i in conditional if classify(i).read_bytes or classify(i).unsized_global]
    if unsure:
        problems.append(f"{len(unsure)} global loads outside the loop run only on some paths "
                        f"(first: {unsure[0]}): e.g. a remainder of an unrolled loop")
    if skipped.work:
        notes.append("conditional, not counted: " + ", ".join(f"{k} x{v}" for k, v in sorted(skipped.work.items())))
    for part, where in ((body, "the loop"), (once, "code run once per thread")):
        unsized = sorted({i.opcode for i in part if classify(i).unsized_global})
        if unsized:
            problems.append(f"{where} has global accesses of unknown size: {', '.join(unsized)}")
    global_widths = dict(Counter(i.opcode for i in body + once
                                 if i.base in GLOBAL_LOADS or i.base in GLOBAL_STORES))
    return Analysis(function, loop.span(by_index) if loop else None, Tally.of(body), Tally.of(once), skipped,
                    global_widths, tuple(problems), tuple(notes), tuple(sorted(body, key=lambda i: i.address)))


def _subroutine(instructions: list[Instruction], start: int) -> list[Instruction]:
    """The instructions from a CALL target up to its first RET (ptxas places subroutines after the kernel)."""
    body = []
    for ins in instructions:
        if ins.address >= start:
            body.append(ins)
            if ins.base == "RET":
                break
    return body


def _loop_problems(loop: Loop, blocks: list[Block], by_index: dict[int, Block]) -> list[str]:
    """Each trip (header to a back branch) must run every work block once, and the last, partial pass (header
    to an exit) must run all of them (bottom-tested loop) or none (top-tested): else counts differ per block."""
    problems = []
    ids = sorted(loop.blocks)
    preds = {i: {b.index for b in blocks if i in b.successors and b.index in loop.blocks} for i in ids}
    preds[loop.header] -= loop.latches
    dom = _dominators(ids, preds, loop.header)
    exits = [i for i in ids if any(s not in loop.blocks for s in by_index[i].successors)]
    forward = {i: {s for s in by_index[i].successors if s in loop.blocks and s != loop.header} for i in ids}
    last_pass = set()
    for i in ids:
        work = _work(by_index[i].instructions)
        if not work:
            continue
        guarded = [ins for ins in work if ins.predicate is not None]
        if guarded:
            problems.append(f"predicated work in the loop: {guarded[0]}")
        if not all(i in dom[latch] for latch in loop.latches):
            problems.append(f"work on a conditional path inside the loop: {work[0]}")
        for e in exits:
            if i in dom[e]:
                last_pass.add("all")
            elif e in _reach(i, forward):
                problems.append(f"work at {work[0]} runs on some exits from the loop and not on others")
            else:
                last_pass.add("none")
    if len(last_pass) > 1:
        problems.append("the loop is left mid-body: work before the exit runs once more than work after it")
    return problems


# Launch constants: kernel parameters, grid and block sizes (constant bank 0), the same for every thread.
_LAUNCH_CONSTANT = re.compile(r"c\[0x0\]\s*\[(0x[0-9a-f]+)\]")
_REGISTER = re.compile(r"^[-|!~]*(U?R)(\d+)\b")
_CONSTANT_LOADS = frozenset({"LDC", "ULDC"})
_SPECIAL_REGISTER_READS = frozenset({"S2R", "S2UR", "CS2R"})  # thread/block index, lane id, clock
_PREDICATE = re.compile(r"^!?(U?P\d)$")  # P0..P6, UP0..UP6 (PT/UPT: constant true)
_MEMORY_OPERAND = re.compile(r"\[(?!0x)")  # [R2.64], desc[UR4][R2.64]: memory, not c[0x0][0x160]
THREAD = -1  # in a dependency set: the value depends on which thread (or block) computes it
UNKNOWN = -2  # ... or on memory, a shuffle or a vote: nothing offline can say what


class _Dependencies:
    """What a value in a function is computed from: launch-constant offsets (c[0x0][X]), THREAD, UNKNOWN.
    Followed back through the last definition of each register or predicate before the instruction that
    reads it, through every source operand, select predicate and guard (`@P0 MOV R4, R5` keeps R4's older
    value when P0 is false). `LDC R9, c[0x0][0x258]`; `ISETP.NE P0, PT, R5, RZ`; `SEL R4, R9, RZ, P0`: R4
    derives from 0x258 and from what R5 derives from."""

    def __init__(self, instructions: list[Instruction]):
        self.code = instructions
        self.memo: dict[tuple[str, int], frozenset[int]] = {}

    def of(self, operand: str, end: int) -> frozenset[int]:
        """Of `operand` as read by the instruction at index `end`."""
        operand = operand.strip()
        found = {int(o, 16) for o in _LAUNCH_CONSTANT.findall(operand)}
        if found:
            return frozenset(found)
        pred, reg = _PREDICATE.match(operand), _REGISTER.match(operand)
        if not pred and not reg:
            return frozenset()  # immediates, RZ, PT
        key = (pred.group(1) if pred else f"{reg.group(1)}{reg.group(2)}", end)
        if key not in self.memo:
            self.memo[key] = frozenset()  # a cycle adds nothing
            self.memo[key] = frozenset(self._defined(key[0], end))
        return self.memo[key]

    def _defined(self, name: str, end: int) -> set[int]:
        is_predicate = name.lstrip("U").startswith("P")
        for n in range(end - 1, -1, -1):
            ins = self.code[n]
            if is_predicate:
                if name not in (o.strip() for o in ins.operands[:2]):
                    continue
                offset = 0
            else:
                offset = self._writes(ins, name)
                if offset is None:
                    continue
            if ins.base in _SPECIAL_REGISTER_READS:
                found = {THREAD}
            elif ins.base in _CONSTANT_LOADS:
                found = {int(o, 16) + 4 * offset for src in ins.operands[1:] for o in _LAUNCH_CONSTANT.findall(src)}
            elif any(_MEMORY_OPERAND.search(src) for src in ins.operands[1:]) or ins.base in ("SHFL", "VOTE",
                                                                                          "VOTEU", "MATCH"):
                found = {UNKNOWN}
            else:
                found = set().union(*(self.of(src, n) for src in ins.operands[1:]))
            if ins.predicate:  # a guarded definition: the guard, and the older value when it is false
                found |= self.of(ins.predicate, n) | self._defined(name, n)
            return found
        return set()

    @staticmethod
    def _writes(ins: Instruction, name: str) -> int | None:
        """Which word of its destination `ins` writes to register `name` (0, or 1 for the high half of
        a .64 result); None when it does not write it."""
        dest = _REGISTER.match(ins.operands[0]) if ins.operands else None
        reg = _REGISTER.match(name)
        if not dest or dest.group(1) != reg.group(1) or ins.base.startswith(("ST", "RED", "BRA", "EXIT")):
            return None
        first, number = int(dest.group(2)), int(reg.group(2))
        width = 2 if "64" in ins.modifiers else 1
        return number - first if first <= number < first + width else None


def _branch_dependencies(branch: Instruction, instructions: list[Instruction], deps: _Dependencies) -> set[int]:
    """What the predicate deciding `branch` is computed from ({UNKNOWN} for an unconditional branch)."""
    if not branch.predicate:
        return {UNKNOWN}
    index = next(i for i, ins in enumerate(instructions) if ins is branch)
    return set(deps.of(branch.predicate, index))


def _bypass_problems(loop: Loop, blocks: list[Block], by_index: dict[int, Block],
                     instructions: list[Instruction]) -> list[str]:
    """Every thread must run the loop (the model counts the body loop_trips times for each). A branch before
    the loop that can lead to an exit without it is accepted only as the loop's zero-trip guard: computed
    from launch constants (and the thread index) that all also bound the loop (`t < trips`, `i < n` of a
    grid-stride loop); a flag or a threadIdx test around the loop is not."""
    reaches_loop = _reach(loop.header, _predecessors(blocks))
    # A path that skips the loop leaves, at some branch, the blocks from which the loop can still be reached.
    decisions = [b.instructions[-1] for b in blocks if b.index in reaches_loop and b.index not in loop.blocks
                 and any(s not in reaches_loop for s in b.successors)]
    if not decisions:
        return []
    exits = [by_index[i].instructions[-1] for i in loop.blocks
             if any(s not in loop.blocks for s in by_index[i].successors) or i in loop.latches]
    deps = _Dependencies(instructions)
    # what the loop's exit tests derive from (a count-down counter is followed back to `trips`)
    bounds = set().union(*(_branch_dependencies(e, instructions, deps) for e in exits if e.predicate))
    launch_bounds = bounds - {THREAD, UNKNOWN}
    problems = []
    for last in decisions:
        guard = _branch_dependencies(last, instructions, deps)
        # a zero-trip guard: computed from what bounds the loop (at least one of its launch constants) and
        # nothing else; not from memory, and not from the thread index alone
        if UNKNOWN in guard or not guard <= bounds or not guard & launch_bounds:
            problems.append(f"threads may skip the loop at {last}: its condition depends on more than the "
                            "loop's own bound (not a zero-trip guard), e.g. a threadIdx test or a flag around "
                            "the loop; the model needs every thread to run the loop loop_trips times")
    return problems


def _predecessors(blocks: list[Block]) -> dict[int, set[int]]:
    """Block index (and EXIT_NODE) -> the blocks that branch or fall through to it."""
    preds: dict[int, set[int]] = {EXIT_NODE: set(), **{b.index: set() for b in blocks}}
    for b in blocks:
        for succ in b.successors:
            preds[succ].add(b.index)
    return preds


def _reach(start: int, edges: dict[int, set[int]]) -> set[int]:
    seen, stack = {start}, [start]
    while stack:
        for n in edges[stack.pop()] - seen:
            seen.add(n)
            stack.append(n)
    return seen


def _dominators_both_ways(blocks: list[Block]) -> tuple[dict[int, set[int]], dict[int, set[int]]]:
    """Dominators from the entry, and post-dominators (dominators of the reversed graph from EXIT_NODE)."""
    ids = [b.index for b in blocks]
    preds = _predecessors(blocks)
    dom = _dominators(ids, preds, ids[0])
    reaches_exit = _reach(EXIT_NODE, preds)
    nodes = [EXIT_NODE] + [n for n in ids if n in reaches_exit]
    successors = {b.index: set(b.successors) for b in blocks}
    pdom = _dominators(nodes, {n: successors.get(n, set()) & reaches_exit for n in nodes}, EXIT_NODE)
    return dom, pdom


def emulates_fp8(instructions: list[Instruction]) -> bool:
    """True when fp8 operands are unpacked to fp16 for HMMA (sm_90's mma.sync fp8, see SM90_FP8_NOTE)."""
    return any(i.base == "F2FP" and "UNPACK_B" in i.modifiers
               and {"E4M3", "E5M2"} & set(i.modifiers) for i in instructions)
