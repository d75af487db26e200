"""ceilings: measured GPU roofs (bandwidth and FLOP/s) and rooflines of real applications against them."""

__version__ = "0.1.0"
