"""The one exception the exporter raises for anything a user can fix."""

from __future__ import annotations


class ExportError(ValueError):
    """An export failed for a reason the user can act on.

    The message is one sentence naming what was wrong and the fix; the CLI prints it without a
    traceback. When verification failed, `report` holds the per-output check rows.
    """

    def __init__(self, message: str, report: list[dict] | None = None):
        super().__init__(message)
        self.report = report or []


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (or its type name): enough for a one-sentence error."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
