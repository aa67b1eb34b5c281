"""`mindcap-tok config` and `mindcap-tok languages`: what was resolved, and from where."""

from __future__ import annotations

import click

from ..data.languages import aliases, flores_codes
from ._options import format_option
from ._output import emit, render, to_json
from ._parsing import Command


@click.command("config", cls=Command)
@format_option()
@click.pass_obj
def config_command(state, fmt: str) -> None:
    """Show the resolved data and tokenizer folders and where each setting came from."""
    from ..tokenization.registry import registry

    info = state.config.as_dict()
    info["models"] = {"value": ", ".join(registry()), "source": "package registry"}
    if fmt == "json":
        emit(to_json(info), None)
        return
    rows = [{"setting": k, "value": v["value"], "source": v["source"]} for k, v in info.items()]
    emit(render(rows, fmt), None)


@click.command("languages", cls=Command)
@format_option()
def languages_command(fmt: str) -> None:
    """List the 204 FLORES-200 codes with their short aliases."""
    by_code: dict[str, list[str]] = {}
    for alias, code in aliases().items():
        by_code.setdefault(code, []).append(alias)
    rows = [{"code": c, "aliases": ",".join(by_code.get(c, []))} for c in flores_codes()]
    emit(render(rows, fmt), None)
