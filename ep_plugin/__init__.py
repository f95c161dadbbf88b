"""OptimEP from Python: find and register the plugin library, open sessions on it, report placement.

This package is the runtime, what embedding applications import, and needs only onnxruntime and numpy
(no torch, no matplotlib): loader, sessions, placement, and the small utilities the other stages share
(inputs: random or .npz inputs checked against a session; timing: alternating timed runs; ort_errors).
The tools behind the `optim` verbs (run, bench, profile, doctor) live in optim.ep_plugin.tools, above it.
The library registers once per process (unregistering while a session lives crashes ORT's next run, so it
never unregisters).
"""

from .loader import EP_NAME, LIBRARY_ENV, EpLoadError, library_path, register, registered_api_version
from .placement import NodePlacement, Placement, placement
from .sessions import EP_OPTIONS, ISAS, PRECISIONS, OptimEPError, UnclaimedNodesError, cpu_session, session

__all__ = [
    "EP_NAME",
    "EP_OPTIONS",
    "ISAS",
    "PRECISIONS",
    "LIBRARY_ENV",
    "EpLoadError",
    "NodePlacement",
    "Placement",
    "OptimEPError",
    "UnclaimedNodesError",
    "cpu_session",
    "library_path",
    "placement",
    "register",
    "registered_api_version",
    "session",
]
