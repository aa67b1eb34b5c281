"""The test suite's own rules: no test module imports another (shared fixtures live in conftest.py, shared helpers
in modules not named ``test_*``), and no test is skipped quietly for a module its environment is meant to have."""

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
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module]
        else:
            continue
        found += [(node.lineno, n) for n in names if any(part.startswith("test_") for part in n.split("."))]
    return found


def test_the_import_finder_sees_every_spelling():
    source = "import json\nfrom test_a import x\nimport tests.test_b as b\n\ndef f():\n    from test_c import y\n"
    assert imports_of_test_modules(source) == [(2, "test_a"), (3, "tests.test_b"), (6, "test_c")]
    assert imports_of_test_modules("from ledger_factory import make_record\nimport pytest\n") == []


def test_no_test_module_imports_another():
    found = {
        f"{path.relative_to(TESTS)}:{line} imports {name}"
        for path in sorted(TESTS.rglob("*.py"))
        for line, name in imports_of_test_modules(path.read_text("utf-8"))
    }
    assert found == set(), "move what is shared into conftest.py or a helper module"


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
