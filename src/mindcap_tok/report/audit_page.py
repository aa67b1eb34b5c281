"""The audit report's page (``audit.html``): the headline of every audit, then one section per audit with its
status, settings and tables (sortable), in one self-contained file (:mod:`.folder_page`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from ..audits import REGISTRY, headline_rows
from .folder_page import FolderPage, render_folder_page

if TYPE_CHECKING:
    from ..audits import SuiteResult

#: the page's file name in an audit folder
AUDIT_PAGE = "audit.html"


def _setting(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)


def audit_page(suite: SuiteResult) -> str:
    """The page of ``suite`` (:func:`~mindcap_tok.audits.run_audits`); settings and tables in fractions, as in
    ``audit.json``."""
    heads = headline_rows(suite)  # one per audit, in the suite's order
    sections = []
    for res, head in zip(suite.results, heads, strict=True):
        items = [("status", res.status if res.status == "ok" else f"skipped: {res.reason}")]
        if res.status == "ok":
            items.append(("key figure", str(head["key figure"])))
        items += [(k, _setting(v)) for k, v in res.summary.items()]
        sections.append({"title": f"{REGISTRY[res.name].title} ({res.name})", "items": items, "tables": res.tables})
    summary = pd.DataFrame(heads).replace("`", "", regex=True) if heads else pd.DataFrame()
    page = FolderPage(
        title="Audit report",
        intro="Settings, tables and headline shares in fractions (0.05 is 5 points), as in audit.json.",
        settings={"ledger": Path(suite.ledger).name, "records": str(suite.records)},
        tables={"summary": summary},
        sections=sections,
    )
    return render_folder_page(page)
