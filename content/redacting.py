"""A session's redactors, made when first needed: the default one compiles its rules, which a process that only
reads (``sessiontree context``) never needs, so neither it nor ``sessiontree.content.redaction`` is loaded before an append."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

DEFAULT: Any = "default"  # sessiontree.content.redaction.DEFAULT


class Redacting:
    """What ``Session`` holds of its redactors: ``redactors`` and ``_redact`` (an entry through them)."""

    _redactors: tuple[Callable[[str], str], ...] | None

    def _set_redactors(self, redactors: Any) -> None:
        self._redactors = None  # the default, made on first use
        if not (isinstance(redactors, str) and redactors == DEFAULT):
            from sessiontree.content.redaction import check_redactors

            self._redactors = check_redactors(redactors)
        self._redact: Callable[[Any], Any] = self._first_redact

    @property
    def redactors(self) -> tuple[Callable[[str], str], ...]:
        """The redactors every appended entry goes through (``()``: none)."""
        if self._redactors is None:
            from sessiontree.content.redaction import default_redactors

            self._redactors = default_redactors()
        return self._redactors

    def _first_redact(self, entry: Any) -> Any:
        from sessiontree.content.redaction import entry_redactor

        self._redact = entry_redactor(self.redactors)  # from now on, called directly
        return self._redact(entry)
