"""One ResNet-50 training step (torchvision, random weights, synthetic images), after a warm-up step.

    python scripts/apps/resnet50_step.py [--batch 64] [--bf16] [--channels-last]
    python scripts/apps/resnet50_step.py --device cpu --dry-run      # tiny, anywhere torch imports

Forward, cross-entropy loss, backward and an SGD (momentum) update. No weights or data are downloaded:
`resnet50(weights=None)`, inputs from torch.randn. The measured step runs inside cudaProfilerStart/Stop
(scripts/apps/app_common.py), so `ncu --profile-from-start off` profiles that step only. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from app_common import add_common_args, emit, require_torch, resolve_device, run_steps

from common.errors import MissingDependency, cli_entry
from scripts.outdir_cli import doc_parser

PROG = "resnet50_step"
CLASSES = 1000
DRY_RUN = {"batch": 2, "image": 64}  # a tiny step: ResNet-50 accepts any image of 32 px or more


def _parser() -> argparse.ArgumentParser:
    p = doc_parser(f"scripts/apps/{PROG}.py", __doc__)
    p.add_argument("--batch", type=int, default=64, help="images per step (default 64)")
    p.add_argument("--image", type=int, default=224, help="image side in pixels (default 224)")
    p.add_argument("--bf16", action="store_true", help="bf16 autocast for forward and loss")
    p.add_argument("--channels-last", action="store_true", help="NHWC memory format for model and inputs")
    add_common_args(p)
    return p


@cli_entry(PROG)
def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    torch = require_torch()
    try:
        import torchvision
    except ImportError:
        raise MissingDependency("resnet50_step needs torchvision (pip install torchvision)") from None
    device = resolve_device(torch, args.device)
    batch, image = (DRY_RUN["batch"], DRY_RUN["image"]) if args.dry_run else (args.batch, args.image)
    fmt = torch.channels_last if args.channels_last else torch.contiguous_format

    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None, num_classes=CLASSES).to(device, memory_format=fmt)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    images = torch.randn(batch, 3, image, image, device=device).contiguous(memory_format=fmt)
    labels = torch.randint(0, CLASSES, (batch,), device=device)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=args.bf16):
            loss = loss_fn(model(images), labels)
        loss.backward()
        optimizer.step()
        return loss.detach()

    result = run_steps(torch, device, step, args.warmup, args.profiler_range)
    emit({"app": "resnet50", "device": str(device), "batch": batch, "image": image, "bf16": args.bf16,
          "channels_last": args.channels_last, "dry_run": args.dry_run, "torch": torch.__version__,
          "loss": result.pop("value"), **result})
    return 0


if __name__ == "__main__":
    sys.exit(main())
