// RnnOp: LSTM and GRU from their RnnDesign. W, R and B are packed once when constant (ONNX's own tests feed
// them as inputs: then each run packs them into scratch). A run projects every step's input through W in one
// GEMM with the biases folded in, then walks the steps: per phase, tasks of (direction, block of batch rows,
// run of hidden-unit chunks) each multiply their rows of the state by their panels of R and run the gate math
// on their own units, so a phase is one pool dispatch and no two tasks write the same element (the split
// depends on the sizes only: results do not depend on timing). Both directions advance in the same
// dispatches. sequence_lens: an entry past its length keeps its state and gets zeros in Y; backwards it starts
// from its own last step; the Y_h and Y_c of an entry of length 0 are zeros, as ONNX Runtime gives them.
#include "rnn.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <functional>

#include "rnn_shapes.h"
#include "rnn_weights.h"
#include "sgemm_driver.h"

namespace optim {
namespace {

constexpr int64_t kChunk = kernels::kRnnChunk;
constexpr size_t kMaxPhases = 2;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string listed(const std::vector<std::string>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + "]";
}

// How one phase of a step splits into tasks: one task for everything when the step is too small to share,
// else every direction into blocks of batch rows (multiples of the GEMM's row tile) by runs of chunks. Runs of
// chunks come first: each task then reads only its own panels of R.
struct StepSplit {
  int64_t tasks = 1;
  int64_t row_step = 0, row_blocks = 1, chunk_step = 0, chunk_runs = 1;
};

StepSplit split_step(const RnnDims& r, size_t group_gates, int64_t row_tile) {
  StepSplit sp;
  const int64_t chunks = ceil_div(r.hidden, kChunk);
  sp.row_step = r.batch;
  sp.chunk_step = chunks;
  const double macs = static_cast<double>(r.dirs) * static_cast<double>(r.batch) * static_cast<double>(r.hidden) *
                      static_cast<double>(chunks * static_cast<int64_t>(group_gates) * kChunk);
  const int64_t want = static_cast<int64_t>(std::min(64.0, macs / static_cast<double>(kMacsPerTask)));
  if (want < 2 || r.batch == 0) return sp;
  const int64_t per_dir = ceil_div(want, r.dirs);
  sp.chunk_step = ceil_div(chunks, std::min(chunks, per_dir));
  sp.chunk_runs = ceil_div(chunks, sp.chunk_step);
  const int64_t tiles = ceil_div(r.batch, row_tile);
  const int64_t blocks = std::min(tiles, ceil_div(per_dir, sp.chunk_runs));
  sp.row_step = ceil_div(tiles, blocks) * row_tile;
  sp.row_blocks = ceil_div(r.batch, sp.row_step);
  sp.tasks = r.dirs * sp.row_blocks * sp.chunk_runs;
  return sp;
}

class RnnOp : public Op {
 public:
  RnnOp(const Node& n, const Graph& g, RnnDesign design);

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return rnn_output_shapes(rnn_dims(attrs_, d_, in), d_);
  }
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const bool bias = in.size() > kRnnB && in[kRnnB];
    return static_cast<size_t>(buffers(rnn_dims(attrs_, d_, in), bias).total) * sizeof(float);
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override;

 private:
  // Where a run keeps its data: float offsets into the op's scratch (-1: not needed), each region on a 64-byte line.
  struct Buffers {
    int64_t w = -1, xb = -1, xw = -1, h = -1, c = -1, rh = -1, total = 0;
    int64_t r[kMaxPhases] = {-1, -1}, rb[kMaxPhases] = {-1, -1}, rbuf[kMaxPhases] = {-1, -1};
  };
  // One direction's operands for a run.
  struct Dir {
    int64_t index = 0;
    bool reversed = false;
    const float* w = nullptr;
    const float* xb = nullptr;
    const float* r[kMaxPhases] = {};
    const float* rb[kMaxPhases] = {};
    const float* p = nullptr;  // peepholes i, o, f
    float* xw = nullptr;       // input projection: a row per row of X
    float* rbuf[kMaxPhases] = {};  // a phase's recurrent projection: a row per batch entry
    float* h = nullptr;        // two states [batch, hidden]: step s reads h[s % 2], writes the other
    float* c = nullptr;
    float* rh = nullptr;       // GRU's reset state
  };

  size_t phases() const { return d_.cells.size(); }
  int64_t gate_cols(size_t gates) const { return rnn_gate_columns(attrs_.hidden, gates); }
  bool has_rbias(size_t k) const {
    for (int g : d_.r_groups[k])
      if (!d_.rb_in_x[static_cast<size_t>(g)]) return true;
    return false;
  }
  std::vector<int> all_gates() const {
    std::vector<int> v(static_cast<size_t>(d_.gates));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<int>(i);
    return v;
  }
  Buffers buffers(const RnnDims& r, bool bias_input) const;
  void pack_w(const float* w, int64_t input, float* dst) const;
  void pack_r(size_t k, const float* r, float* dst) const;
  void make_biases(const float* b, float* xb, float* const rb[kMaxPhases]) const;
  std::vector<Dir> directions(const RnnDims& r, const std::vector<TensorRef>& in, float* scratch) const;
  std::vector<int64_t> lengths(const RnnDims& r, const std::vector<TensorRef>& in) const;
  void step_task(const RunContext& rc, const RnnDims& r, const Dir& dv, const std::vector<int64_t>& lens, size_t k,
                 int64_t s, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* y) const;

  RnnDesign d_;
  RnnAttrs attrs_;
  bool w_ready_ = false, r_ready_ = false, b_ready_ = false;  // packed at creation (constants)
  std::vector<float> w_packed_, x_bias_;
  std::vector<float> r_packed_[kMaxPhases], r_bias_[kMaxPhases];
};

RnnOp::RnnOp(const Node& n, const Graph& g, RnnDesign design) : d_(std::move(design)), attrs_(rnn_attrs(n)) {
  if (d_.cells.empty() || d_.cells.size() > kMaxPhases || d_.r_groups.size() != d_.cells.size())
    throw Error("inconsistent recurrent op description");
  const int64_t hidden = attrs_.hidden, dirs = attrs_.directions, rows = d_.gates * hidden;
  // Constants of the expected shape are packed now; any other shape is left to the run, which reports it.
  const Tensor* w = g.constant(n.inputs[kRnnW]);
  if (w && w->shape.size() == 3 && w->shape[0] == dirs && w->shape[1] == rows) {
    w_packed_.resize(rnn_packed_floats(w->shape[2], hidden, static_cast<size_t>(d_.gates)) * static_cast<size_t>(dirs));
    pack_w(w->data<float>(), w->shape[2], w_packed_.data());
    w_ready_ = true;
  }
  const Tensor* r = g.constant(n.inputs[kRnnR]);
  if (r && r->shape == Shape{dirs, rows, hidden}) {
    for (size_t k = 0; k < phases(); ++k) {
      r_packed_[k].resize(rnn_packed_floats(hidden, hidden, d_.r_groups[k].size()) * static_cast<size_t>(dirs));
      pack_r(k, r->data<float>(), r_packed_[k].data());
    }
    r_ready_ = true;
  }
  const Tensor* b = n.has_input(kRnnB) ? g.constant(n.inputs[kRnnB]) : nullptr;
  if (b && b->shape == Shape{dirs, 2 * rows}) {
    x_bias_.resize(static_cast<size_t>(dirs * gate_cols(static_cast<size_t>(d_.gates))));
    float* rb[kMaxPhases] = {};
    for (size_t k = 0; k < phases(); ++k) {
      if (!has_rbias(k)) continue;
      r_bias_[k].resize(static_cast<size_t>(dirs * gate_cols(d_.r_groups[k].size())));
      rb[k] = r_bias_[k].data();
    }
    make_biases(b->data<float>(), x_bias_.data(), rb);
    b_ready_ = true;
  }
}

void RnnOp::pack_w(const float* w, int64_t input, float* dst) const {
  const std::vector<int> gates = all_gates();
  const size_t per = rnn_packed_floats(input, attrs_.hidden, gates.size());
  for (int64_t d = 0; d < attrs_.directions; ++d)
    rnn_pack_gates(w + d * d_.gates * attrs_.hidden * input, input, attrs_.hidden, gates, dst + static_cast<size_t>(d) * per);
}

void RnnOp::pack_r(size_t k, const float* r, float* dst) const {
  const int64_t hidden = attrs_.hidden;
  const size_t per = rnn_packed_floats(hidden, hidden, d_.r_groups[k].size());
  for (int64_t d = 0; d < attrs_.directions; ++d)
    rnn_pack_gates(r + d * d_.gates * hidden * hidden, hidden, hidden, d_.r_groups[k], dst + static_cast<size_t>(d) * per);
}

void RnnOp::make_biases(const float* b, float* xb, float* const rb[kMaxPhases]) const {
  const int64_t hidden = attrs_.hidden;
  const size_t gates = static_cast<size_t>(d_.gates);
  std::vector<bool> r_apart(gates);
  for (size_t g = 0; g < gates; ++g) r_apart[g] = !d_.rb_in_x[g];
  for (int64_t d = 0; d < attrs_.directions; ++d) {
    const float* bd = b + d * 2 * d_.gates * hidden;
    const int64_t xc = gate_cols(gates);
    rnn_gate_bias(bd, hidden, gates, all_gates(), true, d_.rb_in_x, xb + d * xc);
    for (size_t k = 0; k < phases(); ++k) {
      if (!rb[k]) continue;
      const int64_t rc = gate_cols(d_.r_groups[k].size());
      rnn_gate_bias(bd, hidden, gates, d_.r_groups[k], false, r_apart, rb[k] + d * rc);
    }
  }
}

RnnOp::Buffers RnnOp::buffers(const RnnDims& r, bool bias_input) const {
  // Sizes from fuzzed shapes (a huge batch of empty inputs) must not overflow: refuse beyond 2^52 floats.
  const double largest = static_cast<double>(r.dirs) * static_cast<double>(r.seq) * static_cast<double>(r.batch) *
                         static_cast<double>(gate_cols(static_cast<size_t>(d_.gates)));
  if (largest > 4.5e15) throw Error("the input projection of " + std::to_string(r.seq) + " steps x " + std::to_string(r.batch) + " entries is too large");
  Buffers b;
  auto take = [&](int64_t floats) {
    const int64_t at = b.total;
    b.total += (floats + 15) / 16 * 16;
    return at;
  };
  const size_t gates = static_cast<size_t>(d_.gates);
  if (!w_ready_) b.w = take(r.dirs * static_cast<int64_t>(rnn_packed_floats(r.input, r.hidden, gates)));
  for (size_t k = 0; k < phases(); ++k) {
    const size_t gk = d_.r_groups[k].size();
    if (!r_ready_) b.r[k] = take(r.dirs * static_cast<int64_t>(rnn_packed_floats(r.hidden, r.hidden, gk)));
    if (bias_input && !b_ready_ && has_rbias(k)) b.rb[k] = take(r.dirs * gate_cols(gk));
    b.rbuf[k] = take(r.dirs * r.batch * gate_cols(gk));
  }
  if (bias_input && !b_ready_) b.xb = take(r.dirs * gate_cols(gates));
  b.xw = take(r.dirs * r.seq * r.batch * gate_cols(gates));
  b.h = take(r.dirs * 2 * r.batch * r.hidden);
  if (d_.has_cell) b.c = take(r.dirs * r.batch * r.hidden);
  if (phases() > 1) b.rh = take(r.dirs * r.batch * r.hidden);
  return b;
}

std::vector<RnnOp::Dir> RnnOp::directions(const RnnDims& r, const std::vector<TensorRef>& in, float* scratch) const {
  auto input = [&](size_t i) { return i < in.size() && in[i].present() ? in[i].as<float>() : nullptr; };
  const bool bias_input = input(kRnnB) != nullptr;
  const Buffers b = buffers(r, bias_input);
  auto at = [&](int64_t offset) { return offset < 0 ? nullptr : scratch + offset; };
  // What is not packed yet is packed for this run, every direction at once.
  if (!w_ready_) pack_w(input(kRnnW), r.input, at(b.w));
  for (size_t k = 0; k < phases() && !r_ready_; ++k) pack_r(k, input(kRnnR), at(b.r[k]));
  if (bias_input && !b_ready_) {
    float* rb[kMaxPhases] = {at(b.rb[0]), at(b.rb[1])};
    make_biases(input(kRnnB), at(b.xb), rb);
  }
  const size_t gates = static_cast<size_t>(d_.gates);
  const int64_t state = r.batch * r.hidden;
  std::vector<Dir> dirs(static_cast<size_t>(r.dirs));
  for (int64_t d = 0; d < r.dirs; ++d) {
    Dir& v = dirs[static_cast<size_t>(d)];
    v.index = d;
    v.reversed = r.reversed(d, attrs_.reverse);
    const int64_t w_floats = static_cast<int64_t>(rnn_packed_floats(r.input, r.hidden, gates));
    v.w = (w_ready_ ? w_packed_.data() : at(b.w)) + d * w_floats;
    const int64_t xc = gate_cols(gates);
    if (bias_input) v.xb = (b_ready_ ? x_bias_.data() : at(b.xb)) + d * xc;
    for (size_t k = 0; k < phases(); ++k) {
      const size_t gk = d_.r_groups[k].size();
      v.r[k] = (r_ready_ ? r_packed_[k].data() : at(b.r[k])) + d * static_cast<int64_t>(rnn_packed_floats(r.hidden, r.hidden, gk));
      if (bias_input && has_rbias(k)) v.rb[k] = (b_ready_ ? r_bias_[k].data() : at(b.rb[k])) + d * gate_cols(gk);
      v.rbuf[k] = at(b.rbuf[k]) + d * r.batch * gate_cols(gk);
    }
    if (d_.has_cell && input(kRnnP)) v.p = input(kRnnP) + d * 3 * r.hidden;
    v.xw = at(b.xw) + d * r.seq * r.batch * xc;
    v.h = at(b.h) + d * 2 * state;
    if (d_.has_cell) v.c = at(b.c) + d * state;
    if (phases() > 1) v.rh = at(b.rh) + d * state;
  }
  return dirs;
}

std::vector<int64_t> RnnOp::lengths(const RnnDims& r, const std::vector<TensorRef>& in) const {
  std::vector<int64_t> lens(static_cast<size_t>(r.batch), r.seq);
  if (in.size() <= kRnnSeqLens || !in[kRnnSeqLens].present()) return lens;
  const TensorRef& t = in[kRnnSeqLens];
  if (t.dtype != DType::kInt32) throw Error(std::string("sequence_lens is ") + dtype_name(t.dtype) + ", not int32");
  for (int64_t b = 0; b < r.batch; ++b) {
    const int64_t v = t.as<int32_t>()[b];
    if (v < 0 || v > r.seq)
      throw Error("sequence_lens[" + std::to_string(b) + "] is " + std::to_string(v) + ", outside [0, seq_length " +
                  std::to_string(r.seq) + "]", ORT_INVALID_ARGUMENT);
    lens[static_cast<size_t>(b)] = v;
  }
  return lens;
}

void RnnOp::step_task(const RunContext& rc, const RnnDims& r, const Dir& dv, const std::vector<int64_t>& lens, size_t k,
                      int64_t s, int64_t r0, int64_t r1, int64_t c0, int64_t c1, float* y) const {
  const int64_t hidden = r.hidden, state = r.batch * hidden;
  const float* h_prev = dv.h + (s % 2) * state;
  float* h_next = dv.h + ((s + 1) % 2) * state;
  const bool last = k + 1 == phases();
  // This task's rows of the state (or of the reset state) by its panels of R.
  const int64_t gk = static_cast<int64_t>(d_.r_groups[k].size()), cols = gate_cols(d_.r_groups[k].size());
  kernels::SgemmEpilogue ep;
  ep.bias_col = dv.rb[k];
  rc.kernels.sgemm(r0, r1, c0 * gk, c1 * gk, cols, hidden, k == 0 ? h_prev : dv.rh, hidden, dv.r[k], dv.rbuf[k], cols, ep);
  // Then the gate math of its units, entry by entry.
  const int64_t u0 = c0 * kChunk, n = std::min(hidden, c1 * kChunk) - u0;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  float* out = last ? h_next : dv.rh;
  const int64_t g0 = static_cast<int64_t>(d_.r_groups[0].size()), x_cols = gate_cols(static_cast<size_t>(d_.gates));
  for (int64_t b = r0; b < r1; ++b) {
    const int64_t at = b * hidden + u0;
    if (s >= lens[static_cast<size_t>(b)]) {  // past its length: the state stays, Y gets zeros
      if (!last) {
        std::memset(out + at, 0, bytes);  // keeps the next GEMM's input defined
        continue;
      }
      std::memcpy(h_next + at, h_prev + at, bytes);
      if (y) std::memset(y + r.y_at(s, dv.index, b) + u0, 0, bytes);
      continue;
    }
    const int64_t t = dv.reversed ? lens[static_cast<size_t>(b)] - 1 - s : s;
    kernels::RnnCellArgs a;
    a.n = n;
    a.x = dv.xw + r.x_row(t, b) * x_cols + c0 * d_.gates * kChunk;
    a.x_stride = d_.gates * kChunk;
    a.hr = dv.rbuf[0] + b * gate_cols(static_cast<size_t>(g0)) + c0 * g0 * kChunk;
    a.hr_stride = g0 * kChunk;
    if (phases() > 1) a.hh = dv.rbuf[1] + b * gate_cols(1) + u0;  // one gate per chunk: plain unit order
    if (dv.p) {
      a.p_i = dv.p + u0;
      a.p_o = dv.p + hidden + u0;
      a.p_f = dv.p + 2 * hidden + u0;
    }
    a.h_prev = h_prev + at;
    if (dv.c) a.c = dv.c + at;
    a.h = out + at;
    a.clip = attrs_.clip;
    a.input_forget = d_.input_forget;
    rc.kernels.rnn_cell(d_.cells[k], a);
    if (last && y) std::memcpy(y + r.y_at(t, dv.index, b) + u0, out + at, bytes);
  }
}

void RnnOp::run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const {
  std::vector<const Shape*> shapes;
  for (const TensorRef& t : in) shapes.push_back(t.shape);
  const RnnDims r = rnn_dims(attrs_, d_, shapes);
  auto input = [&](size_t i) { return i < in.size() && in[i].present() ? in[i].as<float>() : nullptr; };
  auto output = [&](size_t i) { return i < out.size() && out[i].shape ? out[i].as<float>() : nullptr; };
  const std::vector<int64_t> lens = lengths(r, in);
  const std::vector<Dir> dirs = directions(r, in, static_cast<float*>(rc.scratch()));
  const int64_t hidden = r.hidden, state = r.batch * hidden, rows = r.seq * r.batch;
  const size_t bytes = static_cast<size_t>(hidden) * sizeof(float);
  const int64_t x_cols = gate_cols(static_cast<size_t>(d_.gates));
  for (const Dir& dv : dirs) {
    // Every step's input projection at once (biases in the epilogue); an empty input leaves the biases alone.
    if (r.input > 0) {
      kernels::SgemmEpilogue ep;
      ep.bias_col = dv.xb;
      run_sgemm(rc, rows, x_cols, r.input, input(kRnnX), r.input, dv.w, dv.xw, x_cols, ep);
    } else {
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < x_cols; ++j) dv.xw[i * x_cols + j] = dv.xb ? dv.xb[j] : 0.f;
    }
    for (int64_t b = 0; b < r.batch; ++b) {
      const float* h0 = input(kRnnInitialH);
      const float* c0 = input(kRnnInitialC);
      if (h0) std::memcpy(dv.h + b * hidden, h0 + r.state_at(dv.index, b), bytes);
      else std::memset(dv.h + b * hidden, 0, bytes);
      if (dv.c && c0) std::memcpy(dv.c + b * hidden, c0 + r.state_at(dv.index, b), bytes);
      else if (dv.c) std::memset(dv.c + b * hidden, 0, bytes);
    }
  }

  float* y = output(kRnnY);
  const int64_t steps = lens.empty() ? 0 : *std::max_element(lens.begin(), lens.end());
  const int64_t chunks = ceil_div(hidden, kChunk);
  // One split per phase, and one task function per phase whose step `s` moves under it.
  int64_t s = 0;
  std::vector<StepSplit> splits;
  std::vector<std::function<void(size_t)>> tasks;
  for (size_t k = 0; k < phases(); ++k) {
    splits.push_back(split_step(r, d_.r_groups[k].size(), std::max<int64_t>(1, rc.kernels.sgemm.traits.mr)));
    tasks.emplace_back([&, k](size_t i) {
      const StepSplit& sp = splits[k];
      if (sp.tasks == 1) {
        for (const Dir& dv : dirs) step_task(rc, r, dv, lens, k, s, 0, r.batch, 0, chunks, y);
        return;
      }
      const int64_t t = static_cast<int64_t>(i), cr = t % sp.chunk_runs, rb = t / sp.chunk_runs % sp.row_blocks;
      const Dir& dv = dirs[static_cast<size_t>(t / sp.chunk_runs / sp.row_blocks)];
      const int64_t r0 = rb * sp.row_step, c0 = cr * sp.chunk_step;
      step_task(rc, r, dv, lens, k, s, r0, std::min(r.batch, r0 + sp.row_step), c0, std::min(chunks, c0 + sp.chunk_step), y);
    });
  }
  for (; s < steps; ++s)
    for (size_t k = 0; k < phases(); ++k) rc.parallel_for(static_cast<size_t>(splits[k].tasks), tasks[k]);

  for (const Dir& dv : dirs) {
    for (int64_t t = steps; t < r.seq && y; ++t)  // steps no entry reaches
      for (int64_t b = 0; b < r.batch; ++b) std::memset(y + r.y_at(t, dv.index, b), 0, bytes);
    const float* h_last = dv.h + (steps % 2) * state;
    float* yh = output(kRnnYh);
    float* yc = d_.has_cell ? output(kRnnYc) : nullptr;
    for (int64_t b = 0; b < r.batch; ++b) {
      const bool empty = lens[static_cast<size_t>(b)] == 0;
      const int64_t at = r.state_at(dv.index, b);
      if (yh && empty) std::memset(yh + at, 0, bytes);
      else if (yh) std::memcpy(yh + at, h_last + b * hidden, bytes);
      if (yc && empty) std::memset(yc + at, 0, bytes);
      else if (yc) std::memcpy(yc + at, dv.c + b * hidden, bytes);
    }
  }
}

}  // namespace

std::string check_rnn(const Node& n, const Graph& g, const std::vector<std::string>& activations) {
  for (size_t i : {kRnnX, kRnnW, kRnnR, kRnnB, kRnnInitialH, kRnnInitialC, kRnnP})
    if (std::string r = require_float(g, n, i); !r.empty()) return r;
  if (n.has_input(kRnnSeqLens)) {
    const ValueInfo* v = g.value(n.inputs[kRnnSeqLens]);
    if (v && v->dtype != DType::kInt32 && v->dtype != DType::kUndefined)
      return std::string("sequence_lens is ") + dtype_name(v->dtype) + " (ONNX defines it as int32)";
  }
  RnnAttrs a;
  try {
    a = rnn_attrs(n);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (a.hidden <= 0) return "hidden_size is missing or not positive";
  if (a.layout != 0 && a.layout != 1) return "layout " + std::to_string(a.layout) + " is neither 0 nor 1";
  if (!(a.clip > 0.f)) return "clip must be positive";
  if (n.has_attr("activations")) {
    std::vector<std::string> want;
    for (int64_t d = 0; d < a.directions; ++d) want.insert(want.end(), activations.begin(), activations.end());
    const std::vector<std::string> got = n.attr_strings("activations");
    if (got.empty()) return "its activations attribute could not be read";
    bool same = got.size() == want.size();
    for (size_t i = 0; same && i < got.size(); ++i) same = lower(got[i]) == lower(want[i]);
    if (!same) return "activations " + listed(got) + " are not implemented (OptimEP runs " + listed(want) + ")";
  }
  return "";
}

std::unique_ptr<Op> make_rnn_op(const Node& n, const Graph& g, RnnDesign design) {
  return std::make_unique<RnnOp>(n, g, std::move(design));
}

}  // namespace optim
