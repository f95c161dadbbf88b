#include "rnn_shapes.h"

namespace optim {
namespace {

const Shape* input_shape(const std::vector<const Shape*>& in, size_t i) { return i < in.size() ? in[i] : nullptr; }

// Throws when input `name`'s shape is not `want`; `meaning` names the dimensions.
void expect_shape(const Shape* s, const Shape& want, const char* name, const std::string& meaning) {
  if (s && *s != want)
    throw Error(std::string("input ") + name + " has shape " + shape_str(*s) + ", expected " + shape_str(want) + " " + meaning);
}

}  // namespace

RnnAttrs rnn_attrs(const Node& n) {
  RnnAttrs a;
  a.hidden = n.attr_i("hidden_size", 0);
  const std::string dir = n.attr_s("direction", "forward");
  if (dir == "bidirectional") {
    a.directions = 2;
  } else if (dir == "reverse") {
    a.reverse = true;
  } else if (dir != "forward") {
    throw Error("direction '" + dir + "' is not forward, reverse or bidirectional");
  }
  a.layout = n.attr_i("layout", 0);
  if (n.has_attr("clip")) a.clip = n.attr_f("clip", a.clip);
  return a;
}

RnnDims rnn_dims(const RnnAttrs& a, const RnnDesign& d, const std::vector<const Shape*>& in) {
  const Shape* x = input_shape(in, kRnnX);
  if (!x || x->size() != 3)
    throw Error("input X has shape " + (x ? shape_str(*x) : std::string("(none)")) + ", expected rank 3 " +
                (a.layout ? "[batch_size, seq_length, input_size]" : "[seq_length, batch_size, input_size]"));
  RnnDims r;
  r.layout = a.layout;
  r.seq = (*x)[a.layout ? 1 : 0];
  r.batch = (*x)[a.layout ? 0 : 1];
  r.input = (*x)[2];
  r.hidden = a.hidden;
  r.dirs = a.directions;
  const int64_t rows = d.gates * r.hidden;
  const std::string g = std::to_string(d.gates);
  expect_shape(input_shape(in, kRnnW), {r.dirs, rows, r.input}, "W", "[num_directions, " + g + " * hidden_size, input_size]");
  expect_shape(input_shape(in, kRnnR), {r.dirs, rows, r.hidden}, "R", "[num_directions, " + g + " * hidden_size, hidden_size]");
  if (!input_shape(in, kRnnW) || !input_shape(in, kRnnR)) throw Error("inputs W and R are required");
  expect_shape(input_shape(in, kRnnB), {r.dirs, 2 * rows}, "B", "[num_directions, " + std::to_string(2 * d.gates) + " * hidden_size]");
  expect_shape(input_shape(in, kRnnSeqLens), {r.batch}, "sequence_lens", "[batch_size]");
  const Shape state = a.layout ? Shape{r.batch, r.dirs, r.hidden} : Shape{r.dirs, r.batch, r.hidden};
  const char* state_dims = a.layout ? "[batch_size, num_directions, hidden_size]" : "[num_directions, batch_size, hidden_size]";
  expect_shape(input_shape(in, kRnnInitialH), state, "initial_h", state_dims);
  if (d.has_cell) {
    expect_shape(input_shape(in, kRnnInitialC), state, "initial_c", state_dims);
    expect_shape(input_shape(in, kRnnP), {r.dirs, 3 * r.hidden}, "P", "[num_directions, 3 * hidden_size]");
  }
  return r;
}

std::vector<Shape> rnn_output_shapes(const RnnDims& r, const RnnDesign& d) {
  const Shape y = r.layout ? Shape{r.batch, r.seq, r.dirs, r.hidden} : Shape{r.seq, r.dirs, r.batch, r.hidden};
  const Shape state = r.layout ? Shape{r.batch, r.dirs, r.hidden} : Shape{r.dirs, r.batch, r.hidden};
  std::vector<Shape> out{y, state};
  if (d.has_cell) out.push_back(state);
  return out;
}

}  // namespace optim
