// Winograd F(2x2, 3x3) for the float channels-last convolution (conv_nhwc_op.cc): a 3x3 stride-1 convolution
// as 16 GEMMs of (tiles x Cin) by (Cin x Cout), 2.25x fewer multiply-adds than the direct GEMM. The layout
// rewrite's `winograd` choice (rewrites/winograd.cc) decides which convolutions run it.
#pragma once

#include <vector>

#include "conv_nhwc.h"

namespace optim {

class WinogradF23 {
 public:
  // A 2-D 3x3 convolution with stride 1, dilation 1 and one group: what this runs.
  static bool suits(const ConvGeometry& cg);
  explicit WinogradF23(const ConvGeometry& cg);
  // weights: [Cout, Cin, 3, 3]; transformed (U = G g Gt per output and input channel) and packed as 16
  // sgemm B matrices of Cin x Cout.
  void prepare(const float* weights);

  size_t scratch_bytes(const NhwcConvLayout& l) const;
  // y = epilogue(conv(x)); l: x's layout (NHWC, Cin channels per pixel); y: l.n * l.pixels() rows of Cout.
  void run(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y, const kernels::ConvF32Epilogue& ep,
           void* scratch) const;

 private:
  // How one call's tiles are shared out: blocks of tiles, each maybe cut into ranges of output channels.
  struct Split {
    int64_t tiles = 0, per_block = 0, blocks = 0, ranges = 1, panel_step = 1, items = 0, slots = 1;
  };
  Split split(const NhwcConvLayout& l) const;
  size_t slot_bytes(int64_t per_block) const;
  // A slot's parts (slot_bytes' layout) for `tiles` tiles, from its first byte.
  struct Slot {
    float* v;
    float* m;
    const float** px;
    int64_t* pixel;
  };
  Slot slot_at(uint8_t* base, int64_t tiles) const;
  size_t zero_row_bytes() const { return (static_cast<size_t>(cin_) * sizeof(float) + 63) / 64 * 64; }
  int64_t tiles(const NhwcConvLayout& l) const { return l.n * ((l.oh + 1) / 2) * ((l.ow + 1) / 2); }
  int64_t chunk_tiles(const NhwcConvLayout& l) const;
  // U small enough to stay in a core's L2: each block of tiles through the three steps at once.
  void run_fused(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                 const kernels::ConvF32Epilogue& ep, void* scratch) const;
  // U larger (wide channels): the tiles in chunks, each step over a whole chunk, so that U is read once a chunk.
  void run_chunked(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                   const kernels::ConvF32Epilogue& ep, void* scratch) const;

  int64_t cin_ = 0, cout_ = 0;
  bool chunked_ = false;
  size_t u_floats_ = 0;  // one packed position
  std::vector<float> u_;  // 16 packed positions
};

}  // namespace optim
