"""LLM inference on measured roofs: prefill and decode work per op from a model's config.json, placed on the
roofs of one or more GPUs (`python -m analysis.llm`), calibrated by a real profile. See docs/llm.md."""
