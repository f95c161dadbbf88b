"""The one exception the exporter raises for anything a user can fix."""

from __future__ import annotations

import re

from optim.common.errors import CheckFailed, UserError


class ExportError(UserError):
    """An export failed for a reason the user can act on.

    The message is one sentence naming what was wrong and the fix; the CLI prints it without a
    traceback. When verification failed, `report` holds the per-output check rows.
    """

    def __init__(self, message: str, report: list[dict] | None = None):
        super().__init__(message)
        self.report = report or []


class VerificationError(ExportError, CheckFailed):
    """The model exported, but ONNX Runtime's results differ from PyTorch's beyond the tolerance.

    Not a mistake in the user's input (a CheckFailed: the CLI exits 1, not 2): the exporter or a kernel
    is wrong. Still an ExportError, so that one except clause catches every export failure.
    """


def first_line(error: BaseException) -> str:
    """The first line of an exception's message (or its type name): enough for a one-sentence error.

    TorchScript's interpreter puts its code traceback first and the real error last
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied ..."): that last line it is.
    """
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    if lines[0].startswith("The following operation failed in the TorchScript interpreter"):
        return re.sub(r"^[A-Za-z_.]*(Error|Exception): ", "", lines[-1])
    return lines[0].rstrip(":")  # "... here:" introduces lines that the sentence leaves out
