// What LSTM and GRU share (their definitions: ops/lstm_gru.cc): ONNX's attributes, inputs and outputs, the
// claim-time checks, and the op that runs either from a description of its gates: weights packed once in
// gate-chunked columns (rnn_weights.h), the input projection of every step as one GEMM, then per step a small
// GEMM by R and the gate math (kernels::RnnCell), directions in lockstep.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "op.h"
#include "rnn_design.h"

namespace optim {

// "" when the node's common attributes and input types are what RnnOp runs, else the reason.
// `activations` is one direction's default list, the only one OptimEP runs.
std::string check_rnn(const Node& n, const Graph& g, const std::vector<std::string>& activations);

std::unique_ptr<Op> make_rnn_op(const Node& n, const Graph& g, RnnDesign design);

}  // namespace optim
