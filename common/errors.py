"""The two kinds of failure every stage reports, whatever raised them.

The exporter, the optimizer and the EP's tools each have their own exception types; these bases say
what kind of failure each is, so that a front end (the `optim` command) handles them all alike
without importing the stages (the exporter imports torch).
"""

from __future__ import annotations


class UserError(ValueError):
    """Something the user can fix (a file, an option, data that does not fit the model): the message is
    one sentence saying what and how. The CLI prints it without a traceback and exits with 2."""


class CheckFailed(RuntimeError):
    """A stage's result failed its check against the stage before it (export vs PyTorch, optimize's
    proof): the input was fine, the tool or a kernel is wrong. The CLI exits with 1; nothing was written."""
