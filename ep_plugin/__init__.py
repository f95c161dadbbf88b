"""OptimEP from Python: find and register the plugin library, open sessions on it, report placement.

Runtime use needs only onnxruntime and numpy (no torch). The library registers once per process
(unregistering while a session lives crashes ORT's next run, so it never unregisters).
"""

from .loader import EP_NAME, LIBRARY_ENV, EpLoadError, library_path, register, registered_api_version
from .placement import NodePlacement, Placement, placement
from .sessions import EP_OPTIONS, OptimEPError, UnclaimedNodesError, cpu_session, session

__all__ = [
    "EP_NAME",
    "EP_OPTIONS",
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
