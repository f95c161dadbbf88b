"""The exceptions prune() raises."""

from __future__ import annotations

from optim.common.errors import CheckFailed, UserError


class PruneError(UserError):
    """Something the user can fix (a SPEC without Python code, a bad ratio, data that does not fit the model):
    one sentence saying what and how; the CLI exits with 2."""


class TargetMissed(CheckFailed):
    """The pruned and recovered model misses --target on the held-out inputs: nothing was written (exit 1).
    `rows` are the held-out accuracy rows that say by how much."""

    def __init__(self, message: str, rows: list | None = None):
        super().__init__(message)
        self.rows = rows or []
