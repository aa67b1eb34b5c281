"""Every ```bash and ```python block of README.md runs as written (issue 28), as HF tokenizers' docs tests do.

The blocks run in README order in one copy of the checkout (its `git ls-files`, tracked and untracked but not
ignored), offline, with the data and tokenizers this checkout is configured with and `mindcap-tok` on PATH; a
block may use what an earlier one wrote (the quickstart's `demo/`). A block that cannot run here (pip, a GPU,
the hub, a long generation, files of the user's own) carries `<!-- readme-test: skip (why) -->` on the line
just above it in the README.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from markdown_it import MarkdownIt

from mindcap_tok.config import load_config

REPO = Path(__file__).resolve().parents[1]
SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>[^)]*)\)\s*-->")
RUNNABLE = ("bash", "python")
BLOCK_TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None  # the reason given in the README's marker


def readme_blocks(text: str) -> list[Block]:
    """The bash and Python fenced blocks of a Markdown text, each with the skip reason of the marker above it."""
    lines = text.splitlines()
    blocks = []
    for tok in MarkdownIt("commonmark").parse(text):
        lang = tok.info.strip().split(" ")[0] if tok.type == "fence" else ""
        if lang not in RUNNABLE:
            continue
        start = tok.map[0]
        above = lines[start - 1] if start > 0 else ""
        m = SKIP.fullmatch(above.strip())
        blocks.append(Block(start + 1, lang, tok.content, m.group("why").strip() if m else None))
    return blocks


def stray_markers(text: str) -> list[int]:
    """Lines holding a skip marker that is not directly above a bash or Python block (a marker that skips nothing)."""
    marked = {b.line - 1 for b in readme_blocks(text) if b.skip is not None}
    lines = text.splitlines()
    return [i + 1 for i, line in enumerate(lines) if SKIP.fullmatch(line.strip()) and i + 1 not in marked]


def test_blocks_and_markers_are_read_from_markdown():
    text = (
        "intro\n\n<!-- readme-test: skip (needs a GPU) -->\n```bash\nvllm serve x\n```\n\n"
        "```python\nprint(1)\n```\n\n```toml\na = 1\n```\n\n    indented code\n\n```bash\necho a\necho b\n```\n"
    )
    blocks = readme_blocks(text)
    assert [(b.line, b.lang, b.skip) for b in blocks] == [
        (4, "bash", "needs a GPU"),
        (8, "python", None),
        (18, "bash", None),
    ]
    assert blocks[2].code == "echo a\necho b\n"
    assert stray_markers(text) == []
    assert stray_markers("<!-- readme-test: skip (x) -->\n\ntext\n\n```bash\nls\n```\n") == [1]
    assert stray_markers("<!-- readme-test: skip (x) -->\n```toml\na = 1\n```\n") == [1]


def test_every_marker_skips_a_block_and_says_why():
    text = (REPO / "README.md").read_text("utf-8")
    assert stray_markers(text) == []
    blocks = readme_blocks(text)
    assert all(b.skip for b in blocks if b.skip is not None), "a skip marker needs a reason: skip (why)"
    runnable = [b for b in blocks if b.skip is None]
    assert len(runnable) >= 7 and any(b.lang == "python" for b in runnable)


def test_the_set_up_section_names_what_the_test_script_installs():
    """README "Set up" lists the extras scripts/test-all.sh installs into `.venv`, and its fasttext reinstall."""
    script = (REPO / "scripts" / "test-all.sh").read_text("utf-8")
    installed = re.search(r"\.venv/bin/pip install [^\n]*-e '\.\[([a-z,]+)\]'", script).group(1).split(",")
    readme = (REPO / "README.md").read_text("utf-8")
    setup = readme.split("## Set up", 1)[1].split("\n## ", 1)[0]
    said = " ".join(setup.split("Run the tests", 1)[1].split("```", 1)[0].split())
    named = set(re.findall(r"`([a-z]+)`", said.split(" extras", 1)[0]))
    assert named == set(installed), (named, installed)
    assert "force-reinstall" in script and "force-reinstalls `fasttext-numpy2`" in said
    for env in re.findall(r"\[ -x (\.venv[-a-z]*)/bin/python \]", script):
        assert f"`{env}`" in said, env


def _copy_of_checkout(dest: Path) -> Path:
    """The checkout's files as git lists them (tracked, and untracked ones that are not ignored)."""
    found = subprocess.run(
        ["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        capture_output=True,
        check=True,
    )
    for rel in filter(None, found.stdout.decode().split("\0")):
        src = REPO / rel
        if src.is_file():  # a deleted but still tracked file is listed too
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def _environment(copy: Path, bin_dir: Path) -> dict[str, str]:
    cfg = load_config(start=REPO)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDCAP_")}
    for var, entry in (("MINDCAP_DATA_DIR", cfg.data_dir), ("MINDCAP_TOKENIZERS_DIR", cfg.tokenizers_dir)):
        value = os.environ.get(var) or (str(entry.value) if entry.value is not None else None)
        assert value, f"{var} is not set and this checkout's configuration names no folder"
        env[var] = value
    env.update(
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        MPLBACKEND="Agg",
        PYTHONPATH=str(copy / "src"),  # the copy's own source, whatever is installed
        PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}",
        XDG_CONFIG_HOME=str(bin_dir.parent / "config"),  # no user config file leaks in
    )
    return env


@pytest.mark.slow
@pytest.mark.readme
def test_every_runnable_readme_block_runs_as_written(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a checkout to copy")
    copy = _copy_of_checkout(tmp_path / "checkout")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "mindcap-tok"  # the console script pip would install, for this interpreter
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mindcap_tok "$@"\n')
    shim.chmod(0o755)
    env = _environment(copy, bin_dir)
    failures, took = [], []
    for block in readme_blocks((REPO / "README.md").read_text("utf-8")):
        if block.skip is not None:
            continue
        if block.lang == "bash":
            cmd = ["bash", "-e", "-o", "pipefail", "-c", block.code]
        else:
            script = tmp_path / f"readme_{block.line}.py"
            script.write_text(block.code, "utf-8")
            cmd = [sys.executable, str(script)]
        start = time.perf_counter()
        res = subprocess.run(cmd, cwd=copy, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
        took.append(f"README.md:{block.line} {time.perf_counter() - start:.1f} s")
        if res.returncode != 0:
            tail = "\n".join((res.stdout + res.stderr).strip().splitlines()[-6:])
            failures.append(f"README.md:{block.line} ({block.lang}) exit {res.returncode}:\n{tail}")
    print("\n".join(took))  # shown with pytest -rP: where the time goes
    assert not failures, "\n\n".join(failures)
