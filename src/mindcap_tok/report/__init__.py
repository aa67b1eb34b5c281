"""Tables and figures (matplotlib, Agg backend; files written atomically): the budget report of a sweep, the
readable tables of ``sweep``, the premium figure and the bits-per-byte figure of adapted models."""

from .budget_report import BudgetReport, BudgetTables, budget_tables, write_budget_tables
from .figures import plot_bpb, plot_premiums
from .folder_page import FolderPage, render_folder_page
from .ledger_report import write_budget_report
from .sweep_tables import TitledTable, sweep_tables

__all__ = [
    "BudgetReport",
    "BudgetTables",
    "FolderPage",
    "TitledTable",
    "budget_tables",
    "plot_bpb",
    "plot_premiums",
    "render_folder_page",
    "sweep_tables",
    "write_budget_report",
    "write_budget_tables",
]
