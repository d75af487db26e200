"""`ceilings <command>`: the console script. `ceilings measure ...` is `python -m ceilings.measure ...`."""

from __future__ import annotations

import importlib
import sys
from typing import Sequence

from common.errors import CeilingsError, cli_entry

COMMANDS = {
    "measure": ("ceilings.measure", "run the microbenchmarks and write a roofs file"),
    "compare": ("ceilings.compare", "compare roofs files and datasheets side by side"),
    "fleet": ("ceilings.fleet", "a cluster's roofs files: each GPU against its siblings, outliers named (exit 1)"),
    "inspect": ("kernels.inspect", "prove each kernel's declared work from its SASS (no GPU needed)"),
    "table": ("analysis.ncu", "the profile table: FLOPs, bytes and time per kernel of ncu, nsys and torch.profiler "
              "outputs"),
    "ncu": ("analysis.ncu", "the same as table (its former name)"),
    "roofline": ("analysis.roofline.__main__", "draw application kernels against the measured roofs"),
    "profile": ("analysis.profile", "run ncu with the metrics the roofline needs"),
    "datasheets": ("ceilings.datasheet", "list the datasheet rows (the names --roofs and --on take) and their peaks"),
    "whatif": ("analysis.whatif", "project profiled kernels onto other GPUs' roofs"),
    "llm": ("analysis.llm.__main__",
            "LLM prefill/decode per op on measured roofs: latency, tokens/s, memory, GPU choice"),
    "predict": ("analysis.predict", "a PyTorch model's ops, FLOPs, bytes and time on each GPU, before it runs"),
}


@cli_entry("ceilings")
def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(usage())
        return 0
    if argv[0] not in COMMANDS:
        raise CeilingsError(f"unknown command {argv[0]!r}; choose one of {', '.join(COMMANDS)} "
                            f"(`ceilings --help` says what each does)")
    return importlib.import_module(COMMANDS[argv[0]][0]).main(argv[1:])


def usage() -> str:
    width = max(map(len, COMMANDS))
    lines = ["usage: ceilings <command> [options]   (each also runs as python -m <module>)", "", "commands:"]
    lines += [f"  {name.ljust(width)}  {what}  [{module}]" for name, (module, what) in COMMANDS.items()]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
