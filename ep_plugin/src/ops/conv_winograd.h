// Winograd F(2x2, 3x3) for the float channels-last convolution (conv_nhwc_op.cc): a 3x3 stride-1 convolution
// as 16 GEMMs of (tiles x Cin) by (Cin x Cout), 2.25x fewer multiply-adds than the direct GEMM. The layout
// rewrite's `winograd` choice (rewrites/winograd.cc) decides which convolutions run it; winograd_schedule.h
// shares the tiles out.
#pragma once

#include <vector>

#include "conv_nhwc.h"
#include "winograd_schedule.h"
#include "../aligned_vector.h"

namespace optim {

// U = G g Gt of one output and input channel (g: its 3x3 weights, row-major), in T's arithmetic: u[p * 4 + q].
template <class T, class W>
void winograd_kernel_transform(const W* g, const T (&G)[4][3], T* u) {
  T gt[3][4];  // g Gt
  for (int r = 0; r < 3; ++r)
    for (int q = 0; q < 4; ++q) gt[r][q] = g[r * 3] * G[q][0] + g[r * 3 + 1] * G[q][1] + g[r * 3 + 2] * G[q][2];
  for (int p = 0; p < 4; ++p)
    for (int q = 0; q < 4; ++q) u[p * 4 + q] = G[p][0] * gt[0][q] + G[p][1] * gt[1][q] + G[p][2] * gt[2][q];
}

class WinogradF23 {
 public:
  // A 2-D 3x3 convolution with stride 1, dilation 1 and one group: what this runs.
  static bool suits(const ConvGeometry& cg);
  explicit WinogradF23(const ConvGeometry& cg);
  // weights: [Cout, Cin, 3, 3]; transformed (U = G g Gt per output and input channel) and packed as 16
  // sgemm B matrices of Cin x Cout.
  void prepare(const float* weights);

  size_t scratch_bytes(const NhwcConvLayout& l) const { return schedule_.scratch_bytes(l); }
  // y = epilogue(conv(x)); l: x's layout (NHWC, Cin channels per pixel); y: l.n * l.pixels() rows of Cout.
  void run(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y, const kernels::ConvF32Epilogue& ep,
           void* scratch) const;

 private:
  int64_t cin_ = 0, cout_ = 0;
  WinogradSchedule schedule_;
  size_t u_floats_ = 0;  // one packed position
  AlignedVector<float> u_;  // 16 packed positions
};

}  // namespace optim
