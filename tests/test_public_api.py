"""The public API: at most 20 names in ``mindcap_tok.PUBLIC`` (``__all__``), one import away, and each stage's own
namespace (the ``__all__`` of ``mindcap_tok.stats``, ``mindcap_tok.audits``...). Every README and docs/ example,
notebook and example script imports only those two ways, every public name resolves and is documented, type
checkers see the same names, and ``import mindcap_tok`` stays light."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import mindcap_tok

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]  # the README and the docs pages
INIT = ROOT / "src" / "mindcap_tok" / "__init__.py"
#: the stage namespaces: the package's subpackages and top-level modules, private ones left out
STAGES = sorted(
    p.stem if p.is_file() else p.name
    for p in INIT.parent.iterdir()
    if not p.name.startswith("_") and (p.suffix == ".py" or (p / "__init__.py").is_file())
)


def python_blocks(markdown: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown text."""
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.M | re.S)


def notebook_code(path: Path) -> list[str]:
    """The code cells of a notebook, IPython magics and shell lines dropped."""
    cells = json.loads(path.read_text("utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return ["\n".join(line for line in s.splitlines() if not line.lstrip().startswith(("%", "!"))) for s in sources]


def namespace(stage: str) -> set[str]:
    """The public names of a stage: its ``__all__``, else (a plain module) its names without a leading underscore."""
    module = importlib.import_module(f"mindcap_tok.{stage}")
    return set(getattr(module, "__all__", None) or (n for n in vars(module) if not n.startswith("_")))


def bad_imports(code: str) -> list[str]:
    """Every mindcap_tok import in ``code`` that is neither ``from mindcap_tok import <a name of __all__>`` nor
    ``from mindcap_tok.<stage> import <a name of the stage's namespace>``."""
    problems = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            problems += [f"import {a.name}" for a in node.names if a.name.startswith("mindcap_tok.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mindcap_tok":
            parts = node.module.split(".") if node.module else []
            if node.module == "mindcap_tok":
                problems += [f"{a.name} is not in __all__" for a in node.names if a.name not in mindcap_tok.__all__]
            elif len(parts) != 2 or parts[1] not in STAGES:
                problems.append(f"from {node.module} import ...")
            else:
                public = namespace(parts[1])
                problems += [f"{a.name} is not in {node.module}" for a in node.names if a.name not in public]
    return problems


def test_the_checker_refuses_deep_imports_and_unlisted_names():
    assert bad_imports("from mindcap_tok.report.figures import plot_premiums") == [
        "from mindcap_tok.report.figures import ..."
    ]
    assert bad_imports("import mindcap_tok.stats\nfrom mindcap_tok import nothing_here") == [
        "import mindcap_tok.stats",
        "nothing_here is not in __all__",
    ]
    assert bad_imports("from mindcap_tok.stats import holm, _private\nfrom mindcap_tok._io import x") == [
        "_private is not in mindcap_tok.stats",
        "from mindcap_tok._io import ...",
    ]
    assert bad_imports("import mindcap_tok\nfrom mindcap_tok import load_tokenizer, price_ledger") == []
    assert bad_imports("from mindcap_tok.report import plot_premiums\nfrom mindcap_tok.config import Config") == []


def test_documented_examples_import_only_the_public_api():
    blocks = [b for page in PAGES for b in python_blocks(page.read_text("utf-8"))]
    assert len(blocks) >= 2, "the README and docs/ have no python examples"
    assert [p for b in blocks for p in bad_imports(b)] == []


@pytest.mark.parametrize("path", sorted((ROOT / "notebooks").glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_import_only_the_public_api(path):
    assert [p for cell in notebook_code(path) for p in bad_imports(cell)] == []


@pytest.mark.parametrize("path", sorted((ROOT / "examples").rglob("*.py")), ids=lambda p: p.name)
def test_example_scripts_import_only_the_public_api(path):
    assert bad_imports(path.read_text("utf-8")) == []


def test_the_library_calls_the_docs_name_are_in_their_stage_namespaces():
    # named in the docs' prose as the library side of a command (generate, price, audits, statistics)
    named = {
        "generation": {"run_job", "dry_run", "JobHooks"},
        "adaptation": {"price_ledger", "Pricing", "retokenize", "price_cells"},
        "audits": {"run_audits", "write_audit_report", "AuditResult", "langid_audit", "validation_agreement"},
        "stats": {"confirm", "consistency", "load_scored_ledger", "budget_sweep", "sweep_inputs"},
        "roundtrip": {"build_roundtrip_report", "write_roundtrip_report", "roundtrip_report"},
        "report": {"budget_tables", "write_budget_report", "sweep_tables"},
    }
    assert {stage: names - namespace(stage) for stage, names in named.items()} == {s: set() for s in named}


def test_the_public_api_is_at_most_20_stage_entry_points():
    assert len(mindcap_tok.__all__) <= 20
    assert mindcap_tok.__all__ == list(mindcap_tok.PUBLIC)
    assert len(set(mindcap_tok.__all__)) == len(mindcap_tok.__all__)


@pytest.mark.parametrize("name", mindcap_tok.__all__)
def test_every_public_name_resolves_is_documented_and_is_in_its_stage(name):
    value = getattr(mindcap_tok, name)
    assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    assert value.__module__.startswith("mindcap_tok."), name
    stage = mindcap_tok.PUBLIC[name]
    assert getattr(importlib.import_module(f"mindcap_tok.{stage}"), name) is value
    if "." not in stage:  # a stage's own namespace holds it too (not only a module inside the stage)
        assert name in namespace(stage), f"{name} is not in mindcap_tok.{stage}'s namespace"


def type_checking_block() -> str:
    """The ``if TYPE_CHECKING:`` block that makes :data:`mindcap_tok.PUBLIC` visible to type checkers."""
    lines = [f"    from .{m} import {n} as {n}" for n, m in sorted(mindcap_tok.PUBLIC.items(), key=lambda x: x[::-1])]
    return "\n".join(lines)


def test_type_checkers_see_the_public_names():
    tree = ast.parse(INIT.read_text("utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {a.asname: (node.module, a.name) for node in guarded.body for a in node.names}
    expected = {name: (module, name) for name, module in mindcap_tok.PUBLIC.items()}
    assert seen == expected, f"write this block under `if TYPE_CHECKING:` in {INIT}:\n{type_checking_block()}"
    assert set(mindcap_tok.__all__) <= set(dir(mindcap_tok))


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        _ = mindcap_tok.nothing_here


def test_import_stays_light():
    code = "import sys, mindcap_tok; print(sorted({m.split('.')[0] for m in sys.modules}))"
    loaded = set(ast.literal_eval(subprocess.check_output([sys.executable, "-c", code], text=True)))
    assert loaded & {"numpy", "pandas", "pyarrow", "tokenizers", "tiktoken", "torch", "click"} == set()


def test_test_helpers_do_not_ship_in_the_package():
    for module in ("mindcap_tok.stats.simulate", "mindcap_tok.adaptation.reference"):
        assert importlib.util.find_spec(module) is None, module
