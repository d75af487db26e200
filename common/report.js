// The interactive part of analysis.html's reports: reads the page's JSON (script#report-data) and draws each
// section. Every text from the data goes in through textContent or an attribute, never as markup: kernel
// names come from profiles and may hold anything.
"use strict";
(function () {
  const doc = JSON.parse(document.getElementById("report-data").textContent);
  const NS = document.getElementById("svg-ns").namespaceURI; // the SVG namespace, without writing its URI
  const root = document.getElementById("report");

  function el(tag, attrs, text) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined) e.setAttribute(k, v);
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function svg(tag, attrs, text) {
    const e = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined && text !== null) e.textContent = text;
    return e;
  }
  function lines(parent, texts, cls) {
    for (const t of texts || []) parent.appendChild(el("p", { class: cls || "" }, t));
  }

  // a number with an SI prefix, for axis ticks ("10 TFLOP/s"); the data's own texts come formatted
  function si(v, unit) {
    const up = ["", "k", "M", "G", "T", "P", "E"], down = ["", "m", "\u00b5", "n", "p"];
    let i = 0, j = 0;
    while (Math.abs(v) >= 1000 && i < up.length - 1) { v /= 1000; i++; }
    while (v !== 0 && Math.abs(v) < 1 && j < down.length - 1) { v *= 1000; j++; }  // latencies: us, ns
    return `${+v.toPrecision(3)} ${i ? up[i] : down[j]}${unit}`;
  }
  function ticks(lo, hi) {
    const out = [];
    for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
      for (const m of [1, 2, 5]) {
        const v = m * Math.pow(10, e);
        if (v >= lo * 0.999 && v <= hi * 1.001) out.push([v, m === 1]);
      }
    }
    return out.filter(([, major]) => major).length >= 2 ? out.filter(([, major]) => major) : out;
  }

  // tick labels (texts centred on their x, in the page) too many for their axis: only every k-th kept, the
  // smallest k whose labels stand apart (a log axis of ten decades of "100 GFLOP/s"); the grid keeps every tick
  function spaceOut(labels) {
    const GAP = 8;
    const at = labels.map((t) => [+t.getAttribute("x"), t.getComputedTextLength()]);
    const apart = (k) => at.every(([x, w], i) => i < k || i % k || x - at[i - k][0] >= (w + at[i - k][1]) / 2 + GAP);
    let k = 1;
    while (k < labels.length && !apart(k)) k++;
    labels.forEach((t, i) => { if (i % k) t.remove(); });
  }

  // about five round values across [lo, hi] (steps of 1, 2 or 5 times a power of ten)
  function linearTicks(lo, hi) {
    const raw = (hi - lo) / 5, p = Math.pow(10, Math.floor(Math.log10(raw)));
    const step = [1, 2, 5, 10].map((m) => m * p).find((st) => st >= raw);
    const out = [];
    for (let v = Math.ceil(lo / step) * step; v <= hi + step * 1e-9; v += step) out.push(+v.toPrecision(12));
    return out;
  }

  // a sortable, searchable table; onPick(row) when a row is clicked; returns {mark(row)}
  function table(parent, spec, onPick) {
    const box = el("div", { class: "table" });
    const search = el("input", { type: "search", placeholder: "search names", "aria-label": "search the table" });
    const count = el("span", { class: "count" });
    const head = el("div", { class: "tools" });
    head.append(search, count);
    const t = el("table");
    const thead = el("thead");
    const tr = el("tr");
    const tbody = el("tbody");
    let order = null, descending = false, marked = null;
    spec.columns.forEach((c, i) => {
      const th = el("th", { class: c.numeric ? "num" : "", title: "sort" }, c.label);
      th.addEventListener("click", () => {
        descending = order === i ? !descending : c.numeric;
        order = i;
        fill();
      });
      tr.appendChild(th);
    });
    thead.appendChild(tr);
    t.append(thead, tbody);
    const scroll = el("div", { class: "scroll" });
    scroll.appendChild(t);
    box.append(head, scroll);
    parent.appendChild(box);
    const rows = spec.rows.map((cells, i) => ({ i, cells, text: cells.map((c) => c[0]).join(" ").toLowerCase() }));
    const byRow = new Map();
    function key(r) { // [text, key], or [text] for a text that is its own key ("" is unknown)
      const c = r.cells[order];
      return c.length > 1 ? c[1] : c[0] === "" ? null : c[0];
    }
    function fill() {
      const q = search.value.trim().toLowerCase();
      let shown = rows.filter((r) => !q || r.text.includes(q));
      if (order !== null) {
        shown = shown.slice().sort((a, b) => {
          const x = key(a), y = key(b);
          if (x === null || y === null) return (x === null) - (y === null); // unknowns last
          const c = x < y ? -1 : x > y ? 1 : 0;
          return descending ? -c : c;
        });
      }
      tbody.replaceChildren();
      byRow.clear();
      for (const r of shown) {
        const row = el("tr", { "data-row": r.i });
        if (r.i === marked) row.classList.add("sel");
        r.cells.forEach((c, j) => row.appendChild(el("td", { class: spec.columns[j].numeric ? "num" : "" }, c[0])));
        row.addEventListener("click", () => onPick && onPick(r.i));
        tbody.appendChild(row);
        byRow.set(r.i, row);
      }
      count.textContent = `${shown.length} of ${rows.length} rows`;
      for (const th of thead.querySelectorAll("th")) th.removeAttribute("aria-sort");
      if (order !== null) thead.children[0].children[order].setAttribute("aria-sort", descending ? "descending" : "ascending");
    }
    search.addEventListener("input", fill);
    fill();
    return {
      mark(i, reveal) {
        for (const r of tbody.querySelectorAll("tr.sel")) r.classList.remove("sel");
        marked = i;
        const row = byRow.get(i);
        if (row) {
          row.classList.add("sel");
          if (reveal) row.scrollIntoView({ block: "nearest" });
        }
      },
    };
  }

  // the tooltip: a name (whole, in monospace) over label/value pairs, kept inside the window
  function newTip() {
    const tip = el("div", { class: "tip", role: "tooltip" });
    tip.hidden = true;
    document.body.appendChild(tip);
    return tip;
  }
  function tipAt(tip, name, facts, ev) {
    tip.replaceChildren();
    tip.appendChild(el("div", { class: "tip-name" }, name));
    const dl = el("dl");
    for (const [k, v] of facts) dl.append(el("dt", {}, k), el("dd", {}, v));
    tip.appendChild(dl);
    tip.hidden = false;
    const pad = 14, w = tip.offsetWidth, h = tip.offsetHeight;
    let x = ev.pageX + pad, y = ev.pageY + pad;
    if (x + w > window.scrollX + window.innerWidth) x = Math.max(window.scrollX, ev.pageX - pad - w);
    if (y + h > window.scrollY + window.innerHeight) y = Math.max(window.scrollY, ev.pageY - pad - h);
    tip.style.left = `${x}px`;
    tip.style.top = `${y}px`;
  }

  const W = 900, H = 560, M = { left: 100, right: 16, top: 12, bottom: 46 };
  const HIT_R = 6; // px: the smallest radius a point answers the pointer within

  // a log-log chart: roofs, ridges, points (with a row of the table each), labels; wheel zooms, drag pans,
  // double-click resets; returns {draw()} and calls hooks.pick(row) when a point is clicked
  function chart(parent, s, hooks) {
    const wrap = el("div", { class: "chart" });
    const plot = svg("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img" });
    wrap.appendChild(plot);
    parent.appendChild(wrap);
    const tip = newTip();
    let view = { x: s.x_range.slice(), y: s.y_range.slice() };
    const lx = (v) => Math.log10(v);
    const X = (v) => M.left + (lx(v) - lx(view.x[0])) / (lx(view.x[1]) - lx(view.x[0])) * (W - M.left - M.right);
    const Y = (v) => H - M.bottom - (lx(v) - lx(view.y[0])) / (lx(view.y[1]) - lx(view.y[0])) * (H - M.top - M.bottom);
    const clipId = `clip-${s.id}`;

    function shape(p, m) {
      const r = Math.sqrt(p[3]) / 2, x = X(p[1]), y = Y(p[2]);
      const attrs = { "data-row": p[0], class: "point" + (p[0] === hooks.selected() ? " selected" : "") };
      const style = m.hollow ? { fill: "none", stroke: m.color, "stroke-width": 1.4 }
                             : { fill: m.color, stroke: "#fff", "stroke-width": 0.6 };
      let e;
      if (m.shape === "s") e = svg("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r });
      else if (m.shape === "^") e = svg("polygon", { points: `${x},${y - r} ${x - r},${y + r} ${x + r},${y + r}` });
      else e = svg("circle", { cx: x, cy: y, r });
      for (const [k, v] of Object.entries({ ...attrs, ...style, "fill-opacity": 0.8 })) e.setAttribute(k, v);
      return e;
    }

    function draw() {
      plot.replaceChildren();
      const defs = svg("defs");
      const cp = svg("clipPath", { id: clipId });
      cp.appendChild(svg("rect", { x: M.left, y: M.top, width: W - M.left - M.right, height: H - M.top - M.bottom }));
      defs.appendChild(cp);
      plot.appendChild(defs);
      const axes = svg("g", { class: "axes" });
      for (const [v, major] of ticks(view.x[0], view.x[1])) {
        axes.appendChild(svg("line", { x1: X(v), x2: X(v), y1: M.top, y2: H - M.bottom, class: major ? "grid" : "grid minor" }));
        axes.appendChild(svg("text", { x: X(v), y: H - M.bottom + 18, "text-anchor": "middle" }, `${+v.toPrecision(3)}`));
      }
      for (const [v, major] of ticks(view.y[0], view.y[1])) {
        axes.appendChild(svg("line", { x1: M.left, x2: W - M.right, y1: Y(v), y2: Y(v), class: major ? "grid" : "grid minor" }));
        axes.appendChild(svg("text", { x: M.left - 6, y: Y(v) + 4, "text-anchor": "end" }, si(v, s.y_unit)));
      }
      axes.appendChild(svg("rect", { x: M.left, y: M.top, width: W - M.left - M.right, height: H - M.top - M.bottom, class: "frame" }));
      axes.appendChild(svg("text", { x: (M.left + W - M.right) / 2, y: H - 8, "text-anchor": "middle", class: "axis-label" }, s.xlabel));
      plot.appendChild(axes);
      // the y title left of the widest tick label (they are right-aligned at M.left - 6), not on it
      const widest = Math.max(0, ...[...axes.querySelectorAll("text[text-anchor=end]")].map((t) => t.getBBox().width));
      axes.appendChild(svg("text", { transform: `translate(${Math.max(12, M.left - 6 - widest - 6)} ${(M.top + H - M.bottom) / 2}) rotate(-90)`, "text-anchor": "middle", class: "axis-label" }, s.ylabel));
      const g = svg("g", { "clip-path": `url(#${clipId})` });
      plot.appendChild(g);
      // labels, placed after everything else is drawn: [attributes, text, candidates [x, y, anchor, leader
      // end x, y], required, leader start [x, y, marker radius], the row whose marker is its own]; markers,
      // the application's star, ridge points and the roof lines are obstacles
      const labels = [], ridgeLabels = [], obstacles = [];
      for (const l of s.roofs) {
        const a = { x1: X(l.x[0]), y1: Y(l.y[0]), x2: X(l.x[1]), y2: Y(l.y[1]), stroke: l.color, "stroke-width": l.width, "data-gid": l.gid };
        if (l.dash) Object.assign(a, { "stroke-dasharray": "5 3", "stroke-opacity": 0.6 });
        g.appendChild(svg("line", a));
        const n = Math.ceil(Math.hypot(a.x2 - a.x1, a.y2 - a.y1) / 4); // the line as points 4 px apart
        for (let k = 0; k <= n && n < 1e4; k++) obstacles.push({ x: a.x1 + (a.x2 - a.x1) * k / n, y: a.y1 + (a.y2 - a.y1) * k / n, width: 0, height: 0 });
        if (l.datasheet || !l.label) continue; // the legend names datasheet roofs, as in the PNG
        const attrs = { fill: l.color, class: "roof-label" };
        if (l.slope) { // under the slope, where it enters the view, else further along it
          const at = (f) => { const x = Math.max(l.x[0], view.x[0]) * f; return [X(x) + 6, Y(l.y[0] * (x / l.x[0])) + 14, "start"]; };
          labels.push([attrs, l.label, [1.6, 4, 10].map(at), true]);
        } else { // above the line from its left end on, at its right end; else below
          const x = Math.max(X(l.x[0]), M.left), xr = Math.min(X(l.x[1]), W - M.right), y = Y(l.y[0]);
          const along = [10, 30, 60, 100, 150].map((dx) => [x + dx, "start"]).concat([[xr - 4, "end"]]);
          labels.push([attrs, l.label, along.map(([lx, a]) => [lx, y - 6, a]).concat(along.map(([lx, a]) => [lx, y + 15, a])), true]);
        }
      }
      for (const r of s.ridges) {
        const x = X(r.x), y = Y(r.y);
        g.appendChild(svg("polygon", { points: `${x},${y - 5} ${x + 5},${y} ${x},${y + 5} ${x - 5},${y}`, fill: r.color, stroke: "#fff", "data-gid": `ridge:${r.key}` }));
        obstacles.push({ x: x - 5, y: y - 5, width: 10, height: 10 });
        // above left, beside the slope (further left, clear of a roof label reaching left), higher, below right
        ridgeLabels.push([{ fill: r.color, class: "ridge-label" }, r.label,
          [[x - 7, y - 5, "end"], [x - 18, y - 5, "end"], [x - 30, y - 5, "end"], [x - 7, y - 18, "end"],
           [x + 7, y + 14, "start"], [x + 7, y + 26, "start"]], false]);
      }
      for (const sw of s.sweeps || []) {
        g.appendChild(svg("polyline", { points: sw.points.map(([x, y]) => `${X(x)},${Y(y)}`).join(" "), class: "sweep", "data-gid": `sweep:${sw.name}` }));
      }
      for (const [row, color, pts] of s.joins || []) {
        if (hooks.hidden(row)) continue;
        g.appendChild(svg("polyline", { points: pts.map(([x, y]) => `${X(x)},${Y(y)}`).join(" "), stroke: color, class: "join" }));
      }
      const sel = hooks.selected();
      // under every marker, a hit area of at least HIT_R around each: a small or hollow marker is still easy to
      // point at, and a marker itself always wins over a neighbour's hit area
      const hits = svg("g", { class: "hits" });
      g.appendChild(hits);
      for (const m of s.marks) {
        if (hooks.hiddenGroup(m)) continue;
        for (const p of m.points) {
          hits.appendChild(svg("circle", { cx: X(p[1]), cy: Y(p[2]), r: Math.max(HIT_R, Math.sqrt(p[3]) / 2), "data-row": p[0], class: "hit" }));
        }
      }
      for (const m of s.marks) {
        if (hooks.hiddenGroup(m)) continue;
        const mg = svg("g", { "data-gid": m.gid });
        for (const p of m.points) {
          mg.appendChild(shape(p, m));
          const r = Math.sqrt(p[3]) / 2;
          obstacles.push({ x: X(p[1]) - r, y: Y(p[2]) - r, width: 2 * r, height: 2 * r, row: p[0] });
        }
        g.appendChild(mg);
        for (const p of m.points) {
          if (p[0] === sel) g.appendChild(svg("circle", { cx: X(p[1]), cy: Y(p[2]), r: Math.sqrt(p[3]) / 2 + 5, class: "ring" }));
        }
      }
      if (s.application) {
        const a = s.application, x = X(a.x), y = Y(a.y), r = a.radius * 1.3;
        const star = [];
        for (let k = 0; k < 10; k++) {
          const rr = k % 2 ? r * 0.45 : r, t = Math.PI / 2 + k * Math.PI / 5;
          star.push(`${x + rr * Math.cos(t)},${y - rr * Math.sin(t)}`);
        }
        g.appendChild(svg("polygon", { points: star.join(" "), class: "application", "data-gid": "application" }));
        obstacles.push({ x: x - r, y: y - r, width: 2 * r, height: 2 * r });
        ridgeLabels.push([{ class: "application-label" }, a.text, around(x, y, r), true]);
      }
      labels.push(...ridgeLabels); // after every roof's value, which they must not push aside
      for (const l of s.labels || []) { // largest share of time first
        if (hooks.hiddenLabel(l)) continue;
        const x = X(l.x), y = Y(l.y);
        labels.push([{ class: "kernel-label" }, l.text, around(x, y, l.radius), false, [x, y, l.radius], l.row]);
      }
      place(g, labels, obstacles);
    }

    // offsets around a marker of radius r at (x, y): eight directions at three gaps, nearest first
    function around(x, y, r) {
      const out = [];
      for (const gap of [4, 14, 28]) {
        for (const [ux, uy] of [[1, -1], [1, 0], [1, 1], [-1, -1], [-1, 0], [-1, 1], [0, -1], [0, 1]]) {
          const n = Math.hypot(ux, uy), px = x + ux * (r + gap) / n, py = y + uy * (r + gap) / n;
          out.push([px + 2 * ux, uy < 0 ? py - 2 : uy > 0 ? py + 11 : py + 4, ux > 0 ? "start" : ux < 0 ? "end" : "middle", px, py]);
        }
      }
      return out;
    }

    // each label at its first candidate inside the plot that overlaps no label placed before it and no
    // obstacle (its own marker aside), else at the first that overlaps no label; else a required one (a
    // roof's value, the application) at its first candidate, and the others (ridges, kernels) left out
    function place(g, items, obstacles) {
      const placed = [];
      const meets = (b, list, own) => list.some((o) => o.row !== own && b.x < o.x + o.width && o.x < b.x + b.width && b.y < o.y + o.height && o.y < b.y + b.height);
      const inside = (b) => b.x >= M.left && b.y >= M.top && b.x + b.width <= W - M.right && b.y + b.height <= H - M.bottom;
      for (const [attrs, text, candidates, required, from, own] of items) {
        const t = svg("text", attrs, text);
        g.appendChild(t);
        const put = ([x, y, anchor]) => {
          t.setAttribute("x", x);
          t.setAttribute("y", y);
          t.setAttribute("text-anchor", anchor);
          const b = t.getBBox();
          return { x: b.x - 1, y: b.y - 1, width: b.width + 2, height: b.height + 2 };
        };
        let chosen = null, fallback = null;
        for (const c of candidates) {
          const b = put(c);
          if (!inside(b) || meets(b, placed, null)) continue;
          if (!meets(b, obstacles, own === undefined ? null : own)) { chosen = [c, b]; break; }
          if (!fallback) fallback = [c, b];
        }
        chosen = chosen || fallback || (required ? [candidates[0], put(candidates[0])] : null);
        if (!chosen) { t.remove(); continue; }
        put(chosen[0]);
        placed.push(chosen[1]);
        if (from && chosen[0][3] !== undefined) { // a leader from the marker's edge to the label
          const [x, y, r] = from, [, , , ex, ey] = chosen[0], d = Math.hypot(ex - x, ey - y) || 1;
          g.insertBefore(svg("line", { x1: x + (ex - x) * r / d, y1: y + (ey - y) * r / d, x2: ex, y2: ey, class: "leader" }), t);
        }
      }
    }

    // a row's tooltip: its table cells, the first one (the name) whole on top, the others labelled
    const showTip = (row, ev) => {
      const cells = s.table.rows[row];
      tipAt(tip, cells[0][0], s.table.columns.slice(1).map((c, j) => [c.label, cells[j + 1][0] || "unknown"]), ev);
    };
    const pointOf = (ev) => ev.target.closest && ev.target.closest("[data-row]");
    plot.addEventListener("mousemove", (ev) => {
      const p = pointOf(ev);
      if (p && !drag) showTip(+p.getAttribute("data-row"), ev);
      else tip.hidden = true;
    });
    plot.addEventListener("mouseleave", () => { tip.hidden = true; });

    // zoom and pan in log space; the data ranges are the reset
    function toData(ev) {
      const b = plot.getBoundingClientRect();
      return [(ev.clientX - b.left) * W / b.width, (ev.clientY - b.top) * H / b.height];
    }
    function zoomAt(px, py, f) {
      const fx = (px - M.left) / (W - M.left - M.right), fy = (H - M.bottom - py) / (H - M.top - M.bottom);
      const scale = (r, t) => {
        const a = lx(r[0]), b = lx(r[1]), c = a + t * (b - a);
        return [Math.pow(10, c - (c - a) * f), Math.pow(10, c + (b - c) * f)];
      };
      view = { x: scale(view.x, fx), y: scale(view.y, fy) };
      draw();
    }
    plot.addEventListener("wheel", (ev) => {
      ev.preventDefault();
      const [px, py] = toData(ev);
      zoomAt(px, py, ev.deltaY < 0 ? 0.8 : 1.25);
    }, { passive: false });
    let drag = null;
    plot.addEventListener("mousedown", (ev) => { drag = { at: toData(ev), view, moved: false }; });
    window.addEventListener("mousemove", (ev) => {
      if (!drag) return;
      const [px, py] = toData(ev);
      const dx = (px - drag.at[0]) / (W - M.left - M.right), dy = (py - drag.at[1]) / (H - M.top - M.bottom);
      if (Math.abs(dx) + Math.abs(dy) < 0.005 && !drag.moved) return;
      drag.moved = true;
      const shift = (r, t) => { const k = (lx(r[1]) - lx(r[0])) * t; return [r[0] / Math.pow(10, k), r[1] / Math.pow(10, k)]; };
      view = { x: shift(drag.view.x, dx), y: shift(drag.view.y, -dy) };
      draw();
    });
    window.addEventListener("mouseup", (ev) => {
      const d = drag;
      drag = null;
      if (d && !d.moved) {
        const p = pointOf(ev);
        if (p) hooks.pick(+p.getAttribute("data-row"));
      }
    });
    function reset() {
      view = { x: s.x_range.slice(), y: s.y_range.slice() };
      draw();
    }
    plot.addEventListener("dblclick", reset);
    return { draw, reset };
  }

  function legendKey(e) {
    const k = svg("svg", { width: 22, height: 14, class: "key" });
    const c = e.color;
    if (e.kind === "patch") k.appendChild(svg("rect", { x: 4, y: 2, width: 14, height: 10, fill: c }));
    else if (e.kind === "hollow") k.appendChild(svg("circle", { cx: 11, cy: 7, r: 5, fill: "none", stroke: c, "stroke-width": 1.4 }));
    else if (e.kind === "star") k.appendChild(svg("polygon", { points: "11,1 13,6 18,6 14,9 16,14 11,11 6,14 8,9 4,6 9,6", class: "application" }));
    else if (e.kind === "ridge") k.appendChild(svg("polygon", { points: "11,2 16,7 11,12 6,7", fill: c }));
    else if (e.kind === "datasheet") k.appendChild(svg("line", { x1: 1, y1: 7, x2: 21, y2: 7, stroke: c, "stroke-dasharray": "5 3" }));
    else if (e.kind === "sweep") k.appendChild(svg("line", { x1: 1, y1: 7, x2: 21, y2: 7, stroke: c, "stroke-dasharray": "1 3" }));
    else if (e.kind === "line") k.appendChild(svg("line", { x1: 1, y1: 7, x2: 21, y2: 7, stroke: c, "stroke-width": 2 }));
    else if (e.kind === "marker" && e.shape === "s") k.appendChild(svg("rect", { x: 6, y: 2, width: 10, height: 10, fill: c }));
    else if (e.kind === "marker" && e.shape === "^") k.appendChild(svg("polygon", { points: "11,2 16,12 6,12", fill: c }));
    else if (e.kind === "marker") k.appendChild(svg("circle", { cx: 11, cy: 7, r: 5, fill: c }));
    return k;
  }

  // a section of class `cls` in `parent`: its heading (warning-coloured when the roofs or the profile are not
  // what they seem) and subtitle lines
  function section(parent, s, cls) {
    const sec = el("section", { class: cls, id: s.id });
    parent.appendChild(sec);
    if (s.heading) sec.appendChild(el("h2", { class: s.warning ? "warning" : "" }, s.heading));
    lines(sec, s.subtitle, s.warning ? "warning" : "sub");
    return sec;
  }

  // a chart section (a roofline, say): heading and subtitle, chart, legend (its keys with a filter hide their
  // points), the table, one selection for both
  function chartSection(parent, s) {
    const sec = section(parent, s, "chart-section");
    const body = el("div", { class: "plot-row" });
    sec.appendChild(body);
    const hidden = new Set();
    let selected = null, tbl = null;
    const filterOf = (row) => s.filters[row];
    const hooks = {
      selected: () => selected,
      hidden: (row) => hidden.has(filterOf(row)),
      hiddenGroup: (m) => hidden.has(m.filter),
      hiddenLabel: (l) => l.row !== undefined && l.row !== null && hidden.has(filterOf(l.row)),
      pick: (row) => { select(row, true); },
    };
    const c = chart(body, s, hooks);
    const legend = el("div", { class: "legend" });
    if (s.legend_title) legend.appendChild(el("div", { class: "legend-title" }, s.legend_title));
    for (const e of s.legend) {
      const item = el(e.filter ? "button" : "div", { class: "legend-item", type: e.filter ? "button" : undefined });
      item.append(legendKey(e), el("span", {}, e.label));
      if (e.filter) {
        item.setAttribute("aria-pressed", "true");
        item.title = "show or hide these points";
        item.addEventListener("click", () => {
          if (hidden.has(e.filter)) hidden.delete(e.filter); else hidden.add(e.filter);
          item.setAttribute("aria-pressed", hidden.has(e.filter) ? "false" : "true");
          c.draw();
        });
      }
      legend.appendChild(item);
    }
    const reset = el("button", { type: "button", class: "reset" }, "reset zoom");
    reset.addEventListener("click", () => c.reset());
    legend.appendChild(reset);
    legend.appendChild(el("p", { class: "hint" }, "wheel: zoom; drag: pan; double-click: reset; click a point or a row to mark it"));
    body.appendChild(legend);
    lines(sec, s.notes, "note");
    function select(row, reveal) {
      selected = selected === row ? null : row;
      c.draw();
      if (tbl) tbl.mark(selected, reveal);
    }
    c.draw();
    if (s.table) tbl = table(sec, s.table, (row) => select(row, false));
  }

  // one row per category (a ceiling), a dot per value (a run, a GPU) on a shared axis, linear or log; dots
  // with a name (outliers) are drawn in their colour and labelled; a dashed line marks a threshold
  function strip(parent, s) {
    const sec = section(parent, s, "strip");
    const body = el("div", { class: "plot-row" });
    sec.appendChild(body);
    const RH = 24, L = 250, R = 200, T = 8, B = 40, SW = 960;
    const h = T + B + RH * s.rows.length;
    const plot = svg("svg", { viewBox: `0 0 ${SW} ${h}`, width: SW, height: h, role: "img" });
    body.appendChild(plot);
    const values = s.rows.flatMap((r) => r.points.map((p) => p[0])).concat([s.threshold, s.baseline].filter((v) => v !== null && v !== undefined));
    const f = s.log ? Math.log10 : (v) => v;
    let lo = Math.min(...values.map(f)), hi = Math.max(...values.map(f));
    if (lo === hi) { lo -= 0.5; hi += 0.5; }
    const pad = (hi - lo) * 0.05;
    lo -= pad; hi += pad;
    const X = (v) => L + (f(v) - lo) / (hi - lo) * (SW - L - R);
    const axes = svg("g", { class: "axes" });
    const tv = s.log ? ticks(Math.pow(10, lo), Math.pow(10, hi)).map(([v]) => v) : linearTicks(lo, hi);
    const tickLabels = tv.map((v) => {
      axes.appendChild(svg("line", { x1: X(v), x2: X(v), y1: T, y2: h - B, class: "grid" }));
      return axes.appendChild(svg("text", { x: X(v), y: h - B + 16, "text-anchor": "middle" }, s.log ? si(v, s.unit || "") : `${+v.toPrecision(3)}`));
    });
    axes.appendChild(svg("text", { x: (L + SW - R) / 2, y: h - 6, "text-anchor": "middle", class: "axis-label" }, s.xlabel));
    plot.appendChild(axes);
    spaceOut(tickLabels);  // measured in the page
    if (s.baseline !== null && s.baseline !== undefined) {
      plot.appendChild(svg("line", { x1: X(s.baseline), x2: X(s.baseline), y1: T, y2: h - B, class: "baseline" }));
    }
    if (s.threshold !== null && s.threshold !== undefined) {
      plot.appendChild(svg("line", { x1: X(s.threshold), x2: X(s.threshold), y1: T, y2: h - B, class: "threshold" }));
    }
    const tip = newTip();
    s.rows.forEach((r, i) => {
      const y = T + RH * i + RH / 2;
      plot.appendChild(svg("text", { x: L - 8, y: y + 4, "text-anchor": "end", class: "strip-label" }, r.label));
      plot.appendChild(svg("line", { x1: L, x2: SW - R, y1: y, y2: y, class: "grid minor" }));
      const named = [];
      r.points.forEach(([v, series, name, facts, label], j) => {
        // dodge: each series a little apart, so that equal values of two series both show
        const dy = s.dodge ? (series - (s.series.length - 1) / 2) * Math.min(5, (RH - 8) / s.series.length) : 0;
        const c = svg("circle", { cx: X(v), cy: y + dy, r: label ? 5.5 : 4.5, fill: s.series[series].color, class: "dot" + (label ? " named" : ""), "data-dot": `${i}:${j}` });
        c.addEventListener("mousemove", (ev) => tipAt(tip, name, facts, ev));
        c.addEventListener("mouseleave", () => { tip.hidden = true; });
        plot.appendChild(c);
        if (label) named.push([X(v), label]);
      });
      if (named.length) {
        const x = Math.max(...named.map(([x]) => x)) + 9;
        plot.appendChild(svg("text", { x, y: y + 4, class: "outlier-label" }, named.map(([, t]) => t).join(", ")));
      }
    });
    if (s.series.length > 1 || s.series[0].name) {
      const legend = el("div", { class: "legend" });
      for (const e of s.series) {
        const item = el("div", { class: "legend-item" });
        item.append(legendKey({ kind: "marker", shape: "o", color: e.color }), el("span", {}, e.name));
        legend.appendChild(item);
      }
      body.appendChild(legend);
    }
    lines(sec, s.notes, "note");
    if (s.table) table(sec, s.table, null);
  }

  // shares of a whole as one stacked bar (segments {label, share, color}), each named in a key under it
  function shares(parent, segments) {
    const bar = el("div", { class: "shares" });
    const key = el("div", { class: "shares-key" });
    for (const g of segments) {
      const text = `${g.label} ${(100 * g.share).toFixed(g.share < 0.1 ? 1 : 0)}%`;
      const seg = el("div", { class: "shares-seg", title: text });
      seg.style.width = `${100 * g.share}%`;
      seg.style.background = g.color;
      bar.appendChild(seg);
      const item = el("span", { class: "shares-item" });
      const swatch = el("span", { class: "shares-swatch" });
      swatch.style.background = g.color;
      item.appendChild(swatch);
      item.appendChild(document.createTextNode(text));
      key.appendChild(item);
    }
    parent.appendChild(bar);
    parent.appendChild(key);
  }

  const renderers = {
    chart: chartSection,
    strip,
    table(parent, s) {
      const sec = section(parent, s, "plain");
      if (s.bar && s.bar.length) shares(sec, s.bar);
      table(sec, s.table, null);
      lines(sec, s.notes, "note");
    },
    notes(parent, s) {
      const sec = el("section", { class: "notes", id: s.id });
      parent.appendChild(sec);
      sec.appendChild(el("h2", {}, s.heading));
      const ul = el("ul");
      for (const t of s.items) ul.appendChild(el("li", {}, t));
      if (!s.items.length) ul.appendChild(el("li", {}, "none"));
      sec.appendChild(ul);
    },
  };

  document.title = doc.title;
  root.appendChild(el("h1", {}, doc.title));
  for (const s of doc.sections) renderers[s.kind](root, s);
  document.body.setAttribute("data-ready", "1");
})();
