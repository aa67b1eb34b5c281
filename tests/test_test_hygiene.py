"""The test suite's own rules: no test module imports another (shared fixtures live in conftest.py, shared helpers
in modules not named ``test_*``), no test reaches into the package's private names (tests check behaviour), and no
test is skipped quietly for a module its environment is meant to have."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
SCRIPT = TESTS.parent / "scripts" / "test-all.sh"


def imports_of_test_modules(source: str) -> list[tuple[int, str]]:
    """(line, module) of every import of a ``test_*`` module in ``source``, at any depth (functions included)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):  # the module, and each name (``from tests import test_x``)
            names = [*([node.module] if node.module else []), *(a.name for a in node.names)]
        else:
            continue
        found += [(node.lineno, n) for n in names if any(part.startswith("test_") for part in n.split("."))]
    return found


def test_the_import_finder_sees_every_spelling():
    source = "import json\nfrom test_a import x\nimport tests.test_b as b\n\ndef f():\n    from test_c import y\n"
    assert imports_of_test_modules(source) == [(2, "test_a"), (3, "tests.test_b"), (6, "test_c")]
    assert imports_of_test_modules("from tests import test_d\nfrom . import test_e\n") == [(1, "test_d"), (2, "test_e")]
    assert imports_of_test_modules("from ledger_factory import make_record\nimport pytest\n") == []


def test_no_test_module_imports_another():
    found = {
        f"{path.relative_to(TESTS)}:{line} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, name in imports_of_test_modules(path.read_text("utf-8"))
    }
    assert found == set(), "move what is shared into conftest.py or a helper module"


#: the package's private modules: tests may use their public names (``mindcap_tok._io.output_folder``)
PRIVATE_MODULES = frozenset(
    {
        "mindcap_tok._io",
        "mindcap_tok._json",
        "mindcap_tok._tables",
        "mindcap_tok._log",
        "mindcap_tok.cli._options",
        "mindcap_tok.cli._output",
        "mindcap_tok.cli._parsing",
        "mindcap_tok.cli._progress",
        "mindcap_tok.audits._common",
        "mindcap_tok.adaptation._bpe",
        "mindcap_tok.tasks.answers._lines",
    }
)
#: names outside the package whose underscore does not make them private, and why a test uses them
PUBLIC_DESPITE_THE_UNDERSCORE = {
    "os._exit": "the documented way to end a child process at once, as SIGKILL would: no cleanup runs",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_path(dotted: str) -> bool:
    """Whether a ``mindcap_tok`` dotted path names something private, other than a private module's public name."""
    parts = dotted.split(".")
    if parts[0] != "mindcap_tok":
        return False
    return any(_private(p) and ".".join(parts[: i + 1]) not in PRIVATE_MODULES for i, p in enumerate(parts))


def private_uses(source: str) -> list[tuple[int, str]]:
    """(line, what) of every private name of the package that ``source`` imports, every ``x._name`` it reads or
    writes, and every private name it hands to ``getattr``/``setattr``/``hasattr``/``delattr`` (monkeypatch's too).

    Allowed: the public names of :data:`PRIVATE_MODULES`, :data:`PUBLIC_DESPITE_THE_UNDERSCORE`, and a class of
    the test's own using its own attributes (``self._x`` where the file assigns ``self._x`` or defines it in a
    class)."""
    tree = ast.parse(source)
    own = {
        t.attr
        for node in ast.walk(tree)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        for t in (t.elts if isinstance(t, ast.Tuple) else [t])
        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self"
    }
    own |= {f.name for c in ast.walk(tree) if isinstance(c, ast.ClassDef) for f in c.body if hasattr(f, "name")}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names if _private_path(a.name)]
        elif isinstance(node, ast.ImportFrom) and node.module is not None and node.module.startswith("mindcap_tok"):
            found += [
                (node.lineno, f"from {node.module} import {a.name}")
                for a in node.names
                if _private_path(node.module) or _private_path(f"{node.module}.{a.name}")
            ]
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            text = ast.unparse(node)
            if text in PUBLIC_DESPITE_THE_UNDERSCORE or text in PRIVATE_MODULES:
                continue
            if isinstance(node.value, ast.Name) and node.value.id == "self" and node.attr in own:
                continue
            found.append((node.lineno, text))
        elif isinstance(node, ast.Call) and len(node.args) >= 2:
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            first, second = node.args[0], node.args[1]
            if name not in ("getattr", "setattr", "hasattr", "delattr"):
                continue
            if isinstance(second, ast.Constant) and isinstance(second.value, str) and _private(second.value):
                found.append((node.lineno, f"{name}({ast.unparse(first)}, {second.value!r})"))
            elif isinstance(first, ast.Constant) and isinstance(first.value, str) and _private_path(first.value):
                found.append((node.lineno, f"{name}({first.value!r})"))
    return sorted(found)


def test_the_private_use_finder_sees_every_spelling():
    source = """
from mindcap_tok.ingest.inspect_logs import _item
from mindcap_tok.store._hidden import thing
import mindcap_tok.report._figs as figs
from mindcap_tok._io import output_folder
import mindcap_tok._io as io
from mindcap_tok.cli import _options


class Own:
    def __init__(self):
        self._made = {}

    def _mine(self):
        return self._made, self._peeked


def test(enc, tok, monkeypatch):
    enc._row.clear()
    tok._frame()
    io._publish
    os._exit(9)
    monkeypatch.setattr(Ledger, "_commit", None)
    monkeypatch.setattr("mindcap_tok.config._probe_hub", None)
    monkeypatch.setattr("mindcap_tok.config.HUB_PROBE_TIMEOUT", 1)
    getattr(tok, "_fast")
    getattr(tok, "__dict__")
"""
    assert private_uses(source) == [
        (2, "from mindcap_tok.ingest.inspect_logs import _item"),
        (3, "from mindcap_tok.store._hidden import thing"),
        (4, "import mindcap_tok.report._figs"),
        (15, "self._peeked"),
        (19, "enc._row"),
        (20, "tok._frame"),
        (21, "io._publish"),
        (23, "setattr(Ledger, '_commit')"),
        (24, "setattr('mindcap_tok.config._probe_hub')"),
        (26, "getattr(tok, '_fast')"),
    ]


def test_no_test_uses_a_private_name_of_the_package():
    found = {
        f"{path.relative_to(TESTS)}:{line}: {what}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, what in private_uses(path.read_text("utf-8"))
    }
    assert found == set(), "test what the package does through its public names (see this module's allow-lists)"


def _stage_commands() -> list[str]:
    """The pytest commands of scripts/test-all.sh, continuation lines joined and ``$NAME`` of the script's own
    ``NAME=value`` lines filled in."""
    names: dict[str, str] = {}
    commands = []
    for line in SCRIPT.read_text("utf-8").replace("\\\n", " ").splitlines():
        line = re.sub(r"\$(\w+)", lambda m: names.get(m[1], m[0]), line)
        if assignment := re.fullmatch(r"([A-Z_]+)=(\S*)", line.strip()):
            names[assignment[1]] = assignment[2]
        elif "-m pytest" in line and not line.lstrip().startswith("#"):
            commands.append(line)
    return commands


def test_every_stage_names_the_modules_its_tests_need():
    """Each pytest run of the CI script sets MINDCAP_TEST_REQUIRES, and every module a test skips without is named
    by some stage: where CI means to have it, its absence stops the run instead of skipping tests."""
    commands = _stage_commands()
    assert len(commands) == 4, commands  # main, vLLM, COMET, evals
    required = set()
    for command in commands:
        listed = re.search(r"MINDCAP_TEST_REQUIRES=([\w,]+)", command)
        assert listed, command
        required |= set(listed.group(1).split(","))
    skipped_without = {
        m.group(1).split(".")[0]
        for path in TESTS.glob("test_*.py")
        for m in re.finditer(r"""importorskip\(\s*["']([\w.]+)["']""", path.read_text("utf-8"))
    }
    assert skipped_without and skipped_without <= required, skipped_without - required


def _collect(requires: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "MINDCAP_TEST_REQUIRES": requires}
    args = ["-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist"]
    target = f"{Path(__file__).name}::test_the_import_finder_sees_every_spelling"
    return subprocess.run([sys.executable, *args, target], cwd=TESTS, env=env, capture_output=True, text=True)


def test_a_missing_required_module_stops_the_run_before_any_test():
    missing = _collect("json,mindcap_no_such_module")
    assert missing.returncode == 4, missing.stdout + missing.stderr  # pytest's usage error
    assert "MINDCAP_TEST_REQUIRES: this environment lacks mindcap_no_such_module (" in missing.stderr
    assert "1 test collected" not in missing.stdout
    present = _collect("json, os")
    assert present.returncode == 0 and "1 test collected" in present.stdout, present.stdout + present.stderr
