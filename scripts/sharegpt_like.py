"""Write a workload of ShareGPT-like request lengths for `python -m analysis.llm --serve --workload`.

The lengths are synthetic: log-normal (sigma 1.0), scaled so that their means are those the published
ShareGPT serving runs report (224 prompt and 189-205 output tokens a request: the sglang.bench_serving logs at
https://github.com/sgl-project/sglang/issues/2097 and https://github.com/sgl-project/sglang/issues/1268, and
vLLM's benchmark at https://github.com/vllm-project/vllm/pull/18566), prompts cut at 2,048 tokens and requests at
the 4,096-token context of those runs' --max-model-len. It is not ShareGPT itself (not shipped here): only its
lengths' order of magnitude.

    python scripts/sharegpt_like.py examples/workloads/sharegpt-like.csv [--requests 2000] [--seed 0]
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.atomic import write_text  # noqa: E402
from common.errors import CeilingsError, cli_entry  # noqa: E402
from scripts.outdir_cli import doc_parser  # noqa: E402

PROG = "sharegpt_like"
PROMPT_MEAN, OUTPUT_MEAN, SIGMA, CONTEXT = 224, 197, 1.0, 4096


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    import numpy as np

    p = doc_parser(f"scripts/{PROG}.py", __doc__)
    p.add_argument("out", help="the CSV to write (prompt_tokens, output_tokens)")
    p.add_argument("--requests", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--force", action="store_true", help="overwrite an existing file")
    args = p.parse_args(argv)
    if args.requests < 1:
        raise CeilingsError(f"--requests {args.requests}: give 1 or more")
    rng = np.random.default_rng(args.seed)
    # a log-normal of mean m has mu = ln(m) - sigma^2 / 2
    prompt = rng.lognormal(math.log(PROMPT_MEAN) - SIGMA**2 / 2, SIGMA, args.requests)
    output = rng.lognormal(math.log(OUTPUT_MEAN) - SIGMA**2 / 2, SIGMA, args.requests)
    prompt = np.clip(np.rint(prompt), 4, CONTEXT // 2).astype(int)
    output = np.clip(np.rint(output), 1, CONTEXT - prompt).astype(int)
    write_text(args.out, "prompt_tokens,output_tokens\n" + "".join(f"{a},{b}\n" for a, b in zip(prompt, output)),
               force=args.force)
    print(f"wrote {args.out}: {args.requests} requests, mean {prompt.mean():.0f} prompt and {output.mean():.0f} "
          f"output tokens", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
