"""Answer specs the parser and scoring tests share: the fields of a task's answer spec that parsers read."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class Answer:
    """The fields of a task's answer spec that parsers read (a stand-in for ``tasks.model.AnswerSpec``)."""

    type: str
    labels: list[str] | None = None
    pattern: str | None = None
    variants: dict = field(default_factory=dict)


ABCD = Answer("choice", list("ABCD"), variants={"phrases": {"spa": ["Respuesta"], "deu": ["Antwort"]}})
BELEBELE = Answer("choice", list("1234"))
MATH = Answer("math")
