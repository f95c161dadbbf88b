"""A runtime in a child process of its own: one that crashes (OpenVINO dies with SIGSEGV compiling some int8 QDQ
models, in the process that asked) ends its child, and the parent hears one line instead of losing its own run.

The child builds the runtime with a factory (a module-level function, so the spawned child can import it), then
answers requests on a pipe: new inputs (sent once per set), and runs it times itself, so a benchmark counts the
runtime's time, not the pipe's.
"""

from __future__ import annotations

import multiprocessing
import signal
import time


class ChildFailed(RuntimeError):
    """The runtime raised an error in its child (the message is its own, one line) or the child died (crashed)."""

    def __init__(self, message: str, crashed: bool = False):
        super().__init__(message)
        self.crashed = crashed


def _serve(conn, factory, args) -> None:
    try:
        runner, description = factory(*args)
    except Exception as e:  # noqa: BLE001 - reported to the parent, which decides
        conn.send(("error", _one_line(e)))
        return
    conn.send(("ready", description))
    feeds = None
    while True:
        try:
            message = conn.recv()
        except EOFError:  # the parent went away
            return
        if message[0] == "stop":
            return
        if message[0] == "feeds":
            feeds = message[1]
            continue
        try:
            t0 = time.perf_counter()
            outputs = runner.run(None, feeds)
            seconds = time.perf_counter() - t0
            conn.send(("ok", seconds, list(outputs) if message[1] else None))
        except Exception as e:  # noqa: BLE001
            conn.send(("error", _one_line(e)))


def _one_line(e: Exception) -> str:
    lines = [line.strip() for line in str(e).strip().splitlines() if line.strip()]
    return lines[-1] if lines else type(e).__name__


class ChildRuntime:
    """factory(*args) -> (runner with an InferenceSession-like run(), description), built and run in a spawned
    child. ChildFailed from the constructor or run() when it raises there or when the child dies."""

    def __init__(self, factory, *args):
        ctx = multiprocessing.get_context("spawn")  # not fork: the parent holds ONNX Runtime's threads
        self._conn, child_end = ctx.Pipe()
        self._process = ctx.Process(target=_serve, args=(child_end, factory, args), daemon=True)
        self._process.start()
        child_end.close()
        self._feeds = None
        kind, payload = self._receive()[:2]
        if kind == "error":
            self.close()
            raise ChildFailed(payload)
        self.description = payload

    def run(self, feeds, outputs: bool = True) -> tuple[float, list | None]:
        """(seconds the run took in the child, its outputs or None); the inputs cross the pipe once per feeds object."""
        try:
            if feeds is not self._feeds:
                self._conn.send(("feeds", feeds))
                self._feeds = feeds
            self._conn.send(("run", outputs))
        except (BrokenPipeError, ConnectionResetError, OSError):
            raise ChildFailed(self._ended(), crashed=True) from None
        reply = self._receive()
        if reply[0] == "error":
            raise ChildFailed(reply[1])
        return reply[1], reply[2]

    def _receive(self):
        while not self._conn.poll(0.2):
            if not self._process.is_alive():
                break
        try:
            return self._conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            raise ChildFailed(self._ended(), crashed=True) from None

    def _ended(self) -> str:
        self._process.join(timeout=5)
        code = self._process.exitcode
        if code is not None and code < 0:
            return f"crashed (signal {signal.Signals(-code).name})"
        return f"its process ended (exit status {code})"

    def close(self) -> None:
        try:
            if self._process.is_alive():
                self._conn.send(("stop",))
                self._process.join(timeout=5)
        except (BrokenPipeError, OSError):
            pass
        if self._process.is_alive():
            self._process.kill()
        self._conn.close()

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001, S110 - at interpreter shutdown the child is reaped anyway (daemon)
            pass


__all__ = ["ChildFailed", "ChildRuntime"]
