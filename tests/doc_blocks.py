"""Run the command blocks of the README and of docs/ and check the output they show, as HF tokenizers' docs tests do.

A page's ```bash and ```python blocks run in page order in one folder (a copy of the checkout), each as a separate
process. Two HTML comments, on the line just above a fence, steer this:

- `<!-- readme-test: skip (why) -->` above a bash or Python block: the block is not run (pip, a GPU, the hub, files
  of the user's own), and the reason says why.
- `<!-- readme-test: output -->` above a ```text block: that block is what the previous fence of the page (a bash or
  Python block that runs) prints on stdout. The two are compared line by line after normalising whitespace (runs of
  spaces are one space, blank lines and trailing spaces do not count, and the box-drawing rules of the CLI's tables
  count as spaces); `…` (or `...`) inside a line stands for any text within that line (timings, paths), and a line
  holding only `…` for any number of lines (a part left out).

Run as a script (`python tests/doc_blocks.py docs/premiums.md --in DIR`), it runs a page's blocks in DIR and prints
what each printed, to refresh the output blocks after a change.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from markdown_it import MarkdownIt

SKIP = re.compile(r"<!--\s*readme-test:\s*skip\s*\((?P<why>[^)]*)\)\s*-->")
OUTPUT = re.compile(r"<!--\s*readme-test:\s*output\s*-->")
RUNNABLE = ("bash", "python")
WILDCARD = re.compile(r"…|\.\.\.")
BLOCK_TIMEOUT_S = 900


@dataclass(frozen=True)
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    code: str
    skip: str | None  # the reason given in the marker above it
    output: str | None = None  # the text of the output block that follows it, if any
    output_line: int | None = None  # 1-based line of that output block's fence


def _fences(text: str) -> list[tuple[int, str, str, str]]:
    """Every fenced block of a Markdown text as (0-based line of its fence, language, content, the line above it)."""
    lines = text.splitlines()
    found = []
    for tok in MarkdownIt("commonmark").parse(text):
        if tok.type != "fence":
            continue
        start = tok.map[0]
        above = lines[start - 1].strip() if start > 0 else ""
        found.append((start, tok.info.strip().split(" ")[0], tok.content, above))
    return found


def page_blocks(text: str) -> list[Block]:
    """The bash and Python blocks of a Markdown text, each with its skip reason and the output block shown after it."""
    blocks: list[Block] = []
    previous_runs = False  # the previous fence is a bash or Python block that runs
    for start, lang, content, above in _fences(text):
        if lang in RUNNABLE:
            m = SKIP.fullmatch(above)
            blocks.append(Block(start + 1, lang, content, m.group("why").strip() if m else None))
            previous_runs = m is None
            continue
        if lang == "text" and OUTPUT.fullmatch(above) and previous_runs:
            last = blocks[-1]
            blocks[-1] = Block(last.line, last.lang, last.code, last.skip, content, start + 1)
        previous_runs = False
    return blocks


def stray_markers(text: str) -> list[int]:
    """Lines holding a marker that steers nothing: a skip marker not above a bash or Python block, or an output
    marker not above a ```text block that directly follows a block that runs."""
    used = {b.line - 1 for b in page_blocks(text) if b.skip is not None}
    used |= {b.output_line - 1 for b in page_blocks(text) if b.output_line is not None}
    lines = text.splitlines()
    marker = [i + 1 for i, line in enumerate(lines) if SKIP.fullmatch(line.strip()) or OUTPUT.fullmatch(line.strip())]
    return [n for n in marker if n not in used]


#: box-drawing characters (U+2500-U+257F), the rules of the CLI's tables: compared as spaces, so a column's width
#: (which follows its longest value) does not count, only the values
_RULES = {c: " " for c in range(0x2500, 0x2580)}


def _normal_lines(text: str) -> list[str]:
    """The non-blank lines of a text, table rules read as spaces and every run of spaces as one."""
    return [" ".join(line.translate(_RULES).split()) for line in text.splitlines() if line.translate(_RULES).strip()]


def output_matches(shown: str, printed: str) -> bool:
    """Whether the output a page shows is what the command printed (whitespace normalised, `…` a wildcard)."""
    pattern = []
    for line in _normal_lines(shown):
        if WILDCARD.fullmatch(line):
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            # a wildcard takes the spaces beside it, so that it may stand for nothing
            parts = [re.escape(part.strip(" ")) for part in WILDCARD.split(line)]
            pattern.append(" ?[^\n]*? ?".join(parts) + r"\n")
    actual = "".join(line + "\n" for line in _normal_lines(printed))
    return re.fullmatch("".join(pattern), actual) is not None


def output_difference(shown: str, printed: str) -> str:
    """A unified diff of the shown output against the printed one, both normalised, to read what changed."""
    diff = difflib.unified_diff(_normal_lines(shown), _normal_lines(printed), "shown", "printed", lineterm="", n=1)
    return "\n".join(diff)


@dataclass(frozen=True)
class BlockRun:
    block: Block
    returncode: int
    stdout: str
    stderr: str
    seconds: float


def run_block(block: Block, cwd: Path, env: dict[str, str], scratch: Path) -> BlockRun:
    """Run one block in `cwd`: bash with -e and pipefail, Python as a script file written to `scratch`."""
    if block.lang == "bash":
        cmd = ["bash", "-e", "-o", "pipefail", "-c", block.code]
    else:
        script = scratch / f"block_{block.line}.py"
        script.write_text(block.code, "utf-8")
        cmd = [sys.executable, str(script)]
    start = time.perf_counter()
    res = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=BLOCK_TIMEOUT_S)
    return BlockRun(block, res.returncode, res.stdout, res.stderr, time.perf_counter() - start)


def run_page(page: Path, cwd: Path, env: dict[str, str], scratch: Path) -> tuple[list[str], list[str]]:
    """Run every block of a page that is not skipped, in order; return (failures, per-block timings)."""
    failures, took = [], []
    name = page.name if page.parent.name != "docs" else f"docs/{page.name}"
    for block in page_blocks(page.read_text("utf-8")):
        if block.skip is not None:
            continue
        run = run_block(block, cwd, env, scratch)
        took.append(f"{name}:{block.line} {run.seconds:.1f} s")
        if run.returncode != 0:
            tail = "\n".join((run.stdout + run.stderr).strip().splitlines()[-6:])
            failures.append(f"{name}:{block.line} ({block.lang}) exit {run.returncode}:\n{tail}")
        elif block.output is not None and not output_matches(block.output, run.stdout):
            diff = output_difference(block.output, run.stdout)
            failures.append(f"{name}:{block.output_line}: the output shown is not what the block printed:\n{diff}")
    return failures, took


def main() -> None:
    """Run one page's blocks in a folder and print what each printed (to refresh its output blocks)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("page", type=Path)
    parser.add_argument("--in", dest="cwd", type=Path, required=True, help="folder to run in (a copy of the checkout)")
    parser.add_argument("--from-line", type=int, default=0, help="run only the blocks from this line on")
    args = parser.parse_args()
    env = dict(os.environ, MPLBACKEND="Agg")
    for block in page_blocks(args.page.read_text("utf-8")):
        if block.skip is not None or block.line < args.from_line:
            continue
        run = run_block(block, args.cwd, env, args.cwd)
        verdict = (
            ""
            if block.output is None
            else ("  output OK" if output_matches(block.output, run.stdout) else "  OUTPUT DIFFERS")
        )
        print(f"===== {args.page}:{block.line} exit {run.returncode} {run.seconds:.1f} s{verdict}")
        print(run.stdout, end="")
        if run.returncode != 0:
            print(run.stderr[-2000:])


if __name__ == "__main__":
    main()
