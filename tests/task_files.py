"""User task files the tests write: integer answers from local JSON lines, a native and a comparator arm."""

from __future__ import annotations

from collections.abc import Sequence

#: a small task file written out by hand: two languages, integer answers, a native and a comparator arm
SMALL = """
name = "tiny"
version = 2
licence = "CC0-1.0"
languages = ["eng_Latn", "deu_Latn"]
native = "native"
comparator = "translate-act"

[source]
files = "tiny-{lang}.jsonl"
fields = { q = "question" }

[answer]
type = "integer"

[gold]
type = "integer"

[arms.native.templates.eng_Latn]
instruction = "Solve. End with a final line \\"#### <integer>\\"."
announce = "You have {budget} tokens."
body = "Problem: {q}"
[arms.native.templates.deu_Latn]
instruction = "Löse. Ende mit einer Zeile \\"#### <Zahl>\\"."
body = "Aufgabe: {q}"
[arms.translate-act.templates."*"]
instruction = "Translate to English, then solve."
body = "Problem: {q}"
"""


def integer_task(
    name: str,
    languages: Sequence[str],
    *,
    native: str = "native",
    comparator: str = "english",
    comparator_reasoning: str | None = None,
    more_arms: Sequence[tuple[str, str]] = (),
) -> str:
    """The TOML of a task ``name``: items from ``plain-{lang}.jsonl`` (field ``question``), integer gold, arms
    ``native`` ("Solve.") and ``comparator`` ("Solve in English.", reasoning in ``comparator_reasoning`` when
    given), and ``more_arms`` as (arm, instruction)."""
    reasoning = f'[arms.{comparator}]\nreasoning = "{comparator_reasoning}"\n' if comparator_reasoning else ""
    arms = "".join(f'[arms.{arm}.templates."*"]\ninstruction = "{text}"\nbody = "{{q}}"\n' for arm, text in more_arms)
    return f"""name = "{name}"
version = 1
licence = "CC0-1.0"
languages = [{", ".join(f'"{lang}"' for lang in languages)}]
native = "{native}"
comparator = "{comparator}"

[source]
files = "plain-{{lang}}.jsonl"
fields = {{ q = "question" }}

[answer]
type = "integer"

[gold]
type = "integer"

[arms.{native}.templates."*"]
instruction = "Solve."
body = "{{q}}"
{reasoning}[arms.{comparator}.templates."*"]
instruction = "Solve in English."
body = "{{q}}"
{arms}"""
