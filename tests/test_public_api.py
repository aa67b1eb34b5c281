"""The public API is ``mindcap_tok.__all__``: every README and docs/ example, notebook and example script imports only
from it, every name in it resolves and is documented, and ``import mindcap_tok`` stays light."""

from __future__ import annotations

import ast
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


def python_blocks(markdown: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown text."""
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.M | re.S)


def notebook_code(path: Path) -> list[str]:
    """The code cells of a notebook, IPython magics and shell lines dropped."""
    cells = json.loads(path.read_text("utf-8"))["cells"]
    sources = ["".join(c["source"]) for c in cells if c["cell_type"] == "code"]
    return ["\n".join(line for line in s.splitlines() if not line.lstrip().startswith(("%", "!"))) for s in sources]


def bad_imports(code: str) -> list[str]:
    """Every mindcap_tok import in ``code`` that is not ``from mindcap_tok import <names of __all__>``."""
    problems = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            problems += [f"import {a.name}" for a in node.names if a.name.startswith("mindcap_tok.")]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mindcap_tok":
            if node.module != "mindcap_tok":
                problems.append(f"from {node.module} import ...")
            else:
                problems += [f"{a.name} is not in __all__" for a in node.names if a.name not in mindcap_tok.__all__]
    return problems


def test_the_checker_refuses_deep_imports_and_unlisted_names():
    assert bad_imports("from mindcap_tok.report.figures import plot_premiums") == [
        "from mindcap_tok.report.figures import ..."
    ]
    assert bad_imports("import mindcap_tok.stats\nfrom mindcap_tok import nothing_here") == [
        "import mindcap_tok.stats",
        "nothing_here is not in __all__",
    ]
    assert bad_imports("import mindcap_tok\nfrom mindcap_tok import load_tokenizer, price_ledger") == []


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


def test_the_library_calls_the_readme_names_are_public():
    # named in the README's prose as the library side of a command (premium, generate, price, audits)
    named = {"load_tokenizer", "token_premium", "run_job", "dry_run", "price_ledger", "Pricing", "retokenize"}
    named |= {"run_audits", "write_report", "AuditResult", "langid_audit", "validation_agreement", "Ledger"}
    assert named - set(mindcap_tok.__all__) == set()


@pytest.mark.parametrize("name", mindcap_tok.__all__)
def test_every_public_name_resolves_and_is_documented(name):
    value = getattr(mindcap_tok, name)
    assert (value.__doc__ or "").strip(), f"{name} has no docstring"
    assert value.__module__.startswith("mindcap_tok."), name


def test_all_is_what_type_checkers_see_plus_the_errors_and_each_name_is_that_object():
    assert len(set(mindcap_tok.__all__)) == len(mindcap_tok.__all__)
    errors = {"MindcapError", "BadInputError", "DamagedDataError", "MissingExtraError", "BackendError"}
    tree = ast.parse(INIT.read_text("utf-8"))
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    seen = {}
    for node in guarded.body:
        for a in node.names:
            seen[a.asname or a.name] = (node.module, a.name)
    assert set(mindcap_tok.__all__) == {*errors, *seen}
    for name, (module, attribute) in seen.items():  # the lazy import gives the object type checkers are told of
        assert getattr(mindcap_tok, name) is getattr(importlib.import_module(f"mindcap_tok.{module}"), attribute)
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
