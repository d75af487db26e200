"""A prediction checked against a real torch.profiler trace of the same model (analysis.predict --against):
per class of op (analysis.ops.OP_CLASSES; a trace records aten::linear where a recorded run has
aten::addmm), the predicted FLOPs beside the trace's, and the time of the predicted work at the trace GPU's roofs
beside the measured kernel time: their ratio is the efficiency the model reached on that GPU. The work's time
is taken without the launch floor (the rate a host launches kernels: a kernel's own device time, which a trace
measures, can be shorter), so it is a lower bound of the kernel time and the efficiency at most 1."""

from __future__ import annotations

from ceilings.lazy import lazy
from common.text import aligned

pd = lazy("pandas")

OTHER = "(no op model)"  # kernels and op calls whose op has no model: their time only
COLUMNS = ["class", "predicted_flops", "trace_flops", "predicted_s", "measured_s", "efficiency"]


def against(ops: pd.DataFrame, predicted_s: pd.Series, trace: pd.DataFrame) -> pd.DataFrame:
    """COLUMNS per class of op: `ops` (analysis.predict.op_table) with their `predicted_s` at the trace GPU's
    roofs, and `trace` (analysis.ncu.kernel_table of the trace, by op). FLOPs are summed where every row of
    the class has them (else missing); efficiency is predicted over measured time."""
    from analysis.ops import op_class

    def per_class(names: pd.Series, flops: pd.Series, time_s: pd.Series, prefix: str) -> pd.DataFrame:
        rows = pd.DataFrame({"class": names.map(lambda n: op_class(n) or OTHER), "flops": flops, "time_s": time_s})
        # a part unknown: the class's sum unknown, never a partial one
        sums = rows.groupby("class")[["flops", "time_s"]].agg(lambda v: v.sum(skipna=False))
        return sums.rename(columns={"flops": f"{prefix}_flops", "time_s": f"{prefix}_s"})

    table = per_class(ops["op"], ops["flops"], predicted_s, "predicted").join(
        per_class(trace["kernel"], trace["flops"], trace["time_s"], "trace"), how="outer")
    table = table.rename(columns={"trace_s": "measured_s"}).rename_axis("class").reset_index()[COLUMNS[:-1]]
    table["efficiency"] = table["predicted_s"] / table["measured_s"].where(table["measured_s"] > 0)
    return table.sort_values("measured_s", ascending=False, na_position="last").reset_index(drop=True)


def render(table: pd.DataFrame, gpu_label: str, roofs: str, trace: str) -> str:
    """The check for a terminal: the totals on the trace GPU's roofs (`roofs`: their provenance, measured or
    datasheet), then a line per class of op."""
    from analysis.roofline import percent, seconds, si

    total_p, total_m = table["predicted_s"].sum(), table["measured_s"].sum()
    headline = (f"against {trace} on {gpu_label}: {roofs}; the predicted work takes {seconds(total_p)} at the "
                f"roofs (no launch floor), the trace's kernels {seconds(total_m)}: {percent(total_p, total_m)} "
                f"efficiency overall")
    rows = [[r["class"], si(r["predicted_flops"], "FLOP"), si(r["trace_flops"], "FLOP"), seconds(r["predicted_s"]),
             seconds(r["measured_s"]), percent(r["predicted_s"], r["measured_s"])] for r in table.to_dict("records")]
    header = ["class of op", "predicted", "traced", "predicted", "measured", "efficiency"]
    return headline + "\n\n" + aligned(header, rows, left={"class of op"})


def disagreements(table: pd.DataFrame, tolerance: float = 1e-6) -> list[str]:
    """Warnings: a class whose FLOPs differ between the prediction and the trace (another model, batch or
    dtype?), and one predicted slower than measured (the lower bound broken: the roofs are below what the GPU
    did, or the prediction counts work the GPU skipped)."""
    out = []
    both = table.dropna(subset=["predicted_flops", "trace_flops"])
    apart = both[(both["predicted_flops"] - both["trace_flops"]).abs() > tolerance * both["trace_flops"].abs()]
    if len(apart):
        out.append("FLOPs differ from the trace's in " + ", ".join(
            f"{r['class']} ({r['predicted_flops']:.4g} predicted, {r['trace_flops']:.4g} traced)"
            for r in apart.to_dict("records")) + ": is it the same model, batch, sequence and dtype?")
    slow = table[table["efficiency"] > 1]
    if len(slow):
        out.append("predicted slower than measured in " + ", ".join(map(str, slow["class"])) + ": the GPU beat "
                   "the lower bound; are the roofs those of the trace's GPU and clock?")
    return out


def efficiencies(table: pd.DataFrame) -> dict[str, float]:
    """Per class of op with a known, positive efficiency: it, at most 1 (kernels that beat the bound count as at
    it): what --calibrate divides another GPU's predicted work time by."""
    known = table[table["efficiency"] > 0]
    return {str(c): min(float(e), 1.0) for c, e in zip(known["class"], known["efficiency"])}

