// The recurrent ops' attributes and sizes: direction, hidden_size, layout, clip; the sizes of one run checked
// against every input's shape (as ONNX Runtime checks them), the output shapes, and where each step and state
// lies in X, Y, Y_h and the initial states for both layouts.
#pragma once

#include <limits>
#include <vector>

#include "op.h"
#include "rnn_design.h"

namespace optim {

struct RnnAttrs {
  int64_t hidden = 0;
  int64_t directions = 1;
  bool reverse = false;  // one direction, run from the last step back
  int64_t layout = 0;    // 0: X [seq, batch, input]; 1: X [batch, seq, input] (opset 14)
  float clip = std::numeric_limits<float>::infinity();
};
// Throws Error for a direction other than forward, reverse or bidirectional.
RnnAttrs rnn_attrs(const Node& n);

struct RnnDims {
  int64_t seq = 0, batch = 0, input = 0, hidden = 0, dirs = 1, layout = 0;
  // Whether direction d runs backwards.
  bool reversed(int64_t d, bool reverse_attr) const { return dirs == 2 ? d == 1 : reverse_attr; }
  // Row of X (and of the input projection) holding step t of batch entry b.
  int64_t x_row(int64_t t, int64_t b) const { return layout ? b * seq + t : t * batch + b; }
  // Offset of Y's hidden vector for step t, direction d, entry b: Y is [seq, dirs, batch, hidden] or, with
  // layout 1, [batch, seq, dirs, hidden].
  int64_t y_at(int64_t t, int64_t d, int64_t b) const {
    return (layout ? (b * seq + t) * dirs + d : (t * dirs + d) * batch + b) * hidden;
  }
  // Offset of a state's vector (initial_h, initial_c, Y_h, Y_c: [dirs, batch, hidden] or [batch, dirs, hidden]).
  int64_t state_at(int64_t d, int64_t b) const { return (layout ? b * dirs + d : d * batch + b) * hidden; }
};

// The sizes of a run from the inputs' shapes (nullptr for an omitted input); throws Error naming the input whose
// shape does not fit.
RnnDims rnn_dims(const RnnAttrs& a, const RnnDesign& d, const std::vector<const Shape*>& in);

// Y, Y_h and (with a cell state) Y_c.
std::vector<Shape> rnn_output_shapes(const RnnDims& dims, const RnnDesign& d);

}  // namespace optim
