"""The exceptions optimize() raises."""

from __future__ import annotations

from optim.common.errors import CheckFailed, UserError


class OptimizeError(UserError):
    """Something the user can fix (a bad option, an unreadable model, inputs that do not fit):
    one sentence saying what and how; the CLI prints it without a traceback and exits with 2."""


class ProofError(CheckFailed):
    """A pass (or the combination of passes) changed what the model computes, or broke it.

    `culprit` names the pass found by re-running the changes one at a time ("" when no single
    step reproduces the failure); `problem` says what differs. No output file was written.
    `events` are the rewrites and refusals made before the failure, for -v.
    """

    def __init__(self, message: str, culprit: str, problem: str, events: list | None = None):
        super().__init__(message)
        self.culprit = culprit
        self.problem = problem
        self.events = events or []
