"""analysis.llm.models: configs from a config.json or a shipped name; parameter counts worked out by hand from the
published config values (and checked against the counts the model cards publish)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from analysis.llm.models import SHIPPED, load_model, model_from_config
from analysis.llm.work import parameters
from common.errors import CeilingsError

DATA = Path(__file__).parent / "data" / "llm"


def test_a_config_json_and_the_shipped_name_give_the_same_model():
    from_file, warnings = load_model(str(DATA / "Llama-3.1-8B-config.json"))
    shipped, _ = load_model("llama-3.1-8b")  # any case
    assert warnings == []
    for field in ("hidden", "intermediate", "layers", "heads", "kv_heads", "head_dim", "vocab", "tied", "norm",
                  "biased", "experts", "max_context"):
        assert getattr(from_file, field) == getattr(shipped, field), field
    assert (shipped.hidden, shipped.kv_heads, shipped.head_dim, shipped.vocab) == (4096, 8, 4096 // 32, 128256)
    assert shipped.source == "https://huggingface.co/meta-llama/Llama-3.1-8B/blob/main/config.json"


def test_a_folder_holding_config_json_is_read():
    model, _ = load_model(str(DATA / "tiny-llama"))
    assert (model.name, model.hidden, model.heads, model.kv_heads, model.head_dim) == ("tiny-llama", 256, 4, 2, 64)


@pytest.mark.parametrize("name, expected", [
    # embedding 128256 x 4096 = 525,336,576, the LM head as much again; a layer: q 4096^2 + k, v 4096 x 1024 + o
    # 4096^2 = 41,943,040, MLP 3 x 4096 x 14336 = 176,160,768, two norms 8192; 32 layers; final norm 4096
    ("Llama-3.1-8B", 2 * 525_336_576 + 32 * (41_943_040 + 176_160_768 + 8192) + 4096),  # 8.03 B published
    # tied: the table once (151936 x 896); q/k/v biases 896 + 128 + 128; MLP 3 x 896 x 4864; 24 layers
    ("Qwen2.5-0.5B", 151936 * 896 + 24 * (896 * 896 * 2 + 896 * 128 * 2 + 1152 + 3 * 896 * 4864 + 2 * 896) + 896),
    # 8 experts of 3 x 4096 x 14336 and a router 4096 x 8 per layer; vocab 32000
    ("Mixtral-8x7B-v0.1", 2 * 32000 * 4096 + 32 * (41_943_040 + 8 * 176_160_768 + 4096 * 8 + 8192) + 4096),
])
def test_parameters_by_hand(name, expected):
    assert parameters(load_model(name)[0]) == expected


def test_published_parameter_counts():
    """The model cards' rounded counts (8.03 B, 70.6 B, 1.24 B, 7.25 B, 46.7 B, 7.62 B, 0.49 B; DeepSeek-V3 671 B,
    Qwen3-30B-A3B 30.5 B, gpt-oss 116.83 B and 20.91 B)."""
    published = {"Llama-3.1-8B": 8.03e9, "Llama-3.1-70B": 70.6e9, "Llama-3.2-1B": 1.24e9, "Mistral-7B-v0.3": 7.25e9,
                 "Mixtral-8x7B-v0.1": 46.7e9, "Qwen2.5-7B": 7.62e9, "Qwen2.5-0.5B": 0.494e9, "DeepSeek-V3": 671e9,
                 "Qwen3-30B-A3B": 30.5e9, "gpt-oss-120b": 117e9, "gpt-oss-20b": 20.9e9}
    assert set(published) == set(SHIPPED)
    for name, count in published.items():
        assert float(f"{parameters(load_model(name)[0]):.3g}") == count, name  # to the published 3 digits


def test_shipped_models_cover_moe_gqa_and_tied_embeddings():
    models = {name: load_model(name)[0] for name in SHIPPED}
    assert models["Mixtral-8x7B-v0.1"].moe and (models["Mixtral-8x7B-v0.1"].experts,
                                                 models["Mixtral-8x7B-v0.1"].experts_per_token) == (8, 2)
    assert models["Llama-3.2-1B"].tied and models["Qwen2.5-0.5B"].tied
    assert models["Llama-3.2-1B"].head_dim == 64  # given in the config, not 2048 / 32 derived
    assert models["Qwen2.5-7B"].biased == {"qkv"} and models["Llama-3.1-8B"].biased == set()
    assert models["Qwen2.5-7B"].sliding_window is None  # use_sliding_window is false


def test_fragments_and_ambiguous_names():
    assert load_model("mixtral")[0].name == "Mixtral-8x7B-v0.1"
    with pytest.raises(CeilingsError, match="ambiguous: Llama-3.1-8B, Llama-3.1-70B"):
        load_model("llama-3.1")
    with pytest.raises(CeilingsError, match="no such file and no shipped model"):
        load_model("gpt-5")


def test_fields_the_config_lacks_take_the_config_class_defaults():
    """LlamaConfig: no num_key_value_heads is one KV head per head; no head_dim is hidden / heads; no
    tie_word_embeddings is False (PretrainedConfig's True would be wrong here)."""
    model = model_from_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                               "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10}, "m", "test")
    assert (model.kv_heads, model.head_dim, model.tied, model.activation) == (4, 16, False, "silu")
    assert model.attention == "multi-head"


def test_layernorm_without_weights_and_attention_bias():
    olmo, _ = load_model(str(DATA / "tiny-olmo.json"))
    assert (olmo.norm, olmo.norm_weights, olmo.kv_heads) == ("layer", False, 2)
    # a LayerNorm without weights holds no parameters: tied table 100 x 64, q k v o 4 x 64^2, MLP 3 x 64 x 128
    assert parameters(olmo) == 100 * 64 + 4 * 64 * 64 + 3 * 64 * 128
    biased = model_from_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
                                "num_hidden_layers": 1, "num_attention_heads": 4, "vocab_size": 10,
                                "attention_bias": True}, "m", "test")
    assert biased.biased == {"qkv", "o"}


@pytest.mark.parametrize("change, covered", [
    ({}, 0),  # Qwen2Config: use_sliding_window defaults to false, whatever sliding_window says
    ({"use_sliding_window": True}, 0),  # max_window_layers defaults to 28: no layer of 28 past it
    ({"use_sliding_window": True, "max_window_layers": 20}, 8),  # layers 20 ... 27 slide
    ({"use_sliding_window": True, "max_window_layers": 0}, 28),
    ({"use_sliding_window": True, "layer_types": ["full_attention"] * 25 + ["sliding_attention"] * 3}, 3),
])
def test_qwen2_windows_cover_the_layers_from_max_window_layers(change, covered):
    """transformers' Qwen2Config without layer_types: layer i slides when i >= max_window_layers."""
    config = {k: v for k, v in SHIPPED["Qwen2.5-7B"][1].items() if k != "use_sliding_window"}
    config.update(sliding_window=4096, **change)
    model = model_from_config(config, "q", "test")
    assert (model.window_layers, model.sliding_window) == (covered, 4096 if covered else None)


def test_a_negative_max_window_layers_is_named():
    config = {**SHIPPED["Qwen2.5-7B"][1], "use_sliding_window": True, "max_window_layers": -1}
    with pytest.raises(CeilingsError, match="max_window_layers = -1 must be a whole number, 0 or more"):
        model_from_config(config, "q", "test")


def test_gpt_oss_without_layer_types_slides_on_even_layers_and_with_none_sliding_has_no_window():
    config = {**SHIPPED["gpt-oss-20b"][1]}
    del config["layer_types"]
    assert load_model("gpt-oss-20b")[0].window_layers == model_from_config(config, "g", "t").window_layers == 12
    config["layer_types"] = ["full_attention"] * 24
    assert model_from_config(config, "g", "t").sliding_window is None


@pytest.mark.parametrize("change, needle", [
    ({"model_type": "gpt2"}, "model_type 'gpt2' is not modelled"),
    ({"hidden_size": None}, "hidden_size is missing"),
    ({"num_hidden_layers": 0}, "num_hidden_layers = 0 must be a positive whole number"),
    ({"num_key_value_heads": 3}, "not a multiple of num_key_value_heads 3"),
    ({"hidden_act": "gelu"}, "hidden_act 'gelu' is not modelled"),
    ({"hidden_act": ["silu"]}, r"hidden_act \['silu'\] is not modelled"),
    ({"tie_word_embeddings": "false"}, "tie_word_embeddings = 'false' must be true or false"),
    ({"attention_bias": 0}, "attention_bias = 0 must be true or false"),
    ({"mlp_bias": "no"}, "mlp_bias = 'no' must be true or false"),
    ({"hidden_size": [256]}, r"hidden_size = \[256\] must be a positive whole number"),
    ({"intermediate_size": float("nan")}, "intermediate_size = nan must be a positive whole number"),
    ({"vocab_size": float("inf")}, "vocab_size = inf must be a positive whole number"),
    ({"num_hidden_layers": 10**9}, r"num_hidden_layers = 1000000000 is beyond any model \(at most 4096\)"),
    ({"max_position_embeddings": -1}, "max_position_embeddings = -1 must be a positive whole number"),
    ({"model_type": ["llama"]}, r"model_type = \['llama'\] must be a string"),
])
def test_config_errors_name_the_field(change, needle):
    config = {**json.loads((DATA / "tiny-llama" / "config.json").read_text()), **change}
    with pytest.raises(CeilingsError, match=needle):
        model_from_config(config, "m", "test")  # a null field is a missing one


def test_a_multimodal_config_says_where_the_decoder_is(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llama", "text_config": {"hidden_size": 64}}))
    with pytest.raises(CeilingsError, match="hidden_size is missing .*text_config"):
        load_model(str(path))


def test_a_quantized_checkpoint_is_named_in_a_warning(tmp_path):
    config = json.loads((DATA / "tiny-llama" / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "awq", "bits": 4, "group_size": 128}
    (tmp_path / "config.json").write_text(json.dumps(config))
    _, warnings = load_model(str(tmp_path))
    assert warnings and "quant_method awq, bits 4, group_size 128" in warnings[0] and "--weights" in warnings[0]


def test_an_unreadable_config_is_one_line(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(CeilingsError, match="is not JSON"):
        load_model(str(tmp_path / "bad.json"))
    with pytest.raises(CeilingsError, match="cannot read"):
        load_model(str(tmp_path / "absent.json"))


def test_a_trillion_experts_is_refused_at_once():
    config = {**json.loads((DATA / "tiny-llama" / "config.json").read_text()), "model_type": "mixtral",
              "num_local_experts": 10**12, "num_experts_per_tok": 2}
    with pytest.raises(CeilingsError, match="num_local_experts = 1000000000000 is beyond any model"):
        model_from_config(config, "m", "test")


def test_a_multimodal_config_without_text_config_says_so():
    with pytest.raises(CeilingsError, match="no text_config: a multimodal config needs its decoder's"):
        model_from_config({"model_type": "llava", "vision_config": {"hidden_size": 1024}}, "m", "test")


def test_a_multimodal_config_models_its_text_config(tmp_path):
    text = json.loads((DATA / "tiny-llama" / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llava", "text_config": text,
                                                      "vision_config": {"hidden_size": 64}}))
    model, warnings = load_model(str(tmp_path))
    assert model.hidden == text["hidden_size"] and model.layers == text["num_hidden_layers"]
    assert any("vision encoder and image tokens are not" in w for w in warnings)


def test_configs_that_are_not_utf8_or_not_files_are_one_line_errors(tmp_path):
    text = (DATA / "tiny-llama" / "config.json").read_text()
    (tmp_path / "utf16.json").write_text(text, encoding="utf-16")
    with pytest.raises(CeilingsError, match="is UTF-16 text; save it as UTF-8"):
        load_model(str(tmp_path / "utf16.json"))
    (tmp_path / "latin1.json").write_bytes('{"model_type": "llama", "_name_or_path": "caf\xe9"}'.encode("latin-1"))
    with pytest.raises(CeilingsError, match="is not UTF-8 text"):
        load_model(str(tmp_path / "latin1.json"))
    fifo = tmp_path / "fifo.json"
    os.mkfifo(fifo)
    with pytest.raises(CeilingsError, match="is not a regular file"):
        load_model(str(fifo))  # returns at once: nothing is read from the pipe


@pytest.mark.parametrize("model_type, extra, covered, window", [
    ("mistral", {}, 2, 4096),  # MistralConfig: sliding_window=4096 when the config leaves it out, every layer
    ("mistral", {"sliding_window": None}, 0, None),  # an explicit null (Mistral-7B-v0.3's) is no window
    ("qwen2", {"use_sliding_window": True, "max_window_layers": 1}, 1, 4096),  # Qwen2Config's 4096 from layer 1
    ("qwen2", {}, 0, None),  # use_sliding_window false by default
    ("qwen3_moe", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 64}, 0, None),
])
def test_a_config_without_sliding_window_takes_its_config_class_default(model_type, extra, covered, window):
    config = {**json.loads((DATA / "tiny-llama" / "config.json").read_text()), "model_type": model_type, **extra}
    model = model_from_config(config, "m", "test")
    assert (model.window_layers, model.sliding_window) == (covered, window)


@pytest.mark.parametrize("argv, names", [
    (["--prompt", "200", "--gen", "100"], "--prompt 200 + --gen 100: 300 tokens is past"),
    (["--prompt", "10", "--gen", "10", "--step", "1:500"], "--step 1:500: 501 tokens is past"),
    (["--serve", "--rate", "1", "--prompt", "250", "--gen", "10"], "--prompt 250 + --gen 10: 260 tokens is past"),
    (["--serve", "--prompt", "10", "--gen", "10", "--workload", "WORKLOAD"],
     "w.csv:3: prompt_tokens + output_tokens: 301 tokens is past"),
])
def test_a_window_on_layers_not_known_is_refused_past_it_on_every_path(tmp_path, capsys, argv, names):
    """A llama config with a sliding_window and no layer_types: which layers slide is not known, so every
    length past the window (the prompt and output, a --step, a workload's request) is refused, naming it."""
    from analysis.llm.__main__ import main

    config = {**json.loads((DATA / "tiny-llama" / "config.json").read_text()), "sliding_window": 256}
    (tmp_path / "c.json").write_text(json.dumps(config))
    (tmp_path / "w.csv").write_text("prompt_tokens,output_tokens\n100,10\n300,1\n")
    argv = [str(tmp_path / "w.csv") if a == "WORKLOAD" else a for a in argv]
    assert main(["--model", str(tmp_path / "c.json"), "--roofs", "H100 SXM", *argv]) == 2
    err = capsys.readouterr().err
    assert names in err and "sliding_window (256)" in err and "give layer_types" in err
    assert len(err.splitlines()) == 1


def test_the_text_report_says_which_layers_slide():
    from analysis.llm.report import model_lines
    from analysis.llm.work import Setup

    config = SHIPPED["gpt-oss-20b"][1]
    sliding = config["layer_types"].count("sliding_attention")
    line = model_lines(load_model("gpt-oss-20b")[0], Setup())[0]
    assert f"{config['num_hidden_layers']} layers, a sliding window of {config['sliding_window']} tokens on " \
           f"{sliding} of them" in line
    assert "sliding window" not in model_lines(load_model("Llama-3.1-8B")[0], Setup())[0]


def test_gpt_oss_names_its_experts_a_token_either_way():
    """GptOssConfig's config.json may give experts_per_token alone; num_experts_per_tok wins where both are."""
    config = {k: v for k, v in SHIPPED["gpt-oss-20b"][1].items() if k != "num_experts_per_tok"}
    assert model_from_config({**config, "experts_per_token": 3}, "g", "t").experts_per_token == 3
    assert model_from_config({**config, "experts_per_token": 3, "num_experts_per_tok": 2}, "g", "t") \
        .experts_per_token == 2
    with pytest.raises(CeilingsError, match="experts_per_token = 0 must be a positive whole number"):
        model_from_config({**config, "experts_per_token": 0}, "g", "t")
    llama_moe = {**SHIPPED["Mixtral-8x7B-v0.1"][1], "experts_per_token": 3}
    assert model_from_config(llama_moe, "m", "t").experts_per_token == 2  # only gpt-oss reads that name
