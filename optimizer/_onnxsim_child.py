"""Runs onnxsim on one model file in a child process: `python _onnxsim_child.py IN OUT`.

Run as a script (not `-m`), so the child imports onnx and onnxsim only. Exit codes: 0 written,
3 onnxsim cannot be imported, 1 onnxsim failed (the reason is the last stderr line). A crash
(onnxsim is C++) ends only this process.
"""

import os
import sys

# Constant folding and shape inference only: the onnx-optimizer rewrites are what optim's own
# passes do, with reasons and proofs (and onnxsim's MatMul+Add->Gemm wraps 3-D MatMuls in
# Reshapes, which grew MiniLM from 252 to 309 nodes).
OPTIONS = {"perform_optimization": False, "check_n": 0}
INLINE_LIMIT = (1 << 31) - (64 << 20)


def main(source: str, target: str) -> int:
    if os.environ.get("OPTIM_ONNXSIM_NO_TORCH") == "1":
        # onnxsim imports torch only for optional bridges; blocking it saves a second of start-up.
        sys.modules["torch"] = None
    try:
        import onnx
        import onnxsim
    except Exception as e:  # noqa: BLE001
        print(f"onnxsim cannot be imported: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    try:
        simplified, ok = onnxsim.simplify(onnx.load(source), **OPTIONS)
    except Exception as e:  # noqa: BLE001 - onnxsim raises many types; the message is the reason
        text = str(e).strip().splitlines()
        print(f"{type(e).__name__}: {text[0] if text else ''}", file=sys.stderr)
        return 1
    if not ok:
        print("onnxsim reported that its result failed its own check", file=sys.stderr)
        return 1
    external = simplified.ByteSize() > INLINE_LIMIT
    onnx.save_model(simplified, target, save_as_external_data=external, location=os.path.basename(target) + ".data")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
