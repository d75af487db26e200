"""The two profiled applications, run tiny on the CPU (`--device cpu --dry-run`): no CUDA, no downloads.

Skipped where torch/torchvision are not installed (they are not dependencies of this project); the GPU
machine has them. Locally: pip install torch (a CPU build) and torchvision into a separate environment.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

APPS = Path(__file__).resolve().parents[1] / "scripts" / "apps"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, APPS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _run(module, argv, capsys) -> dict:
    assert module.main(argv) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_llama_ffn_width():
    decode = _load("decode_step")
    assert decode.ffn_dim(4096) == 11008  # 2/3 x 4 x 4096 = 10922.7, up to a multiple of 256: 43 x 256
    assert decode.ffn_dim(128) == 512  # 341.3 -> 2 x 256


def test_decode_step_dry_run_on_cpu(capsys):
    pytest.importorskip("torch")
    rec = _run(_load("decode_step"), ["--device", "cpu", "--dry-run"], capsys)
    assert (rec["layers"], rec["d_model"], rec["batch"], rec["context"], rec["vocab"]) == (2, 128, 2, 16, 256)
    # per layer: qkv 384x128 + o 128x128 + gate_up 1024x128 + down 128x512 + 2 norms of 128 = 262400;
    # x 2 layers + head 256x128 + final norm 128 = 557696 bf16 values
    assert rec["weight_bytes"] == 557696 * 2
    # k and v: 2 layers x (batch 2 x 1 head x 17 positions x 128) each
    assert rec["kv_cache_bytes"] == 2 * 2 * (2 * 1 * 17 * 128) * 2
    assert rec["step_s"] > 0 and rec["warmup_steps"] == 1


def test_decode_step_is_deterministic(capsys):
    pytest.importorskip("torch")
    decode = _load("decode_step")
    first = _run(decode, ["--device", "cpu", "--dry-run", "--dtype", "fp32"], capsys)["token_sum"]
    assert _run(decode, ["--device", "cpu", "--dry-run", "--dtype", "fp32"], capsys)["token_sum"] == first


def test_resnet50_step_dry_run_on_cpu(capsys):
    pytest.importorskip("torch")
    pytest.importorskip("torchvision")
    rec = _run(_load("resnet50_step"), ["--device", "cpu", "--dry-run", "--bf16", "--channels-last"], capsys)
    assert (rec["batch"], rec["image"], rec["bf16"], rec["channels_last"]) == (2, 64, True, True)
    assert rec["loss"] == rec["loss"] and rec["loss"] >= 0  # a finite cross-entropy, not NaN


def test_missing_torch_is_a_one_line_error(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # import torch -> ImportError
    assert _load("decode_step").main(["--device", "cpu", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "needs PyTorch" in err
