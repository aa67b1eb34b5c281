"""Checks of rendered figures a reader would make, from matplotlib's own renderer after
``fig.canvas.draw()``: texts whose boxes overprint, texts drawn over curves, markers or error bars, spans or
bars that overlap one another, and data points (line vertices, markers, error bar ends, bar tops, scatter points)
that a legend box hides."""

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


def _marker_radius(line, fig) -> float:
    """Half a line's marker size in display pixels (0 without markers)."""
    marker = line.get_marker()
    if marker in (None, "", "None", " ") or line.get_markersize() == 0:
        return 0.0
    return line.get_markersize() * fig.dpi / 72 / 2


def _artist_paths(ax, fig):
    """(label, display path, marker radius in px) of the curves, markers and error bars of ``ax``: lines (their
    segments where drawn with a line style, their vertices where drawn with markers), error bar segments and
    scatter points. Shaded bands and spans are not included (a note may sit on a tint)."""
    from matplotlib.path import Path

    owners = _owners(ax)
    for line in ax.get_lines():
        label = owners.get(line, line.get_label())
        xy = line.get_transform().transform(line.get_xydata())
        xy = xy[np.isfinite(xy).all(axis=1)]
        if not len(xy):
            continue
        if len(xy) > 1 and line.get_linestyle() not in ("None", "", " "):
            yield label, Path(xy), 0.0
        yield label, Path(xy), _marker_radius(line, fig)
    for coll in ax.collections:
        label = owners.get(coll, coll.get_label())
        if isinstance(coll, LineCollection):
            for seg in coll.get_segments():
                xy = coll.get_transform().transform(np.asarray(seg, float).reshape(-1, 2))
                xy = xy[np.isfinite(xy).all(axis=1)]
                if len(xy):
                    yield label, Path(xy), 0.0
        elif isinstance(coll, PathCollection):
            points = coll.get_offset_transform().transform(coll.get_offsets())
            sizes = coll.get_sizes()
            radius = float(np.sqrt(sizes.max()) * fig.dpi / 72 / 2) if len(sizes) else 0.0
            yield label, Path(points), radius


def text_over_data(fig) -> list[tuple[str, str]]:
    """(text, artist label) pairs where a drawn text's box covers a curve, a marker or an error bar of any panel,
    inside that panel's drawing area: line segments are tested with the path's own box intersection, markers as
    their vertices with the box grown by the marker's radius (in display pixels, after ``fig.canvas.draw()``)."""
    from matplotlib.transforms import Bbox

    shown = drawn_texts(fig)
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        area = ax.get_window_extent(renderer)
        paths = list(_artist_paths(ax, fig))
        for text in shown:
            box = Bbox.intersection(text.get_window_extent(renderer), area)
            if box is None or box.width <= 0 or box.height <= 0:
                continue
            for label, path, radius in paths:
                if radius == 0.0 and len(path.vertices) > 1:
                    hit = path.intersects_bbox(box, filled=False)
                else:
                    (x0, y0), (x1, y1) = box.padded(radius).get_points()
                    xs, ys = path.vertices[:, 0], path.vertices[:, 1]
                    hit = bool(((xs >= x0) & (xs <= x1) & (ys >= y0) & (ys <= y1)).any())
                if hit:
                    found.append((text.get_text(), str(label)))
                    break
    return found


def overlapping_spans(fig) -> list[tuple[int, int]]:
    """Pairs (by index in the panel's patches) of patches of one panel (spans, bars) whose drawn boxes overlap by
    more than a pixel in both directions: two tinted intervals drawn on one place read as one band."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        boxes = [p.get_window_extent(renderer) for p in ax.patches]
        for (i, a), (j, b) in itertools.combinations(enumerate(boxes), 2):
            if min(a.x1, b.x1) - max(a.x0, b.x0) > 1 and min(a.y1, b.y1) - max(a.y0, b.y0) > 1:
                found.append((i, j))
    return found
