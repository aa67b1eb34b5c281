"""A report folder's page (``report.html`` of ``roundtrip report``, ``audit.html`` of ``audit``): one
self-contained file with the run's settings, notes, the folder's PNG figures inlined, its tables (sortable) and
sections of its own: a round trip's chains hop by hop beside the judges' verdicts and issues, or an audit's
findings. No plotting library: the figures are the folder's own PNGs."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .html_report import html_table, page_environment

if TYPE_CHECKING:
    import pandas as pd


@dataclass(frozen=True)
class FolderPage:
    """What a folder's page shows: ``settings`` (name -> text), ``notes``, ``figures`` (file name -> PNG bytes),
    ``tables`` (name -> frame), ``chains`` (a round trip's: each a dict with ``title``, ``hops`` and ``judges``)
    and ``sections`` (each a dict with ``title``, ``items``: (label, text) pairs, and ``tables``: name -> frame;
    e.g. one audit's settings, headline and tables)."""

    title: str
    intro: str = ""
    settings: dict[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()
    figures: dict[str, bytes] = field(default_factory=dict)
    tables: dict[str, pd.DataFrame] = field(default_factory=dict)
    chains: list[dict[str, Any]] = field(default_factory=list)
    sections: list[dict[str, Any]] = field(default_factory=list)


def render_folder_page(page: FolderPage) -> str:
    """The page's HTML text."""
    return (
        page_environment()
        .get_template("folder.html.j2")
        .render(
            page=page,
            figures={name: base64.b64encode(data).decode("ascii") for name, data in page.figures.items()},
            tables=[html_table(name, frame) for name, frame in page.tables.items()],
            sections=[
                {**s, "tables": [html_table(n, f) for n, f in s.get("tables", {}).items()]} for s in page.sections
            ],
        )
    )
