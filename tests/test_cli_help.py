"""``--help`` stays fast: neither the top level nor any subcommand's help imports the heavy libraries."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import mindcap_tok

#: what a help text must not pay for (each costs 0.1-0.6 s to import)
HEAVY = ("pandas", "pyarrow", "tokenizers", "pydantic", "numpy", "torch")

#: in a fresh interpreter: every command path of the group (walked, so a new command is covered), its --help run
#: in turn, and the heavy modules loaded after each (the first path that loads one is the culprit)
PROBE = """
import json, sys
import click
from mindcap_tok.cli.main import cli

HEAVY = %r

def paths(group, prefix):
    ctx = click.Context(group)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        yield [*prefix, name]
        if isinstance(command, click.Group):
            yield from paths(command, [*prefix, name])

found = []
for path in [[], *paths(cli, [])]:
    try:
        cli.main(args=[*path, "--help"], prog_name="mindcap-tok", standalone_mode=False)
    except SystemExit:
        pass
    found.append([" ".join(path), [m for m in HEAVY if m in sys.modules]])
print(json.dumps(found))
"""


def test_every_help_imports_no_heavy_library():
    src = str(Path(mindcap_tok.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run(
        [sys.executable, "-c", PROBE % (HEAVY,)], capture_output=True, text=True, env=env, check=True, timeout=60
    )
    found = json.loads(run.stdout.splitlines()[-1])
    paths = [path for path, _ in found]
    assert {"", "sweep", "ledger import", "protocol test", "roundtrip report"} <= set(paths)
    assert [(path, heavy) for path, heavy in found if heavy] == []
