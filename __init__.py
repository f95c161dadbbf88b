"""optim: PyTorch to fast int8 ONNX, run through optim's own ONNX Runtime execution provider.

    import optim
    sess = optim.session("model.onnx")        # OptimEP, with ORT's CPU EP for what it leaves
    print(optim.placement(sess).summary())     # which EP runs each node, and why

Export (optim.exporter) needs torch; running models needs only onnxruntime and numpy.
"""

# Absolute: pytest imports this file from the checkout, under the folder's name, when it
# collects tests (a relative import fails there for names such as optim-main).
from optim.ep_plugin import EP_NAME, library_path, placement, register, session

__version__ = "0.1.0"

__all__ = ["EP_NAME", "__version__", "library_path", "placement", "register", "session"]
