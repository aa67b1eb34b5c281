"""Data flows one way (docs/architecture.md): a stage imports only stages below it. Walks every module's imports."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mindcap_tok"

#: stage (top-level module or subpackage of mindcap_tok) -> layer; a module may import its own layer or lower
LAYERS = {
    "errors": 0,
    "_io": 0,
    "_json": 0,
    "_tables": 0,
    "_log": 0,
    "config": 0,
    "choices": 0,
    "data": 1,
    "tokenization": 1,
    "resample": 1,
    "distinct": 1,
    "budgets": 1,
    "spec": 1,
    "templates": 1,
    "premium": 2,
    "metrics": 2,
    "tasks": 2,
    "store": 3,
    "generation": 4,
    "ingest": 4,
    "scoring": 4,
    "stats": 5,
    "adaptation": 6,
    "audits": 7,
    # a run's check imports it (ingest), scores it (scoring), scales its caps (premiums) and bounds its shares
    # (audits' Wilson interval)
    "checks": 7,
    "report": 8,
    "roundtrip": 8,
    "demo": 8,
    "cli": 9,
    "__main__": 10,
}
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
        "mindcap_tok.stats._layering_probe (layer 5) imports mindcap_tok.cli.main (layer 9)",
        "mindcap_tok.stats._layering_probe (layer 5) imports mindcap_tok.audits (layer 7)",
    ]


def _import_graph(root: Path = PACKAGE) -> dict[str, set[str]]:
    """module -> the package's modules it imports (module level and in functions), ``from pkg import mod``
    resolved to the module where ``pkg.mod`` is one; a package's own ``__init__`` counts as a module."""
    paths = sorted(root.rglob("*.py"))
    modules = {_module(p, root) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        source = _module(path, root)
        targets = set()
        for _, target in _imports(path, root):
            while target not in modules and "." in target:  # pkg.mod.name -> pkg.mod
                target = target.rpartition(".")[0]
            if target in modules and target != source:
                targets.add(target)
        graph[source] = targets - EXEMPT
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of ``graph`` (its modules in order, the first repeated at the end), or [] when none."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str]:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        state[node] = 2
        path.pop()
        return []

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return []


def test_no_import_cycle_between_modules():
    # in-function imports count: they hide a cycle from the interpreter, not from the design
    assert _cycle(_import_graph()) == []


def test_the_cycle_search_finds_a_hidden_cycle(tmp_path):
    # a.py imports b at module level, b.py imports a inside a function: a cycle
    root = tmp_path / "mindcap_tok"
    (root / "stats").mkdir(parents=True)
    (root / "stats" / "a.py").write_text("from . import b\n", "utf-8")
    (root / "stats" / "b.py").write_text("def f():\n    from .a import x\n", "utf-8")
    (root / "stats" / "c.py").write_text("from .a import y\n", "utf-8")
    graph = _import_graph(root)
    assert graph["mindcap_tok.stats.c"] == {"mindcap_tok.stats.a"}
    assert _cycle(graph) == ["mindcap_tok.stats.a", "mindcap_tok.stats.b", "mindcap_tok.stats.a"]


#: the ledger's rooms: other stages enter each only through its package (its ``__init__``), never a module inside
ROOMS = ("store", "generation", "ingest", "scoring", "demo")
#: rooms on the same layer that do not import each other: a record is generated or ingested, then scored
SIBLINGS = ("generation", "ingest", "scoring")


def _room_violations(paths, root: Path = PACKAGE) -> list[str]:
    out = []
    for path in paths:
        source = _module(path, root)
        if source in EXEMPT:
            continue
        here = _stage(source)
        for line, target in _imports(path, root):
            parts = target.split(".")
            there = _stage(target)
            if there in ROOMS and there != here and len(parts) > 2:
                out.append(f"{source}:{line} enters {there} through {target}, not mindcap_tok.{there}")
            if here in SIBLINGS and there in SIBLINGS and here != there:
                out.append(f"{source}:{line}: {here} imports its sibling {there}")
    return out


def test_rooms_are_entered_through_their_package():
    assert _room_violations(sorted(PACKAGE.rglob("*.py"))) == []


def test_room_check_finds_a_side_door(tmp_path):
    pkg = tmp_path / "mindcap_tok"
    for name, text in {
        "__init__.py": "",
        "store/__init__.py": "from .ledger import Ledger\n",
        "store/ledger.py": "class Ledger: ...\n",
        "scoring/__init__.py": "",
        "scoring/score.py": "from ..store.ledger import Ledger\nfrom ..generation import run_job\n",
        "generation/__init__.py": "",
    }.items():
        (pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (pkg / name).write_text(text)
    found = _room_violations(sorted(pkg.rglob("*.py")), pkg)
    assert found == [
        "mindcap_tok.scoring.score:1 enters store through mindcap_tok.store.ledger, not mindcap_tok.store",
        "mindcap_tok.scoring.score:2: scoring imports its sibling generation",
    ]
