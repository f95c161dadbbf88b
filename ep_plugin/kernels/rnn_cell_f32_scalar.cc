// Scalar reference recurrent cells (kernel_table.h, RnnCellFn): rnn_cell_body.h one unit at a time, sigmoid
// and tanh as the scalar element-wise reference computes them; fmadd is a multiply then an add.
#include "rnn_cell_body.h"

namespace optim::kernels {
namespace {

struct Scalar {
  using F = float;
  static constexpr int64_t kWidth = 1;
  struct Lanes {
    explicit Lanes(int64_t) {}
    float load(const float* p) const { return *p; }
    void store(float* p, float v) const { *p = v; }
  };
  static float load(const float* p) { return *p; }
  static float set1(float v) { return v; }
  static float fmadd(float a, float b, float c) { return a * b + c; }
  static float clip(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }  // NaN stays
  static float sigmoid(float v) { return unary_one(UnaryOp::kSigmoid, v); }
  static float tanh(float v) { return unary_one(UnaryOp::kTanh, v); }
};

}  // namespace

void rnn_cell_f32_scalar(RnnCell cell, const RnnCellArgs& a) { rnn_cell_kernel<Scalar>(cell, a); }

}  // namespace optim::kernels
