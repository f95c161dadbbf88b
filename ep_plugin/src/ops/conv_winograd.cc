// Winograd F(2x2, 3x3) (conv_winograd.h): the input transform (kernels' winograd_input_f32, zeros for padding),
// 16 GEMMs (the sgemm kernels on U packed at compile time) and the output transform with the convolution's
// epilogue (winograd_output_f32), shared out by winograd_schedule.h.
#include "conv_winograd.h"

#include <algorithm>

#include "sgemm_driver.h"

namespace optim {

WinogradF23::WinogradF23(const ConvGeometry& cg)
    : cin_(cg.cin_g), cout_(cg.cout), schedule_(cg.cin_g, cg.cin_g, cg.cout, sizeof(float), sizeof(float)) {}

bool WinogradF23::suits(const ConvGeometry& cg) {
  return cg.spatial == 2 && cg.group == 1 && cg.wshape[2] == 3 && cg.wshape[3] == 3 && cg.win.strides[0] == 1 &&
         cg.win.strides[1] == 1 && cg.win.dilations[0] == 1 && cg.win.dilations[1] == 1;
}

void WinogradF23::prepare(const float* weights) {
  // U = G g Gt, G = [1 0 0; 1/2 1/2 1/2; 1/2 -1/2 1/2; 0 0 1]: summed in double, rounded to float once.
  static const double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  std::vector<float> b(static_cast<size_t>(16 * cin_ * cout_));  // per position: Cin x Cout
  for (int64_t o = 0; o < cout_; ++o)
    for (int64_t i = 0; i < cin_; ++i) {
      double u[16];
      winograd_kernel_transform(weights + (o * cin_ + i) * 9, G, u);
      for (int64_t pos = 0; pos < 16; ++pos) b[static_cast<size_t>((pos * cin_ + i) * cout_ + o)] = static_cast<float>(u[pos]);
    }
  u_floats_ = kernels::sgemm_packed_b_floats(cin_, cout_);
  u_.resize(16 * u_floats_);
  for (int64_t pos = 0; pos < 16; ++pos)
    kernels::sgemm_pack_b(b.data() + pos * cin_ * cout_, cout_, false, cin_, cout_, u_.data() + pos * u_floats_);
}

namespace {

// The float steps for WinogradSchedule.
struct FloatSteps {
  using In = float;
  using VElem = float;
  using MElem = float;
  int64_t cin, cout;
  const float* u;
  size_t u_floats;
  float* y;
  const kernels::ConvF32Epilogue& ep;

  void pad_row(float* row, int64_t n) const { std::fill(row, row + n, 0.f); }
  static int64_t gemm_rows_multiple(const RunContext& rc) { return rc.kernels.sgemm.traits.mr; }
  void input(const RunContext& rc, const float* const* px, int64_t nt, float* v, int64_t ld_pos) const {
    rc.kernels.winograd_input_f32(px, nt, cin, v, ld_pos, cin);
  }
  // Rows [m0, m1) of position pos (v and m: its V and M) by panels [p0, p1) of its U.
  void gemm(const RunContext& rc, int64_t pos, int64_t m0, int64_t m1, int64_t, int64_t p0, int64_t p1, const float* v,
            float* m) const {
    rc.kernels.sgemm(m0, m1, p0, p1, cout, cin, v, cin, u + pos * u_floats, m, cout, kernels::SgemmEpilogue{});
  }
  void output(const RunContext& rc, const NhwcConvLayout&, const float* m, int64_t ld_pos, int64_t, int64_t nt,
              const int64_t* pixel, int64_t j0, int64_t cols) const {
    rc.kernels.winograd_output_f32(m + j0, ld_pos, cout, nt, cols, pixel, y, cout, j0, ep);
  }
};

}  // namespace

void WinogradF23::run(const RunContext& rc, const NhwcConvLayout& l, const float* x, float* y,
                      const kernels::ConvF32Epilogue& ep, void* scratch) const {
  schedule_.run(rc, l, x, scratch, FloatSteps{cin_, cout_, u_.data(), u_floats_, y, ep});
}

}  // namespace optim
