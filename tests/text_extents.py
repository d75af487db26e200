"""Where a matplotlib figure's texts land when it is saved (test support): every Text drawn, as the corners of
its (maybe rotated) box in the saved picture's pixels, and what a reader would find broken: two texts over each
other, a text cut by the picture's edge, one out of its axes, one over a legend it is not part of.

The boxes are taken while the figure is saved (Text.draw, Legend.draw and Axes.draw watched), so they are the
ones of the saved picture, bbox_inches="tight" included; a rotated text (tick labels at 30 degrees) is its
rotated rectangle, not the upright box around it, whose corners would overlap their neighbours'.
"""

from __future__ import annotations

import io
import math
from unittest import mock

import numpy as np

TOLERANCE_PX = 0.5  # boxes touching by less than this are apart (antialiasing, rounding)


def _corners(text, renderer) -> np.ndarray:
    """The 4 corners (x, y pixels) of `text`'s box, turned with the text."""
    from matplotlib.text import Text

    box = Text.get_window_extent(text, renderer)
    angle = text.get_rotation()
    if angle % 90 == 0:
        return np.array([[box.x0, box.y0], [box.x1, box.y0], [box.x1, box.y1], [box.x0, box.y1]])
    text.set_rotation(0)
    upright = Text.get_window_extent(text, renderer)
    text.set_rotation(angle)
    a = math.radians(angle)
    u = np.array([math.cos(a), math.sin(a)]) * upright.width
    v = np.array([-math.sin(a), math.cos(a)]) * upright.height
    rel = np.array([[0, 0], u, u + v, v])
    # the turned rectangle touches each side of the upright box around it
    return rel + np.array([box.x0, box.y0]) - rel.min(axis=0)


def _apart(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether convex polygons a and b (corners in order) overlap by less than TOLERANCE_PX (separating axes)."""
    for poly in (a, b):
        for p, q in zip(poly, np.roll(poly, -1, axis=0)):
            normal = np.array([p[1] - q[1], q[0] - p[0]])
            length = np.hypot(*normal)
            if length == 0:
                continue
            pa, pb = a @ normal / length, b @ normal / length
            if min(pa.max(), pb.max()) - max(pa.min(), pb.min()) < TOLERANCE_PX:
                return True
    return False


def _box(bbox) -> np.ndarray:
    return np.array([[bbox.x0, bbox.y0], [bbox.x1, bbox.y0], [bbox.x1, bbox.y1], [bbox.x0, bbox.y1]])


def saved_layout(fig, **savefig_kwargs) -> dict:
    """Save `fig` as PNG (savefig_kwargs as the command gives them) and return what was drawn: "size" (w, h
    pixels), "texts" {Text: corners}, "legends" {Legend: corners}, "axes" {Axes: corners}."""
    from matplotlib.axes._base import _AxesBase
    from matplotlib.legend import Legend
    from matplotlib.text import Text

    seen = {"texts": {}, "legends": {}, "axes": {}}
    originals = {cls: cls.draw for cls in (Text, Legend, _AxesBase)}

    def watch(cls, kind, shape):
        def draw(self, renderer, *args, **kwargs):
            result = originals[cls](self, renderer, *args, **kwargs)
            if self.get_visible() and (kind != "texts" or self.get_text().strip()):
                seen[kind][self] = shape(self, renderer)
                seen["size"] = (renderer.width, renderer.height)
            return result
        return draw

    with mock.patch.object(Text, "draw", watch(Text, "texts", _corners)), \
            mock.patch.object(Legend, "draw", watch(Legend, "legends", lambda lg, r: _box(lg.get_window_extent(r)))), \
            mock.patch.object(_AxesBase, "draw", watch(_AxesBase, "axes", lambda ax, r: _box(ax.bbox))):
        fig.savefig(io.BytesIO(), **{**savefig_kwargs, "format": "png"})
    return seen


def problems(fig, **savefig_kwargs) -> list[str]:
    """What a reader would find broken in `fig` saved with savefig_kwargs: texts over each other, cut by the
    picture's edge, out of their axes (a label, a bar's value) or over a legend they are not part of."""
    seen = saved_layout(fig, **savefig_kwargs)
    width, height = seen["size"]
    texts = list(seen["texts"].items())
    name = lambda t: repr(t.get_text()[:60])  # noqa: E731
    out = []
    for i, (t, c) in enumerate(texts):
        if c.min() < -TOLERANCE_PX or (c[:, 0] > width + TOLERANCE_PX).any() or (c[:, 1] > height + TOLERANCE_PX).any():
            out.append(f"{name(t)} is cut by the picture's edge")
        out += [f"{name(t)} overlaps {name(o)}" for o, d in texts[i + 1:] if not _apart(c, d)]
    for ax, box in seen["axes"].items():
        lo, hi = box.min(axis=0) - TOLERANCE_PX, box.max(axis=0) + TOLERANCE_PX
        out += [f"{name(t)} runs out of its axes" for t in ax.texts
                if t in seen["texts"] and ((seen["texts"][t] < lo) | (seen["texts"][t] > hi)).any()]
    for legend, box in seen["legends"].items():
        own = {*legend.get_texts(), legend.get_title()}
        out += [f"{name(t)} lies over the legend" for t, c in texts if t not in own and not _apart(c, box)]
    return out


def pictures_of(monkeypatch) -> list[tuple[str, object, dict]]:
    """Every picture a command stages from now on (common.atomic.Outputs.figure), as (path, Figure, savefig
    kwargs); the command still writes it."""
    from common import atomic

    staged = []
    figure = atomic.Outputs.figure

    def record(self, path, fig, **kwargs):
        staged.append((path, fig, kwargs))
        return figure(self, path, fig, **kwargs)

    monkeypatch.setattr(atomic.Outputs, "figure", record)
    return staged
