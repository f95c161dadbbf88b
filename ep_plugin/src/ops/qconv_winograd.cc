// The exact integer Winograd form (qconv_winograd.h): bytes to int16 V (winograd_input_q8), 16 int16-pair GEMMs
// into int32 M (conv_gemm_s16 with raw_sums), M to the output's bytes (winograd_output_q8), then the unit's
// stages after the sums (QAdd, table) over each block's runs of output pixels; winograd_schedule.h shares the
// tiles out.
#include "qconv_winograd.h"

#include <cstdlib>

#include "conv_winograd.h"

namespace optim {

QWinogradForm::QWinogradForm(const QConvUnit& u)
    : QConvForm(u), kt_((u.cg.cin_g + 1) / 2 * 2), schedule_(u.cg.cin_g, kt_, u.cg.cout, sizeof(int16_t), 1) {
  if (!WinogradF23::suits(u.cg) || u.nchw_input)
    throw Error("algorithm 'winograd' needs a channels-last 3x3 stride-1 integer convolution of one group");
  if (!sums_fit_int32(u)) throw Error("algorithm 'winograd' on weights whose int32 sums could overflow");
}

namespace {

// U' = G' g G't of one output and input channel (g: its 3x3 weights), G' = 2G: the 16 positions.
void transform_kernel(const int16_t* g, int32_t* u) {
  static const int32_t G[4][3] = {{2, 0, 0}, {1, 1, 1}, {1, -1, 1}, {0, 0, 2}};
  winograd_kernel_transform(g, G, u);
}

}  // namespace

bool QWinogradForm::sums_fit_int32(const QConvUnit& u) {
  if (!WinogradF23::suits(u.cg)) return false;
  const bool u8 = u.x_dtype == DType::kUint8;
  const int64_t lo = u8 ? 0 : -128, hi = u8 ? 255 : 127;
  const int64_t v_max = 4 * std::max(u.x_zero - lo, hi - u.x_zero);
  const int64_t cin = u.cg.cin_g;
  for (int64_t o = 0; o < u.cg.cout; ++o) {
    int64_t sum = 0;
    for (int64_t i = 0; i < cin; ++i) {
      int32_t t[16];
      transform_kernel(u.wide.data() + (o * cin + i) * 9, t);
      for (const int32_t v : t) sum += std::abs(int64_t{v});
    }
    if (sum * v_max >= (int64_t{1} << 31)) return false;
  }
  return true;
}

void QWinogradForm::prepare(const kernels::KernelTable& kt) {
  const int64_t cin = u_.cg.cin_g, cout = u_.cg.cout;
  // Per position a B of kt x Cout (K padded to pairs with zero rows); |U'| <= 9 * 255 fits int16.
  std::vector<int16_t> b(static_cast<size_t>(16 * kt_ * cout), 0);
  for (int64_t o = 0; o < cout; ++o)
    for (int64_t i = 0; i < cin; ++i) {
      int32_t t[16];
      transform_kernel(u_.wide.data() + (o * cin + i) * 9, t);
      for (int64_t pos = 0; pos < 16; ++pos) b[static_cast<size_t>((pos * kt_ + i) * cout + o)] = static_cast<int16_t>(t[pos]);
    }
  kernel_ = kt.conv_gemm_s16.name;
  packed_elems_ = kernels::qgemm_s16_packed_b_elems(kt_ / 2, cout);
  packed_.assign(16 * packed_elems_, 0);
  for (int64_t pos = 0; pos < 16; ++pos)
    kernels::qgemm_s16_pack_b(b.data() + pos * kt_ * cout, cout, false, kt_, cout, packed_.data() + pos * packed_elems_);
}

namespace {

// The integer steps for WinogradSchedule.
struct IntegerSteps {
  using In = uint8_t;
  using VElem = int16_t;
  using MElem = int32_t;
  const QConvUnit& u;
  int64_t kt;
  const int16_t* w;
  size_t w_elems;
  uint8_t* y;
  const QAddRows& other;
  kernels::QgemmEpilogue ep, sums;

  bool x_signed() const { return u.x_dtype == DType::kInt8; }
  void pad_row(uint8_t* row, int64_t n) const {  // the zero point's byte (int8's two's complement): 0 once centered
    std::fill(row, row + n, static_cast<uint8_t>(u.x_zero));
  }
  static int64_t gemm_rows_multiple(const RunContext& rc) { return rc.kernels.conv_gemm_s16.traits.mr; }
  void input(const RunContext& rc, const uint8_t* const* px, int64_t nt, int16_t* v, int64_t ld_pos) const {
    rc.kernels.winograd_input_q8(px, nt, u.cg.cin_g, kt, x_signed(), u.x_zero, v, ld_pos, kt);
  }
  // Rows [m0, m1) of position pos's V (`rows` in all) by panels [p0, p1) of its U', into its M.
  void gemm(const RunContext& rc, int64_t pos, int64_t m0, int64_t m1, int64_t rows, int64_t p0, int64_t p1,
            const int16_t* v, int32_t* m) const {
    static const int64_t kOneTap = 0;
    kernels::ConvGemmQ8Args a;
    a.a = {v, rows, rows, rows * kt, 1, 1, rows, kt, 1, kt, &kOneTap};  // a plain GEMM (ConvRows)
    a.w = w + pos * w_elems;
    a.n = u.cg.cout;
    a.c = m;
    a.ldc = u.cg.cout;
    a.ep = &sums;
    rc.kernels.conv_gemm_s16(m0, m1, p0, p1, a);
  }
  void output(const RunContext& rc, const NhwcConvLayout& l, const int32_t* m, int64_t ld_pos, int64_t t0, int64_t nt,
              const int64_t* pixel, int64_t j0, int64_t cols) const {
    const int64_t cout = u.cg.cout;
    rc.kernels.winograd_output_q8(m + j0, ld_pos, cout, nt, cols, pixel, y, cout, j0, ep);
    if (u.after || u.lut)
      WinogradSchedule::output_runs(l, t0, nt, [&](int64_t m0, int64_t m1) {
        u.finish_rows(rc, y, other.at(0), other.ldo, m0, m1, j0, j0 + cols);
      });
  }
};

}  // namespace

void QWinogradForm::run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
                        const QAddRows& other) const {
  kernels::QgemmEpilogue sums;
  sums.raw_sums = true;
  const IntegerSteps steps{u_, kt_, packed_.data(), packed_elems_, y, other, u_.epilogue(), sums};
  schedule_.run(rc, l, static_cast<const uint8_t*>(in[0].data), rc.scratch(), steps);
}

}  // namespace optim
