"""Running the app (routes.py) with uvicorn: in the foreground (`optim serve`), or in a background thread of this
process (tests, benchmarks, applications embedding the server).

Shutdown is graceful: uvicorn stops accepting connections, lets in-flight requests finish (up to
`graceful_s`), then the app's lifespan end runs what the batchers still hold.
"""

from __future__ import annotations

import signal
import threading

import uvicorn

GRACEFUL_S = 30.0  # how long a shutdown waits for in-flight requests


def _config(app, host: str, port: int, log_level: str, graceful_s: float) -> uvicorn.Config:
    # One event loop, HTTP/1.1 with keep-alive: the clients (tritonclient) reuse their connections.
    return uvicorn.Config(app, host=host, port=port, log_level=log_level, timeout_graceful_shutdown=graceful_s,
                          access_log=False, lifespan="on")


class _Stopped(Exception):
    pass


def _stop(_signum, _frame) -> None:
    raise _Stopped


def serve_forever(app, host: str = "127.0.0.1", port: int = 8000, log_level: str = "info",
                  graceful_s: float = GRACEFUL_S) -> None:
    """Serves `app` until SIGINT/SIGTERM, then shuts down gracefully and returns. Call from the main thread."""
    # uvicorn handles the signal (graceful shutdown), then raises it again for the handler it found installed:
    # this one makes that a normal return instead of KeyboardInterrupt or death by SIGTERM.
    previous = {sig: signal.signal(sig, _stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        uvicorn.Server(_config(app, host, port, log_level, graceful_s)).run()
    except _Stopped:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class BackgroundServer:
    """`app` served by uvicorn in a daemon thread; port 0 picks a free port. Use as a context manager (or
    start()/stop()): `url` ("127.0.0.1:PORT", as tritonclient takes it) is set once it listens."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, log_level: str = "warning",
                 graceful_s: float = GRACEFUL_S):
        self.server = uvicorn.Server(_config(app, host, port, log_level, graceful_s))
        # uvicorn installs signal handlers only from the main thread: this one leaves them to the host.
        self._thread = threading.Thread(target=self.server.run, name="optim-serve", daemon=True)
        self.url = ""

    def start(self, timeout_s: float = 30.0) -> BackgroundServer:
        self._thread.start()
        waited = 0.0
        while not self.server.started:
            if not self._thread.is_alive():
                raise RuntimeError("the server stopped while starting (see its log)")
            if waited >= timeout_s:
                raise RuntimeError(f"the server did not start within {timeout_s:g} s")
            self._thread.join(0.02)
            waited += 0.02
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"{host}:{port}"
        return self

    def stop(self, timeout_s: float = 60.0) -> None:
        """Graceful shutdown (in-flight requests finish), then waits for the thread."""
        self.server.should_exit = True
        self._thread.join(timeout_s)

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *_exc) -> None:
        self.stop()
