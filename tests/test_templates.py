"""Prompt templates admit only plain ``{name}`` placeholders: checked against str.format's own parse."""

from __future__ import annotations

import pytest

from mindcap_tok.errors import BadInputError
from mindcap_tok.templates import template_fields


def test_plain_placeholders_are_named():
    assert template_fields("Translate {text} from {src_lang} to {tgt_lang}. {{literal}}") == {
        "text",
        "src_lang",
        "tgt_lang",
    }
    assert template_fields("no placeholder") == set()
    assert template_fields("{my-field} {fråga}") == {"my-field", "fråga"}  # names str.format looks up as given


@pytest.mark.parametrize(
    "template,shown",
    [
        ("{text:d}", "{text:d}"),
        ("{text:>100000}", "{text:>100000}"),
        ("{text!r}", "{text!r}"),
        ("{text.upper}", "{text.upper}"),
        ("{text[0]}", "{text[0]}"),
        ("{0}", "{0}"),
        ("{}", "{}"),
    ],
)
def test_anything_but_a_plain_name_is_refused_naming_the_placeholder(template, shown):
    with pytest.raises(BadInputError, match="must be a plain") as exc:
        template_fields(f"a {template} b")
    assert repr(shown) in str(exc.value)


@pytest.mark.parametrize("template", ["{text", "text}", "{text{x}}"])
def test_a_template_that_does_not_parse_is_refused(template):
    with pytest.raises(BadInputError, match="is not a valid template"):
        template_fields(template)
