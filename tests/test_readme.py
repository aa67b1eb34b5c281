"""Every ```bash and ```python block of README.md and docs/*.md runs as written, and the output a page shows after a
block is what the block printed, as HF tokenizers' docs tests do (markers and comparison: tests/doc_blocks.py).

The README's blocks run in order in one copy of the checkout (its `git ls-files`, tracked and untracked but not
ignored), offline, with the data and tokenizers this checkout is configured with and `mindcap-tok` on PATH; a block
may use what an earlier one wrote (the quickstart's `demo/`). Each docs page then runs in a copy of its own, in page
order, starting from what the README's demo built (:data:`SHARED`, linked in, not rebuilt).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from doc_blocks import output_difference, output_matches, page_blocks, run_page, stray_markers
from mindcap_tok.config import load_config

REPO = Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
#: what the README's demo section builds and every docs page may start from: the demo ledgers, the tiny model and
#: its ledger (hard links: shards and model files are never rewritten in place)
SHARED = ("demo", "out/tiny-qwen3", "out/tiny-ledger")


def test_blocks_and_markers_are_read_from_markdown():
    text = (
        "intro\n\n<!-- readme-test: skip (needs a GPU) -->\n```bash\nvllm serve x\n```\n\n"
        "```python\nprint(1)\n```\n\n```toml\na = 1\n```\n\n    indented code\n\n```bash\necho a\necho b\n```\n"
    )
    blocks = page_blocks(text)
    assert [(b.line, b.lang, b.skip) for b in blocks] == [
        (4, "bash", "needs a GPU"),
        (8, "python", None),
        (18, "bash", None),
    ]
    assert blocks[2].code == "echo a\necho b\n"
    assert stray_markers(text) == []
    assert stray_markers("<!-- readme-test: skip (x) -->\n\ntext\n\n```bash\nls\n```\n") == [1]
    assert stray_markers("<!-- readme-test: skip (x) -->\n```toml\na = 1\n```\n") == [1]


def test_an_output_block_belongs_to_the_block_that_runs_just_before_it():
    text = (
        "```bash\necho 1\n```\n\nprose\n\n<!-- readme-test: output -->\n```text\n1\n```\n\n"
        "<!-- readme-test: skip (x) -->\n```bash\necho 2\n```\n<!-- readme-test: output -->\n```text\n2\n```\n\n"
        "```bash\necho 3\n```\n```toml\na = 1\n```\n<!-- readme-test: output -->\n```text\n3\n```\n\n"
        "```python\nprint(4)\n```\n<!-- readme-test: output -->\n```console\n4\n```\n"
    )
    blocks = page_blocks(text)
    assert [(b.line, b.output, b.output_line) for b in blocks] == [
        (1, "1\n", 8),
        (13, None, None),  # skipped: what it would print cannot be checked, so its marker is stray
        (21, None, None),  # a toml block stands between
        (32, None, None),  # the output block is not ```text
    ]
    assert stray_markers(text) == [16, 27, 35]


@pytest.mark.parametrize(
    ("shown", "printed"),
    [
        ("a  b\n\n c\n", "a b\nc   \n\n"),  # runs of spaces, blank lines and indentation do not count
        ("┃ lang ┃ r ┃\n│ th   │ 2.551 │\n", "┃ lang     ┃ r     ┃\n┡━━━━━╇━━━┩\n│ th │ 2.551 │\n"),  # table rules
        ("took … s\nwrote out/x\n", "took 12.3 s\nwrote out/x\n"),
        ("took ... s\n", "took s\n"),  # a wildcard may stand for nothing
        ("first\n…\nlast\n", "first\n2\n3\nlast\n"),
        ("first\n…\nlast\n", "first\nlast\n"),
        ("…\n", "anything\nat all\n"),
    ],
)
def test_shown_output_matches_what_was_printed(shown, printed):
    assert output_matches(shown, printed)


@pytest.mark.parametrize(
    ("shown", "printed"),
    [
        ("th 2.551\n", "th 2.552\n"),  # one digit differs
        ("th 2.551\n", "th 2.5510\n"),  # a longer number is not the number shown
        ("a\nb\n", "a\n"),  # a line missing
        ("a\n", "a\nb\n"),  # a line more
        ("b\na\n", "a\nb\n"),  # order counts
        ("took … s\n", "took 12.3 s\nextra\n"),  # an inline wildcard does not cross lines
        ("first\n…\nlast\n", "first\n2\nlast but one\n"),
        ("x.y\n", "xzy\n"),  # a dot is a dot, not a regex
        ("th\n", "tha\n"),
    ],
)
def test_shown_output_differing_from_what_was_printed_fails(shown, printed):
    assert not output_matches(shown, printed)
    assert output_difference(shown, printed)


def test_a_changed_value_fails_the_page_run(tmp_path):
    """A page whose shown output is stale fails, naming the output block and the value that changed."""
    page = tmp_path / "page.md"
    page.write_text(
        "```bash\necho 'th 2.551'\n```\n<!-- readme-test: output -->\n```text\nth 2.551\n```\n\n"
        "```python\nprint('sw', 1.936)\n```\n<!-- readme-test: output -->\n```text\nsw 1.937\n```\n\n"
        "```bash\nexit 3\n```\n",
        "utf-8",
    )
    failures, took = run_page(page, tmp_path, dict(os.environ), tmp_path)
    assert len(took) == 3 and len(failures) == 2
    assert failures[0].startswith("page.md:13: the output shown is not what the block printed")
    assert "-sw 1.937\n+sw 1.936" in failures[0]
    assert failures[1].startswith("page.md:17 (bash) exit 3")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_marker_steers_a_block_and_a_skip_says_why(page):
    text = page.read_text("utf-8")
    assert stray_markers(text) == []
    blocks = page_blocks(text)
    assert all(b.skip for b in blocks if b.skip is not None), "a skip marker needs a reason: skip (why)"


def test_the_pages_run_blocks_and_check_shown_values():
    blocks = {p.relative_to(REPO).as_posix(): page_blocks(p.read_text("utf-8")) for p in PAGES}
    runnable = [b for bs in blocks.values() for b in bs if b.skip is None]
    assert len(runnable) >= 20 and any(b.lang == "python" for b in runnable)
    assert sum(b.output is not None for b in runnable) >= 15
    assert any(b.output is not None for b in blocks["README.md"])


def test_the_docs_index_links_every_page():
    index = (REPO / "docs" / "README.md").read_text("utf-8")
    linked = set(re.findall(r"\]\(([a-z-]+\.md)\)", index))
    assert linked == {p.name for p in PAGES if p.parent.name == "docs" and p.name != "README.md"}


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
    # no MINDCAP_* settings and no terminal width (pytest-xdist's workers set COLUMNS): the pages show what a
    # command prints into a pipe, every table column
    env = {k: v for k, v in os.environ.items() if not k.startswith("MINDCAP_") and k not in ("COLUMNS", "LINES")}
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
def test_every_runnable_block_of_the_readme_and_docs_runs_and_prints_what_it_shows(tmp_path):
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and a checkout to copy")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "mindcap-tok"  # the console script pip would install, for this interpreter
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m mindcap_tok "$@"\n')
    shim.chmod(0o755)
    failures, took = [], []
    readme_copy = _copy_of_checkout(tmp_path / "README")
    for page in PAGES:
        if all(b.skip is not None for b in page_blocks(page.read_text("utf-8"))):
            continue
        copy = readme_copy if page.parent == REPO else tmp_path / "docs" / page.stem
        if copy != readme_copy:
            _copy_of_checkout(copy)
            for rel in SHARED:
                if (readme_copy / rel).is_dir():
                    shutil.copytree(readme_copy / rel, copy / rel, copy_function=os.link)
        page_failures, page_took = run_page(page, copy, _environment(copy, bin_dir), tmp_path)
        failures += page_failures
        took += page_took
    print("\n".join(took))  # shown with pytest -rP: where the time goes
    assert not failures, "\n\n".join(failures)
