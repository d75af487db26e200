"""Placeholder until this family lands."""
BENCHMARKS: list = []
