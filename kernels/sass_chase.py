"""The pointer chase's proof from SASS (kernels.latency's latency.* kernels): one global load per trip whose
address comes from the value the load before returned, so no load starts before the last one returns."""

from __future__ import annotations

import re
from collections.abc import Sequence

from .sass import GLOBAL_LOADS, Instruction

_GENERAL_REGISTER = re.compile(r"(?<![\w])R(\d+)(\.64)?\b")
# Instructions whose first operand is no destination register (a store's is its address).
NO_DESTINATION = frozenset({"STG", "STS", "STL", "ST", "RED", "REDG", "BRA", "BAR", "EXIT", "RET"})


def _registers(operand: str) -> set[int]:
    """General registers an operand names (R4.64: R4 and R5); RZ none."""
    found = set()
    for number, wide in _GENERAL_REGISTER.findall(operand):
        found |= {int(number), int(number) + 1} if wide else {int(number)}
    return found


def _written(ins: Instruction) -> set[int]:
    """The general registers an instruction writes: its first operand, widened by a 64-bit result (IMAD.WIDE,
    LDG.E.64) or a 128-bit one (LDG.E.128)."""
    first = _registers(ins.operands[0])
    if len(first) != 1:
        return first
    n = first.pop()
    width = 4 if "128" in ins.modifiers else 2 if {"WIDE", "64"} & set(ins.modifiers) else 1
    return set(range(n, n + width))


def chase_problem(loop: Sequence[Instruction]) -> str | None:
    """Why a loop is not a pointer chase (None when it is): one global load per trip, whose address is computed
    from the value that load returned on the trip before, so no load can start before the last one returns.
    Registers are followed in address order twice round the loop (a value made after the load feeds the next
    trip); a register written from untouched sources no longer carries the loaded value."""
    loads = [i for i in loop if i.base in GLOBAL_LOADS]
    if len(loads) != 1:
        return (f"a pointer chase has one global load per trip, this loop {len(loads)}: unrolled or independent "
                f"loads overlap, and their latency hides (keep the loop rolled: #pragma unroll 1)")
    load = loads[0]
    address = set().union(*(_registers(o) for o in load.operands[1:] if "[" in o))
    carried = _written(load)
    for _ in range(2):
        for ins in loop:
            if ins is load or ins.base in NO_DESTINATION or not ins.operands:
                continue
            written = _written(ins)
            if set().union(*(_registers(o) for o in ins.operands[1:])) & carried:
                carried |= written
            else:
                carried -= written
    if address & carried:
        return None
    return (f"the loop's load {load} takes its address from registers the value it loaded does not reach: the "
            f"loads are independent, not a chase")
