// An LSTM's or GRU's gates as data (RnnDesign), and the input and output positions ONNX gives both: what the
// op (rnn.h), its shapes (rnn_shapes.h) and its weights share.
#pragma once

#include <vector>

#include "op.h"

namespace optim {

// Input and output positions ONNX gives both ops (LSTM alone has initial_c, P and Y_c).
enum RnnInput { kRnnX = 0, kRnnW, kRnnR, kRnnB, kRnnSeqLens, kRnnInitialH, kRnnInitialC, kRnnP };
enum RnnOutput { kRnnY = 0, kRnnYh, kRnnYc };

// One op's gates, as data.
struct RnnDesign {
  int gates = 0;          // rows of W and R per hidden unit, in ONNX's order (LSTM: i o f c; GRU: z r h)
  bool has_cell = false;  // LSTM's cell state: initial_c, P, Y_c
  // Per step, phase k multiplies by R's rows of gates r_groups[k] and runs cells[k]. With two phases (GRU
  // without linear_before_reset) the first writes the reset state, which is the second's GEMM input.
  std::vector<std::vector<int>> r_groups;
  std::vector<kernels::RnnCell> cells;
  std::vector<bool> rb_in_x;  // per gate: its R bias is added once to the input projection (not per step)
  bool input_forget = false;  // LSTM
};

}  // namespace optim
