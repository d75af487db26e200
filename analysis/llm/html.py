"""The page of analysis.llm --html, rendered by common.html: the ops of each GPU on its roofs, drawn as
analysis.llm.plot draws them, and the batch sweep of the decode step."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from analysis.figure import NEUTRAL_COLOR, decades, drawable, roofs_only
from analysis.html import chart_lines, chart_ridges
from analysis.llm.plot import (
    CLASS_COLORS,
    GPU_COLORS,
    MARKER_AREA_MIN,
    MARKER_AREA_SPAN,
    PHASE_MARKERS,
    not_on_plot,
    ops_view,
)
from analysis.llm.report import floor_text
from analysis.llm.serve import closed_loop, load
from analysis.roofline import seconds, si
from common.html import chart_section, count_text, frame_table, notes_section, page, table_section

SWEEP_MARGIN = 1.5  # the batch sweep's axis reaches this factor beyond its smallest and largest batch


def llm_page(model, results: Sequence, sweep: pd.DataFrame | None, *, warnings: Sequence[str] = (),
             floors: bool = True, serving: Sequence | None = None) -> str:
    """analysis.llm --html: per GPU the model's prefill and decode ops on its roofs (as analysis.llm.plot
    draws them: op class by colour, which the legend filters, phase by shape), every op in a table; the batch
    sweep of the decode step (each GPU a line, hollow where weights and KV cache do not fit, dashed where the
    weight GEMMs turn compute-bound); a summary per GPU and the warnings."""
    pct = lambda v: f"{v * 100:.1f}%"
    sections = []
    for i, r in enumerate(results):
        ops, drawn, x_range, y_range = ops_view(r)
        # ops_view's ops keep their position in prefill + decode (one index), the table's rows
        placed = pd.concat([r.prefill, r.decode], ignore_index=True)
        placed["share"] = placed["time_s"] / placed.groupby("phase")["time_s"].transform("sum")
        placed["ai"] = placed["flops"] / placed["bytes"]
        cols = [("op", "op", None), ("phase", "phase", None), ("op_class", "op class", None),
                ("count", "count", count_text), ("roof", "roof", None), ("bound", "bound", None),
                ("flops", "FLOPs", lambda v: si(v, "FLOP")), ("bytes", "bytes", lambda v: si(v, "B")),
                ("ai", "AI (FLOP/B)", lambda v: f"{v:.3g}"), ("time_s", "time", seconds), ("share", "share", pct),
                ("time_at_roof_s", "at roof", seconds), ("efficiency", "efficiency", lambda v: f"{v:.2f}"),
                ("why", "why", None)]
        table = frame_table(placed, cols)
        marks = [{"gid": f"llm:{phase}:{cls}", "filter": cls, "hollow": False, "color": CLASS_COLORS[cls],
                  "shape": PHASE_MARKERS[phase],
                  "points": [[int(j), o.ai, o.flop_per_s, MARKER_AREA_MIN + o.share * MARKER_AREA_SPAN]
                             for j, o in group.iterrows()]}
                 for (phase, cls), group in ops.groupby(["phase", "op_class"])]
        lines, ridges = roofs_only(drawn, x_range)
        legend = [{"label": c, "kind": "patch", "color": CLASS_COLORS[c], "shape": "s", "filter": c}
                  for c in CLASS_COLORS if c in set(ops["op_class"])]
        legend += [{"label": p + (" (first step)" if p == "decode" else ""), "kind": "marker",
                    "color": NEUTRAL_COLOR, "shape": PHASE_MARKERS[p], "filter": None}
                   for p in PHASE_MARKERS if p in set(ops["phase"])]
        legend.append({"label": "marker area ∝ share of its phase's time", "kind": "text", "color": NEUTRAL_COLOR,
                       "shape": "o", "filter": None})
        st = r.setup
        sections.append(chart_section(
            f"ops-{i}", f"{model.name} on {r.gpu.label}: prefill of {st.prompt} tokens, decode step at context "
            f"{st.prompt}, batch {st.batch}", subtitle=[f"roofs: {r.gpu.roofs.provenance}", floor_text(r, floors)],
            warning=not r.gpu.roofs.measured, x_range=x_range, y_range=y_range,
            xlabel="Arithmetic intensity (FLOP/byte, DRAM)", ylabel="Performance (FLOP/s)", y_unit="FLOP/s",
            lines=chart_lines(lines), ridges=chart_ridges(ridges), marks=marks, legend=legend,
            legend_title="ops (op class)",
            filters=list(placed["op_class"]), table=table,
            notes=[not_on_plot(r, ops)]))
    if sweep is not None and len(sweep):
        sections.append(_sweep_section(model, sweep, results, GPU_COLORS))
    if serving and any(load(m) is not None for s in serving for m in s.runs):
        sections.append(_serve_section(model, serving, GPU_COLORS))
    summary = pd.DataFrame([{"gpu": r.gpu.label, "ttft": r.ttft_s, "step": r.first_step_s, "mean": r.mean_step_s,
                             "tps": r.tokens_per_s, "fits": {True: "yes", False: "no", None: "unknown"}[r.memory.fits],
                             "max_batch": r.memory.max_batch, "crossover": r.crossover_batch} for r in results])
    sections.append(table_section("summary", "Per GPU", frame_table(summary, [
        ("gpu", "GPU", None), ("ttft", "time to first token", seconds), ("step", "first decode step", seconds),
        ("mean", "time per output token", seconds), ("tps", "tokens/s", lambda v: f"{v:,.0f}"),
        ("fits", "weights + KV cache fit", None), ("max_batch", "largest batch", count_text),
        ("crossover", "GEMMs compute-bound from batch", count_text)])))
    sections.append(notes_section("warnings", "Warnings", warnings))
    return page(f"{model.name}: prefill and decode on the roofs", sections)


def _sweep_section(model, sweep: pd.DataFrame, results: Sequence, colors: Sequence[str]) -> dict:
    """The batch sweep (analysis.llm.place.batch_sweep) as a log-log chart: tokens/s against batch per GPU."""
    sweep = sweep.reset_index(drop=True)
    marks, joins, lines, legend = [], [], [], []
    y = sweep["tokens_per_s"].to_numpy(dtype=float)
    y = y[drawable(y)]
    y_range = decades(min(y, default=1.0), max(y, default=1.0), 2)
    x_range = (sweep["batch"].min() / SWEEP_MARGIN, sweep["batch"].max() * SWEEP_MARGIN)  # no point on an edge
    for i, r in enumerate(results):
        color, label = colors[i % len(colors)], r.gpu.label
        rows = sweep[(sweep["gpu"] == label) & drawable(sweep["tokens_per_s"])]
        fits = rows["fits"].map(lambda f: f is not False)
        for hollow, part in ((False, rows[fits]), (True, rows[~fits])):
            if len(part):
                marks.append({"gid": f"sweep:{label}" + (":no-fit" if hollow else ""), "filter": label,
                              "hollow": hollow, "color": color, "shape": "o",
                              "points": [[int(j), float(o.batch), float(o.tokens_per_s), 30.0]
                                         for j, o in part.iterrows()]})
        if len(rows):
            joins.append([int(rows.index[0]), color, [[float(b), float(t)] for b, t in
                                                      zip(rows["batch"], rows["tokens_per_s"])]])
        c = r.crossover_batch
        if c is not None and c <= sweep["batch"].max():
            lines.append({"gid": f"crossover:{label}", "x": [c, c], "y": list(y_range), "color": color, "width": 1,
                          "datasheet": False, "dash": True, "slope": False, "label_row": len(lines),
                          "label": f"compute-bound GEMMs from batch {c}"})
        legend.append({"label": label, "kind": "marker", "color": color, "shape": "o", "filter": label})
    legend += [{"label": "weights + KV cache do not fit", "kind": "hollow", "color": NEUTRAL_COLOR, "shape": "o",
                "filter": None},
               {"label": "weight GEMMs compute-bound from here", "kind": "datasheet", "color": NEUTRAL_COLOR,
                "shape": "o", "filter": None}]
    cols = [("gpu", "GPU", None), ("batch", "batch", count_text), ("step_time_s", "step time", seconds),
            ("tokens_per_s", "tokens/s", lambda v: f"{v:,.0f}"), ("gemms", "weight GEMMs", None),
            ("fits", "fits", None)]
    table = frame_table(sweep.assign(fits=sweep["fits"].map({True: "yes", False: "no", None: "unknown"})), cols)
    s = results[0].setup
    sources = "; ".join(dict.fromkeys(r.gpu.roofs.provenance for r in results))
    return chart_section(
        "sweep", f"{model.name}: decode step at context {s.prompt} ({s.weights} weights, {s.kv_cache} KV cache), "
        f"KV cache for {s.prompt + s.gen} tokens a sequence", subtitle=[f"roofs: {sources}"],
        warning=not all(r.gpu.roofs.measured for r in results), x_range=x_range, y_range=y_range,
        xlabel="batch (sequences decoded together)", ylabel="decode tokens/s (batch / step time)", y_unit="tok/s",
        lines=lines, marks=marks, joins=joins, filters=list(sweep["gpu"]), legend=legend,
        legend_title="decode on each GPU", table=table)


def _serve_section(model, serving: Sequence, colors: Sequence[str]) -> dict:
    """--serve's time to first token against the request rate, per GPU: P50 filled, P99 hollow; every metric of
    every rate in the table."""
    closed = closed_loop(serving)
    rows = pd.DataFrame([{"gpu": s.gpu.label, "rate": load(m),
                          "ttft50": m["ttft_s"]["p50"],
                          "ttft99": m["ttft_s"]["p99"], "tpot50": m["tpot_s"]["p50"], "tpot99": m["tpot_s"]["p99"],
                          "itl99": m["itl_s"]["p99"], "e2e50": m["e2e_s"]["p50"], "e2e99": m["e2e_s"]["p99"],
                          "tokens": m["output_tokens_per_s"], "requests": m["requests_per_s"],
                          "batch": m["max_batch"], "preempted": m["preemptions"]}
                         for s in serving for m in s.runs if load(m) is not None])
    marks, joins, legend = [], [], []
    for i, s in enumerate(serving):
        color, label = colors[i % len(colors)], s.gpu.label
        part = rows[rows["gpu"] == label]
        for column, hollow in (("ttft50", False), ("ttft99", True)):
            marks.append({"gid": f"serve:{label}:{column}", "filter": label, "hollow": hollow, "color": color,
                          "shape": "o", "points": [[int(j), float(o.rate), float(getattr(o, column)), 30.0]
                                                   for j, o in part.iterrows()]})
            joins.append([int(part.index[0]), color, [[float(r), float(t)] for r, t in zip(part["rate"],
                                                                                         part[column])]])
        legend.append({"label": label, "kind": "marker", "color": color, "shape": "o", "filter": label})
    legend.append({"label": "hollow: P99, filled: P50", "kind": "hollow", "color": NEUTRAL_COLOR, "shape": "o",
                   "filter": None})
    ms = lambda v: f"{v * 1e3:.1f} ms"
    table = frame_table(rows, [("gpu", "GPU", None), ("rate", "clients" if closed else "rate/s", lambda v: f"{v:g}"),
                               ("ttft50", "TTFT p50", ms), ("ttft99", "TTFT p99", ms), ("tpot50", "TPOT p50", ms),
                               ("tpot99", "TPOT p99", ms), ("itl99", "ITL p99", ms), ("e2e50", "E2E p50", ms),
                               ("e2e99", "E2E p99", ms), ("tokens", "output tok/s", lambda v: f"{v:,.0f}"),
                               ("requests", "requests/s", lambda v: f"{v:.3g}"), ("batch", "max batch", count_text),
                               ("preempted", "preemptions", count_text)])
    y = rows[["ttft50", "ttft99"]].to_numpy(dtype=float).ravel()
    y = y[drawable(y)]
    sources = "; ".join(dict.fromkeys(s.gpu.roofs.provenance for s in serving))
    kv = "; ".join(f"{s.gpu.label}: {s.kv.tokens:,} tokens in {s.kv.blocks:,} blocks" for s in serving)
    layouts = dict.fromkeys(s.kv.layout for s in serving if s.kv.layout)  # the model's: one for every GPU
    kv += "".join(f"; {layout}" for layout in layouts)
    return chart_section(
        "serve", f"{model.name}: time to first token against the {'clients' if closed else 'request rate'}",
        subtitle=[f"roofs: {sources}", f"KV cache: {kv}"],
        warning=not all(s.gpu.roofs.measured for s in serving),
        x_range=(rows["rate"].min() / SWEEP_MARGIN, rows["rate"].max() * SWEEP_MARGIN),
        y_range=decades(min(y, default=1e-3), max(y, default=1.0), 2),
        xlabel="clients (closed loop)" if closed else "requests a second (Poisson)",
        ylabel="time to first token (s)", y_unit="s", lines=[], marks=marks, joins=joins,
        filters=list(rows["gpu"]), legend=legend, legend_title="serving on each GPU", table=table)

