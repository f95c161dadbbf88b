"""Keeping the torch exporters' chatter (progress lines, warnings, log records) off the console."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import tempfile
import warnings

log = logging.getLogger("optim.exporter")

# Loggers that print during a normal export ("torchvision is not installed", pass statistics).
_NOISY_LOGGERS = ("torch.onnx", "torch.export", "torch._export", "torch._dynamo", "torch.fx", "onnxscript", "onnx_ir")


@contextlib.contextmanager
def quiet(verbose: bool):
    """Unless verbose, captures stdout, stderr, warnings and torch log records during the block.

    Both Python's streams and file descriptors 1 and 2 are captured: the TorchScript exporter
    prints from C++ ("Torch IR graph at exception: ..."). What was captured goes to the
    "optim.exporter" logger at DEBUG, except TracerWarnings, which go out at WARNING: they mean
    the TorchScript tracer followed Python control flow for the example inputs only, which the
    user must know. With verbose, everything passes through.
    """
    if verbose:
        yield
        return
    buffer = io.StringIO()
    loggers = [logging.getLogger(name) for name in _NOISY_LOGGERS]
    levels = [logger.level for logger in loggers]
    with warnings.catch_warnings(record=True) as caught, _captured_fds() as native:
        warnings.simplefilter("always")
        try:
            with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(buffer):
                for logger in loggers:
                    logger.setLevel(logging.ERROR)
                yield
        finally:
            for logger, level in zip(loggers, levels):
                logger.setLevel(level)
    _report(buffer.getvalue() + native.getvalue(), caught)


@contextlib.contextmanager
def _captured_fds():
    """Points fds 1 and 2 at a temporary file for the block; yields a StringIO that receives
    its text afterwards. Does nothing where the process has no such descriptors."""
    text = io.StringIO()
    try:
        saved = [os.dup(1), os.dup(2)]
    except OSError:
        yield text
        return
    with tempfile.TemporaryFile() as sink:
        _flush()
        os.dup2(sink.fileno(), 1)
        os.dup2(sink.fileno(), 2)
        try:
            yield text
        finally:
            _flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            for fd in saved:
                os.close(fd)
            sink.seek(0)
            text.write(sink.read().decode(errors="replace"))


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()


def _report(text: str, caught: list[warnings.WarningMessage]) -> None:
    if text.strip():
        log.debug("exporter output:\n%s", text.rstrip())
    tracer = sorted({str(w.message).splitlines()[0] for w in caught if w.category.__name__ == "TracerWarning"})
    for message in tracer:
        log.warning("the TorchScript tracer followed Python control flow for the example inputs only: %s", message)
    for w in caught:
        if w.category.__name__ != "TracerWarning":
            log.debug("%s: %s", w.category.__name__, w.message)
