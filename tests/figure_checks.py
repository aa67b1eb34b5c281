"""Checks of rendered figures a reader would make, from matplotlib's own renderer after
``fig.canvas.draw()``: texts whose boxes overprint, and data points (line vertices, markers, error bar ends, bar
tops, scatter points) that a legend box hides."""

from __future__ import annotations

import itertools

import numpy as np
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.text import Text


def drawn_texts(fig) -> list[Text]:
    """The visible, non-empty texts a render of ``fig`` draws (titles, labels, tick labels, notes, legend entries);
    tick labels outside the view limits exist as objects but are not drawn, so they are not among them."""
    drawn = []
    original = Text.draw

    def record(self, renderer):
        drawn.append(self)
        return original(self, renderer)

    Text.draw = record
    try:
        fig.canvas.draw()
    finally:
        Text.draw = original
    return [t for t in dict.fromkeys(drawn) if t.get_visible() and t.get_text().strip()]


def overprinted(fig) -> list[tuple[str, str]]:
    """Pairs of drawn texts whose rendered boxes overlap."""
    shown = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    boxes = [(t, t.get_window_extent(renderer)) for t in shown]
    return [
        (a.get_text(), b.get_text())
        for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2)
        if box_a.overlaps(box_b)
    ]


def _bar_tops(container: BarContainer) -> list[tuple[str, np.ndarray]]:
    """Three points along the end of each bar away from its base (the end that gives its value), in data units."""
    out = []
    for bar in container.patches:
        x, y, w, h = bar.get_x(), bar.get_y(), bar.get_width(), bar.get_height()
        if container.orientation == "vertical":
            points = [(x, y + h), (x + w / 2, y + h), (x + w, y + h)]
        else:
            points = [(x + w, y), (x + w, y + h / 2), (x + w, y + h)]
        out.append((container.get_label() or bar.get_label(), np.array(points)))
    return out


def _owners(ax) -> dict:
    """Each artist of an error bar container, mapped to the container's label (its caps and bars have none)."""
    owners = {}
    for container in ax.containers:
        if isinstance(container, ErrorbarContainer):
            for artist in container.get_children():
                owners[artist] = container.get_label()
    return owners


def data_points(ax) -> list[tuple[str, np.ndarray]]:
    """(label, display coordinates) of every drawn data point of ``ax``."""
    owners = _owners(ax)
    found = []
    for line in ax.get_lines():
        found.append((owners.get(line, line.get_label()), line.get_transform().transform(line.get_xydata())))
    for container in ax.containers:
        if isinstance(container, BarContainer):
            found += [(label, ax.transData.transform(p)) for label, p in _bar_tops(container)]
    for coll in ax.collections:
        label = owners.get(coll, coll.get_label())
        if isinstance(coll, LineCollection):  # error bars: both ends of each bar
            found += [(label, coll.get_transform().transform(np.asarray(seg))) for seg in coll.get_segments()]
        elif isinstance(coll, PathCollection):  # scatter markers
            found.append((label, coll.get_offset_transform().transform(coll.get_offsets())))
    return found


def covered_points(fig) -> list[tuple[str, float, float]]:
    """Data points of any panel that a legend box (a panel's or the figure's) covers."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None] + list(fig.legends)
    out = []
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            for label, points in data_points(ax):
                out += [(label, x, y) for x, y in points if box.contains(x, y)]
    return out
