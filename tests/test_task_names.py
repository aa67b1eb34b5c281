"""Nothing outside ``tasks/`` names a task or an arm: every string constant of the package's code is walked, and one
that is a built-in task's name or one of its arms' names is a finding (the task files own those names)."""

from __future__ import annotations

import ast
from pathlib import Path

from mindcap_tok.tasks.load import builtin_tasks, load_task

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "mindcap_tok"


def _names() -> set[str]:
    """The built-in tasks' names and their arms' names."""
    return set(builtin_tasks()) | {arm for name in builtin_tasks() for arm in load_task(name).arms}


def _named(paths, names: set[str], root: Path = PACKAGE) -> list[str]:
    """``file:line: 'name'`` for each string constant in ``paths`` (outside ``tasks/``) that is one of ``names``."""
    out = []
    for path in paths:
        if path.relative_to(root).parts[0] == "tasks":
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names:
                out.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return out


def test_the_names_are_the_task_files():
    assert {"mgsm", "belebele", "native", "translate-act", "pivot", "code-switched"} <= _names()


def test_no_task_or_arm_is_named_outside_tasks():
    assert _named(sorted(PACKAGE.rglob("*.py")), _names()) == []


def test_the_walk_finds_a_name(tmp_path):
    root = tmp_path / "mindcap_tok"
    (root / "stats").mkdir(parents=True)
    (root / "tasks").mkdir()
    (root / "stats" / "probe.py").write_text('A = "native"\ndef f(x="mgsm"):\n    return f"{x} native"\n', "utf-8")
    (root / "tasks" / "load.py").write_text('DEFAULT = "mgsm"\n', "utf-8")
    assert _named(sorted(root.rglob("*.py")), {"mgsm", "native"}, root) == [
        "stats/probe.py:1: 'native'",
        "stats/probe.py:2: 'mgsm'",
    ]
