"""Data flows one way (DESIGN.md): a stage imports only stages below it. Walks every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mindcap_tok"

#: stage (top-level module or subpackage of mindcap_tok) -> layer; a module may import its own layer or lower
LAYERS = {
    "errors": 0, "_io": 0, "_json": 0, "_tables": 0, "_log": 0, "config": 0,
    "data": 1, "tokenization": 1, "resample": 1, "budgets": 1, "spec": 1,
    "premium": 2, "metrics": 2,
    "ledger": 3,
    "stats": 4,
    "adaptation": 5,
    "audits": 6,
    "report": 7, "roundtrip": 7,
    "cli": 8,
    "__main__": 9,
}  # fmt: skip
#: the package's own __init__ re-exports a small public API lazily, from any stage
EXEMPT = {"mindcap_tok"}


def _module(path: Path, root: Path = PACKAGE) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path = PACKAGE) -> list[tuple[int, str]]:
    """(line, absolute module) of every mindcap_tok import in ``path``, relative ones resolved."""
    module = _module(path, root)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
                names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            else:
                names = [node.module or ""]
            found += [(node.lineno, n) for n in names if n.startswith("mindcap_tok")]
        elif isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("mindcap_tok")]
    return found


def _stage(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _violations(paths, root: Path = PACKAGE) -> list[str]:
    out = []
    for path in paths:
        source = _module(path, root)
        if source in EXEMPT:
            continue
        here = _stage(source)
        for line, target in _imports(path, root):
            there = _stage(target)
            if there not in LAYERS and there not in EXEMPT:
                out.append(f"{path.name}:{line}: {target} belongs to no layer (add it to LAYERS)")
            elif there in EXEMPT or LAYERS[there] > LAYERS[here]:
                out.append(f"{source} (layer {LAYERS[here]}) imports {target} (layer {LAYERS.get(there, '?')})")
    return out


def test_every_stage_has_a_layer():
    stages = {_stage(_module(p)) for p in PACKAGE.rglob("*.py")} - EXEMPT
    assert not stages - set(LAYERS), f"stages without a layer: {sorted(stages - set(LAYERS))}"


def test_no_lower_stage_imports_a_higher_one():
    assert _violations(sorted(PACKAGE.rglob("*.py"))) == []


def test_the_walk_finds_a_violation(tmp_path):
    # a stats module importing the CLI and the audits (a copy of the layout in tmp_path): both are flagged
    root = tmp_path / "mindcap_tok"
    fake = root / "stats" / "_layering_probe.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from ..cli.main import cli\nfrom mindcap_tok.audits import suite\nfrom .. import _io\n", "utf-8")
    assert _violations([fake], root) == [
        "mindcap_tok.stats._layering_probe (layer 4) imports mindcap_tok.cli.main (layer 8)",
        "mindcap_tok.stats._layering_probe (layer 4) imports mindcap_tok.audits (layer 6)",
    ]
