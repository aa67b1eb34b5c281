"""The budget report as one self-contained HTML page (``report.html``): the budget curves (NATIVE accuracy, gap,
Δ_L with their intervals and bands, one row of panels per language and task, each design in a figure of its own,
the cap drawn and nothing beyond it), the report's tables (sortable), the run's settings and signature, and a trace
viewer over a sample of the ledger's records.

Plotting: plotly, its JavaScript inlined once in the page, so the file works offline and from disk; chosen over
Vega-Lite (altair) because hover, filled bands and log axes need no extra renderer package (vl-convert) and the
figures' data stay plain JSON arrays that a browser test can read back from the graph divs. The page is a jinja2
template with its CSS and glue script stored beside it as package data (``mindcap_tok/resources/report``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..errors import SetupError
from ..store import SETTING_COLUMNS

if TYPE_CHECKING:
    from .budget_report import BudgetTables
    from .traces import TraceSample

#: the extra that brings plotly
HTML_EXTRA = "html"
#: the page's file name inside a report folder
PAGE = "report.html"
#: a curve group's columns besides the language and task (each group of rows gets a figure of its own)
GROUP_COLUMNS = ("model", *[c for c in SETTING_COLUMNS if c != "task"])
_COLORS = {"acc": "#1f77b4", "gap": "#9467bd", "delta": "#d62728", "cap": "#555555"}


@dataclass(frozen=True)
class PageInputs:
    """What the page shows beside the tables: the traces of the viewer (None: the records were not at hand), the
    ledger the report reads (its manifest's SHA-256 is the run's signature) and the budgets swept."""

    traces: TraceSample | None = None
    ledger: str | os.PathLike[str] | None = None
    settings: dict[str, Any] = field(default_factory=dict)


def plotly_modules() -> tuple[Any, Any]:
    """(plotly.graph_objects, plotly.subplots), or a one-line setup error naming the extra."""
    try:
        import plotly.graph_objects as go
        import plotly.subplots as sp
    except ImportError as exc:
        raise SetupError(
            f"report.html needs plotly: pip install 'mindcap-tok[{HTML_EXTRA}]' (the other report files need it not)"
        ) from exc
    return go, sp


def _plain(value: Any) -> Any:
    """A JSON-ready scalar: NaN as None, numpy numbers as Python ones."""
    if value is None:
        return None
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _points(values: pd.Series) -> list[float | None]:
    return [None if v is None or v != v else 100 * float(v) for v in values]


def _group_label(key: dict[str, Any]) -> str:
    shown = {k: _plain(v) for k, v in key.items()}
    parts = [
        f"{k} {int(v) if isinstance(v, float) and v.is_integer() else v}"
        for k, v in shown.items()
        if v is not None and v not in ("none", False)
    ]
    return ", ".join(parts)


def _within(rows: pd.DataFrame) -> pd.Series:
    """Rows measured within their cap (a row without cap columns counts as measured)."""
    if "cap_status" not in rows:
        return pd.Series(True, index=rows.index)
    return rows["cap_status"].isna() | rows["cap_status"].eq("within")


def _meta(key: dict[str, Any], lang: str, task: Any, metric: str) -> dict[str, Any]:
    return {"metric": metric, "lang": lang, "task": _plain(task), **{k: _plain(v) for k, v in key.items()}}


def _band(go: Any, x: list[Any], low: list[Any], high: list[Any], color: str, meta: dict[str, Any], name: str):
    """A filled band between ``low`` and ``high`` (two traces: the edge below, then the fill up to it)."""
    common = {"x": x, "mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False}
    return [
        go.Scatter(y=low, meta={**meta, "band": "low"}, **common),
        go.Scatter(y=high, fill="tonexty", fillcolor=color, meta={**meta, "band": "high"}, name=name, **common),
    ]


def _line(go: Any, x: list[Any], y: list[Any], *, name: str, meta: dict[str, Any], color: str, data: Any, hover: str):
    """A curve's line with markers, hover text ``hover`` over ``customdata`` ``data``."""
    return go.Scatter(
        x=x,
        y=y,
        mode="lines+markers",
        name=name,
        meta=meta,
        line={"color": color},
        customdata=data,
        hovertemplate=hover,
    )


#: hover text of a point with its interval (customdata: extra fields, then the interval's ends)
_CI_HOVER = "CI [%{{customdata[{0}]:.2f}}, %{{customdata[{1}]:.2f}}]<extra></extra>"


def _panel_traces(go: Any, curve: pd.DataFrame, within: pd.DataFrame, meta: dict, level: str) -> list[tuple[int, Any]]:
    """(panel, trace) of one language's row: NATIVE accuracy with its CI (panel 1), the gap with its CI where
    there is a comparator (2), and Δ_L with its simultaneous band and pointwise CI (3)."""
    bx = curve["budget"].astype(int).tolist()
    traces = [
        (1, t)
        for t in _band(
            go,
            bx,
            _points(curve["ci_low"]),
            _points(curve["ci_high"]),
            "rgba(31,119,180,0.2)",
            meta["accuracy"],
            f"{level} CI",
        )
    ]
    counts = [[_plain(n)] for n in curve["n"]] if "n" in curve else None
    hover = "B=%{x}<br>accuracy %{y:.2f} pts<br>traces %{customdata[0]}<extra></extra>"
    traces.append(
        (
            1,
            _line(
                go,
                bx,
                _points(curve["accuracy"]),
                name="NATIVE accuracy",
                meta=meta["accuracy"],
                color=_COLORS["acc"],
                data=counts,
                hover=hover,
            ),
        )
    )
    if "gap" in within and within["gap"].notna().any():
        g = within.dropna(subset=["gap"])
        gx, low, high = g["budget"].astype(int).tolist(), _points(g["gap_ci_low"]), _points(g["gap_ci_high"])
        traces += [(2, t) for t in _band(go, gx, low, high, "rgba(148,103,189,0.2)", meta["gap"], f"{level} CI")]
        hover = "B=%{x}<br>gap %{y:.2f} pts<br>" + _CI_HOVER.format(0, 1)
        ends = list(zip(low, high, strict=True))
        traces.append(
            (
                2,
                _line(
                    go,
                    gx,
                    _points(g["gap"]),
                    name="gap",
                    meta=meta["gap"],
                    color=_COLORS["gap"],
                    data=ends,
                    hover=hover,
                ),
            )
        )
    x, low, high = within["budget"].astype(int).tolist(), _points(within["ci_low"]), _points(within["ci_high"])
    bands = (
        (within["band_low"], within["band_high"], "rgba(214,39,40,0.12)", "band", f"{level} simultaneous band"),
        (within["ci_low"], within["ci_high"], "rgba(214,39,40,0.25)", "ci", f"{level} pointwise CI"),
    )
    for lo, hi, fill, kind, label in bands:
        traces += [(3, t) for t in _band(go, x, _points(lo), _points(hi), fill, {**meta["delta"], "kind": kind}, label)]
    data = [[int(s), *p] for s, *p in zip(within["scaled_budget"], low, high, strict=True)]
    hover = "B=%{x}, floor(r·B)=%{customdata[0]}<br>Δ_L %{y:.2f} pts<br>" + _CI_HOVER.format(1, 2)
    traces.append(
        (
            3,
            _line(
                go,
                x,
                _points(within["delta"]),
                name="Δ_L",
                meta=meta["delta"],
                color=_COLORS["delta"],
                data=data,
                hover=hover,
            ),
        )
    )
    return traces


def curve_figures(built: BudgetTables) -> list[dict[str, Any]]:
    """One plotly figure (as JSON-ready dict, with its title and notes) per curve group: a row of three panels
    (NATIVE accuracy, gap, Δ_L) per language and task, points only within the cap."""
    go, sp = plotly_modules()
    rows, acc = built.sweep.rows, built.native_curves
    level = f"{built.level:.0%}"
    keys = [c for c in GROUP_COLUMNS if c in rows.columns]
    figures: list[dict[str, Any]] = []
    groups = sorted(
        rows.groupby(keys, dropna=False, sort=True),
        key=lambda g: "design" in g[1] and g[1]["design"].iloc[0] != "replay",
    )
    for values, part in groups:  # replay first
        key = dict(zip(keys, values if isinstance(values, tuple) else (values,), strict=True))
        panels = part[["lang", "task"]].drop_duplicates().sort_values(["lang", "task"]) if "task" in part else None
        pairs = (
            list(panels.itertuples(index=False)) if panels is not None else [(x, None) for x in part["lang"].unique()]
        )
        has_gap = "gap" in part and bool(part["gap"].notna().any())
        cols = {1: 1, 2: 2, 3: 3} if has_gap else {1: 1, 3: 2}  # panel -> column (no comparator: no gap panel)
        fig = sp.make_subplots(
            rows=len(pairs),
            cols=len(cols),
            horizontal_spacing=0.08,
            vertical_spacing=min(0.12, 0.5 / max(1, len(pairs))),
            subplot_titles=[
                t
                for lang, task in pairs
                for t in (f"{lang}{f' {task}' if task else ''}: NATIVE accuracy", "gap (COMPARATOR − NATIVE)", "Δ_L")
                if t != "gap (COMPARATOR − NATIVE)" or has_gap
            ],
        )
        notes = []
        for i, (lang, task) in enumerate(pairs, start=1):
            sel = part[(part["lang"] == lang) & ((part["task"] == task) if task is not None else True)]
            cap = _plain(key.get("cap"))
            within = sel[_within(sel)].sort_values("budget")
            if len(within) < len(sel):
                notes.append(
                    f"{lang}: {len(sel) - len(within)} budget(s) whose B or floor(r·B) lies beyond the cap are not "
                    "drawn (the Sweep table gives their bounds)."
                )
            mask = pd.Series(True, index=acc.index)
            for k, v in {**key, "lang": lang, **({"task": task} if task is not None else {})}.items():
                if k in acc.columns:
                    mask &= acc[k].isna() if _plain(v) is None else acc[k].eq(v)
            curve = acc[mask].sort_values("budget")
            if cap is not None:
                curve = curve[curve["budget"] <= cap]
            x_all = [*curve["budget"], *within["budget"], *([cap] if cap is not None else [])]
            meta = {m: _meta(key, lang, task, m) for m in ("accuracy", "gap", "delta", "cap")}
            traces = _panel_traces(go, curve, within, meta, level)
            for col, t in traces:
                fig.add_trace(t, row=i, col=cols[col])
            if cap is not None:
                for col, ys in ((1, (0, 100)), (2, _span(traces, 2)), (3, _span(traces, 3))):
                    if col not in cols:
                        continue
                    fig.add_trace(
                        go.Scatter(
                            x=[cap, cap],
                            y=list(ys),
                            mode="lines",
                            name=f"cap {cap}",
                            meta=meta["cap"],
                            showlegend=False,
                            line={"color": _COLORS["cap"], "dash": "dash", "width": 1},
                            hovertemplate=f"cap {cap}: nothing drawn beyond<extra></extra>",
                        ),
                        row=i,
                        col=cols[col],
                    )
            ticks = _ticks([int(v) for v in x_all if v])
            for col in cols.values():
                fig.update_xaxes(
                    type="log",
                    tickvals=ticks,
                    ticktext=[str(t) for t in ticks],
                    tickangle=-45,
                    title_text="output-token budget",
                    row=i,
                    col=col,
                )
            fig.update_yaxes(title_text="points", row=i, col=1)
            fig.update_yaxes(range=[0, 100], row=i, col=1)
        fig.update_layout(
            height=330 * len(pairs) + 60,
            showlegend=False,
            margin={"l": 60, "r": 20, "t": 50, "b": 60},
            template="plotly_white",
        )
        figures.append(
            {
                "id": f"curves-{len(figures)}",
                "title": _group_label(key) or "all cells",
                "design": _plain(key.get("design")),
                "spec": json.loads(fig.to_json(engine="json")),  # plain JSON arrays (no base64), NaN as null
                "notes": notes,
            }
        )
    return figures


def _ticks(values: list[int]) -> list[int]:
    """Log-axis ticks: the powers of two within ``values``' range, and its ends."""
    low, high = min(values, default=1), max(values, default=1)
    powers = [1 << k for k in range(low.bit_length() - 1, high.bit_length()) if low <= (1 << k) <= high]
    return sorted({*powers, low, high})


def _span(traces: list[tuple[int, Any]], col: int) -> tuple[float, float]:
    """The y range of a panel's curves and bands (with 0), for the cap's line."""
    ys = [v for c, t in traces if c == col for v in (t.y or ()) if v is not None]
    return (min([0.0, *ys]), max([0.0, *ys]))


def _cell(value: Any, whole: bool) -> tuple[str, Any]:
    """(shown text, sort key) of one table cell: in a column of whole numbers as an integer, other numbers with two
    decimals, missing as ``—``."""
    value = _plain(value)
    if value is None:
        return "—", None
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value), str(value)
    return (str(int(value)) if whole else f"{value:.2f}"), value


def _whole(column: pd.Series) -> bool:
    """Whether every number of ``column`` is whole (counts, budgets, caps: printed as integers)."""
    values = [_plain(v) for v in column]
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return bool(numbers) and all(float(v).is_integer() for v in numbers)


def html_table(name: str, frame: pd.DataFrame) -> dict[str, Any]:
    """``frame`` as a page's sortable table (every column but those holding lists): its name, columns and rows
    of (text, sort key) cells."""
    shown = frame.drop(columns=[c for c in frame.columns if frame[c].map(lambda v: isinstance(v, list)).any()])
    whole = [_whole(shown[c]) for c in shown.columns]
    return {
        "name": name,
        "columns": list(map(str, shown.columns)),
        "rows": [
            [_cell(v, w) for v, w in zip(row, whole, strict=True)] for row in shown.itertuples(index=False, name=None)
        ],
    }


def page_tables(built: BudgetTables) -> list[dict[str, Any]]:
    """The report's tables (every column, proportions in points) as :func:`html_table` gives them."""
    from .budget_report import marked_bounds, to_points

    out = []
    for name, frame in built.tables.items():
        shown = to_points(frame)
        if name == "sweep":
            shown = marked_bounds(shown)
        out.append(html_table(name, shown.drop(columns=["sentence"], errors="ignore")))
    return out


def page_environment() -> Any:
    """The jinja2 environment of the pages' templates (package data in ``mindcap_tok/resources/report``)."""
    import jinja2

    return jinja2.Environment(
        loader=jinja2.PackageLoader("mindcap_tok", "resources/report"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        keep_trailing_newline=True,
    )


def ledger_signature(ledger: str | os.PathLike[str]) -> str | None:
    """SHA-256 of the ledger's manifest (names every shard by its hash: the run the report reads); None if absent."""
    path = Path(ledger) / "_manifest.json"
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _script_json(value: Any) -> str:
    """JSON to embed in a ``<script type="application/json">`` (``</`` escaped, strict: no NaN)."""
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).replace("</", "<\\/")


def render_page(built: BudgetTables, page: PageInputs | None = None) -> str:
    """``report.html``'s text for the report ``built`` (:func:`~mindcap_tok.report.budget_report.budget_tables`)."""
    from importlib.metadata import version

    from plotly.offline import get_plotlyjs

    page = page or PageInputs()
    result = built.sweep
    figures = curve_figures(built)
    settings = {
        "mindcap-tok": version("mindcap-tok"),
        "frame": result.frame,
        "bootstrap": f"{result.n_boot} item resamples, seed {result.seed}",
        "level": f"{result.level:.0%} (pointwise CIs; simultaneous max-|t| bands for Δ_L)",
        "parser": built.parser or "—",
        "budgets": ", ".join(str(int(b)) for b in sorted(result.rows["budget"].unique())),
        "premiums": ", ".join(f"{k} r={v:.4f}" for k, v in result.premiums.items()),
        **{k: str(v) for k, v in page.settings.items()},
    }
    signature = ledger_signature(page.ledger) if page.ledger is not None else None
    traces = page.traces
    return (
        page_environment()
        .get_template("report.html.j2")
        .render(
            settings=settings,
            signature=signature,
            notes=list(built.notes),
            figures=[{k: v for k, v in f.items() if k != "spec"} for f in figures],
            figures_json=_script_json({f["id"]: f["spec"] for f in figures}),
            tables=page_tables(built),
            traces_json=_script_json(traces.traces if traces else []),
            n_traces=len(traces.traces) if traces else 0,
            n_records=traces.total if traces else 0,
            has_traces=traces is not None,
            plotly_js=get_plotlyjs(),
        )
    )
