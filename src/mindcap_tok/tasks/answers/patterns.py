"""Users' regular expressions (a task's answer pattern, its lm-eval filters), run under a bound on time.

Python's ``re`` cannot be interrupted: ``(a+)+$`` on forty ``a`` and a ``b`` runs for days. The ``regex`` module
reads the same syntax, backtracks less on such nested quantifiers, and takes a ``timeout`` on every search; a
pattern is compiled here once, and every search of it gets :data:`SEARCH_TIMEOUT_S`. A search that runs out of time
refuses the whole run in one line naming the pattern (a :class:`~mindcap_tok.errors.BadInputError`): a record read
as "no answer" because the pattern was too slow on it would be a silent wrong score.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

import regex

from ...errors import BadInputError

#: seconds one search of one text may take (the engine checks its clock now and then: a search may overrun it)
SEARCH_TIMEOUT_S = 1.0

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class UserPattern:
    """A compiled user pattern whose searches are bounded in time (the subset of ``re.Pattern`` the parsers use)."""

    compiled: Any
    what: str

    @property
    def pattern(self) -> str:
        return self.compiled.pattern

    @property
    def groups(self) -> int:
        return self.compiled.groups

    @property
    def groupindex(self) -> Mapping[str, int]:
        return self.compiled.groupindex

    def search(self, text: str) -> Any:
        """The first match in ``text``, or ``None``."""
        return self._bounded(lambda: self.compiled.search(text, timeout=SEARCH_TIMEOUT_S), text)

    def finditer(self, text: str) -> Iterator[Any]:
        """Every match in ``text``, in order (found at once: the time bound covers them all)."""
        return iter(self._bounded(lambda: list(self.compiled.finditer(text, timeout=SEARCH_TIMEOUT_S)), text))

    def _bounded(self, search: Callable[[], T], text: str) -> T:
        try:
            return search()
        except TimeoutError:
            raise BadInputError(
                f"{self.what} {self.pattern!r} took over {SEARCH_TIMEOUT_S:g} s to search one text of {len(text):,} "
                "characters (nested repetition that backtracks without end?); rewrite it"
            ) from None


@cache
def compile_user_pattern(pattern: str, *, what: str) -> UserPattern:
    """``pattern`` compiled for bounded searches; one that does not compile is refused in one line naming ``what``
    (e.g. ``"answer pattern"``, ``"filter 'flexible' pattern"``). The syntax is Python's ``re`` (what lm-eval's
    filters use): a pattern ``re`` refuses is refused even where the ``regex`` module would read it."""
    try:
        re.compile(pattern)
        compiled = regex.compile(pattern)
    except (re.error, regex.error, TypeError, ValueError, OverflowError, RecursionError) as exc:
        raise BadInputError(f"{what} {pattern!r} does not compile: {exc}") from None
    return UserPattern(compiled, what)
