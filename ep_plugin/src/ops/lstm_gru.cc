// LSTM and GRU (opsets 7, 14 and 22 as ONNX Runtime registers them; float32) as RnnDesigns for RnnOp
// (ops/rnn.cc): their gates, what R each step's phases multiply by, and where R's bias is added. Only the
// default activations run (the check refuses other lists with the reason).
#include "rnn.h"

namespace optim {
namespace {

using kernels::RnnCell;

std::string check_lstm(const Node& n, const Graph& g) {
  if (std::string r = check_rnn(n, g, {"Sigmoid", "Tanh", "Tanh"}); !r.empty()) return r;
  const int64_t f = n.attr_i("input_forget", 0);
  return f == 0 || f == 1 ? "" : "input_forget " + std::to_string(f) + " is neither 0 nor 1";
}

std::string check_gru(const Node& n, const Graph& g) {
  if (std::string r = check_rnn(n, g, {"Sigmoid", "Tanh"}); !r.empty()) return r;
  const int64_t l = n.attr_i("linear_before_reset", 0);
  return l == 0 || l == 1 ? "" : "linear_before_reset " + std::to_string(l) + " is neither 0 nor 1";
}

std::unique_ptr<Op> create_lstm(const Node& n, const Graph& g) {
  RnnDesign d;
  d.gates = 4;  // i o f c
  d.has_cell = true;
  d.r_groups = {{0, 1, 2, 3}};  // one GEMM by all of R per step
  d.cells = {RnnCell::kLstm};
  d.rb_in_x = {true, true, true, true};  // every gate adds x W^T + h R^T + Wb + Rb
  d.input_forget = n.attr_i("input_forget", 0) == 1;
  return make_rnn_op(n, g, std::move(d));
}

std::unique_ptr<Op> create_gru(const Node& n, const Graph& g) {
  RnnDesign d;
  d.gates = 3;  // z r h
  if (n.attr_i("linear_before_reset", 0) == 1) {
    // h~ = tanh(x Wh^T + Wbh + r (h_prev Rh^T + Rbh)): Rbh stays with the recurrent part, one GEMM per step.
    d.r_groups = {{0, 1, 2}};
    d.cells = {RnnCell::kGruLinear};
    d.rb_in_x = {true, true, false};
  } else {
    // h~ = tanh(x Wh^T + (r h_prev) Rh^T + Rbh + Wbh): z and r first, then Rh multiplies the reset state.
    d.r_groups = {{0, 1}, {2}};
    d.cells = {RnnCell::kGruReset, RnnCell::kGruUpdate};
    d.rb_in_x = {true, true, true};
  }
  return make_rnn_op(n, g, std::move(d));
}

}  // namespace

std::vector<OpDef> rnn_op_defs() {
  return {
      {"LSTM", 7, 22, check_lstm, create_lstm},
      {"GRU", 7, 22, check_gru, create_gru},
  };
}

}  // namespace optim
