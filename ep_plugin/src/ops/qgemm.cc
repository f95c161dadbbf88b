// QGemm: the integer form of a QDQ unit DequantizeLinear(x) x DequantizeLinear(W) (+ bias) [-> Relu]
// -> QuantizeLinear, built by rewrites/qdq_units.cc. x is uint8/int8 per tensor, W a constant int8/uint8
// (per tensor or per output column); the product is summed exactly in int32 and requantized once in
// the GEMM epilogue: y = saturate(round((acc * sx * sw[j] + bias[j]) / sy) + zy).
#include <algorithm>
#include <cstring>

#include "op.h"
#include "dequantize_after.h"
#include "lut_after.h"
#include "qadd_after.h"
#include "qgemm.h"
#include "../aligned_vector.h"

namespace optim {
namespace {

class QGemmImpl : public Op {
 public:
  QGemmImpl(const Node& n, const Graph& g) {
    const QuantParams qp = read_quant_params(n, g);
    x_dtype_ = qp.x_dtype;
    x_zero_ = qp.x_zero;
    const Tensor* w = g.constant(n.inputs[kQGemmW]);
    if (!w || w->shape.size() != 2) throw Error("weights are not a 2-D constant");
    const bool trans_b = n.attr_i("transB", 0) != 0;
    k_ = trans_b ? w->shape[1] : w->shape[0];
    n_ = trans_b ? w->shape[0] : w->shape[1];
    // Weights minus their zero point (K x N), packed in prepare() for the kernel that will run.
    wide_.resize(static_cast<size_t>(k_ * n_));
    for (int64_t kk = 0; kk < k_; ++kk)
      for (int64_t j = 0; j < n_; ++j)
        wide_[static_cast<size_t>(kk * n_ + j)] = static_cast<int16_t>(int8_at(*w, trans_b ? j * k_ + kk : kk * n_ + j) - qp.w_zero(j));
    kp_ = (k_ + 1) / 2;
    scale_ = qp.out_scales(n_);
    bias_ = qp.bias(n_);
    ep_ = qp.epilogue;
    ep_.scale_col = scale_.data();
    ep_.bias_col = bias_.empty() ? nullptr : bias_.data();
    after_ = QAddAfter(n, g);
    dequantized_ = DequantizeAfter(n, g, n_);
    lut_ = LutAfter(n, ep_.out == kernels::QuantOut::kInt8);
  }

  // The u8 x s8 kernel when the table has it and the weights fit int8 (and, for a kernel that sums pairs in
  // int16, pass u8s8_pairs_exact); else int16 pairs.
  void prepare(const kernels::KernelTable& kt) override {
    const bool fits_s8 = std::all_of(wide_.begin(), wide_.end(), [](int16_t v) { return v >= -128 && v <= 127; });
    std::vector<int8_t> w8;
    if (kt.qgemm_u8s8 && fits_s8) {
      w8.assign(wide_.begin(), wide_.end());
      if (kt.qgemm_u8s8.traits.int16_pairs && !kernels::u8s8_pairs_exact(w8.data(), n_, k_, n_)) w8.clear();
    }
    kernel_ = w8.empty() ? kt.qgemm_s16.name : kt.qgemm_u8s8.name;
    if (!w8.empty()) {
      const int64_t mult = kt.qgemm_u8s8.traits.k_multiple / 4;  // in quads
      kq_ = ((k_ + 3) / 4 + mult - 1) / mult * mult;
      row_pad_ = kt.qgemm_u8s8.traits.row_pad;
      packed8_.resize(kernels::qgemm_u8s8_packed_b_bytes(kq_, n_));
      kernels::qgemm_u8s8_pack_b(w8.data(), n_, k_, n_, kq_, packed8_.data());
      // sum_k (x - zx) w = sum_k x' w - zx' sum_k w, with x' the stored uint8 (int8 flipped by +128).
      const int32_t zx = x_dtype_ == DType::kInt8 ? x_zero_ + 128 : x_zero_;
      comp_.assign(static_cast<size_t>(n_), 0);
      for (int64_t kk = 0; kk < k_; ++kk)
        for (int64_t j = 0; j < n_; ++j) comp_[static_cast<size_t>(j)] -= zx * w8[static_cast<size_t>(kk * n_ + j)];
    } else {
      packed_.resize(kernels::qgemm_s16_packed_b_elems(kp_, n_));
      kernels::qgemm_s16_pack_b(wide_.data(), n_, false, k_, n_, packed_.data());
    }
    wide_.clear();
    wide_.shrink_to_fit();
    dequantized_.prepare(kt);
  }

  std::string kernel_name() const override { return kernel_ ? kernel_ : ""; }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.empty() || x.back() != k_) throw Error("x " + shape_str(x) + " does not end in K=" + std::to_string(k_));
    Shape out = x;
    out.back() = n_;
    return {out};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    return a_bytes(rows(*in[0])) + (dequantized_ ? static_cast<size_t>(rows(*in[0]) * n_) : 0);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const int64_t m = rows(*in[0].shape);
    if (m == 0 || n_ == 0) return;
    // A folded QAdd, lookup table or DequantizeLinear (in that order) goes over each tile the kernel finished,
    // while it is in cache; with the last the kernel's bytes go to scratch, after A's rows.
    const void* other = after_ ? in[after_.other_input()].data : nullptr;
    const int64_t ldo = after_ ? after_.other_stride(*in[after_.other_input()].shape, *out[0].shape) : 0;
    void* c = dequantized_ ? static_cast<uint8_t*>(rc.scratch()) + a_bytes(m) : out[0].data;
    const TileDone done = [&](int64_t m0, int64_t m1, int64_t j0, int64_t j1) {
      if (after_) after_.apply(rc, c, n_, other, ldo, m0, m1, j0, std::min(j1, n_));
      if (lut_) lut_.apply(rc, c, n_, m0, m1, j0, std::min(j1, n_));
      if (dequantized_) dequantized_.apply(rc, static_cast<const uint8_t*>(c), out[0].data, n_, m0, m1, j0, std::min(j1, n_));
    };
    if (!packed8_.empty()) {
      run_u8s8(rc, m, in[0], c, done);
      return;
    }
    if (packed_.empty()) throw Error("the integer GEMM's weights were never packed (prepare() not called)");
    int16_t* a = static_cast<int16_t*>(rc.scratch());
    const int64_t lda = 2 * kp_;
    // x minus its zero point, widened to int16, K padded to even with 0 (which is real 0).
    const int64_t rows_per_task = std::max<int64_t>(1, kParallelChunk / std::max<int64_t>(k_, 1));
    const int64_t tasks = std::min<int64_t>(64, (m + rows_per_task - 1) / rows_per_task);
    rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
      const int64_t per = (m + tasks - 1) / tasks;
      const int64_t r0 = static_cast<int64_t>(t) * per, r1 = std::min(m, r0 + per);
      for (int64_t i = r0; i < r1; ++i) {
        int16_t* row = a + i * lda;
        if (x_dtype_ == DType::kUint8) widen_row(in[0].as<uint8_t>() + i * k_, k_, x_zero_, lda, row);
        else widen_row(in[0].as<int8_t>() + i * k_, k_, x_zero_, lda, row);
      }
    });
    run_qgemm_s16(rc, m, n_, kp_, a, lda, packed_.data(), c, n_, ep_, after_ || lut_ || dequantized_ ? &done : nullptr);
  }

 private:
  // A as stored uint8 rows (int8 flipped to uint8 by xor 0x80), K padded to a multiple of 4.
  void run_u8s8(const RunContext& rc, int64_t m, const TensorRef& x, void* c, const TileDone& done) const {
    uint8_t* a = static_cast<uint8_t*>(rc.scratch());
    const int64_t lda = 4 * kq_;
    const uint8_t* src = static_cast<const uint8_t*>(x.data);
    const uint8_t flip = x_dtype_ == DType::kInt8 ? 0x80 : 0;
    const int64_t k = k_;  // a local: the byte stores below could alias a member, forcing reloads
    for (int64_t i = 0; i < m; ++i) {
      uint8_t* __restrict row = a + i * lda;
      const uint8_t* __restrict s = src + i * k;
      if (flip) for (int64_t kk = 0; kk < k; ++kk) row[kk] = static_cast<uint8_t>(s[kk] ^ 0x80);
      else std::memcpy(row, s, static_cast<size_t>(k));
      std::memset(row + k, 0, static_cast<size_t>(lda - k));
    }
    std::memset(a + m * lda, 0, static_cast<size_t>(row_pad_ * lda));  // rows the kernel reads past m (AMX tiles)
    const int64_t panels = (n_ + kernels::kQuadNR - 1) / kernels::kQuadNR;
    const int64_t panels_per_task = 4;
    const int64_t rows_per_task = gemm_task_rows(m, n_, kernels::kQuadNR, panels_per_task, static_cast<double>(lda),
                                                 8 * kernels::kQuadMR, rc.kernels.qgemm_u8s8.traits.mr);
    const int64_t m_tasks = (m + rows_per_task - 1) / rows_per_task, p_tasks = (panels + panels_per_task - 1) / panels_per_task;
    const double macs = static_cast<double>(m) * static_cast<double>(n_) * static_cast<double>(4 * kq_);
    // Small products: waking a pool thread costs about as much as 1.5 million VNNI multiply-adds.
    if (macs < 1.5e6 || m_tasks * p_tasks == 1) {
      rc.kernels.qgemm_u8s8(0, m, 0, panels, n_, kq_, a, lda, packed8_.data(), comp_.data(), c, n_, ep_);
      done(0, m, 0, n_);
      return;
    }
    rc.parallel_for(static_cast<size_t>(m_tasks * p_tasks), [&](size_t t) {
      const int64_t mt = static_cast<int64_t>(t) / p_tasks, pt = static_cast<int64_t>(t) % p_tasks;
      const int64_t m0 = mt * rows_per_task, m1 = std::min(m, m0 + rows_per_task);
      const int64_t p0 = pt * panels_per_task, p1 = std::min(panels, p0 + panels_per_task);
      rc.kernels.qgemm_u8s8(m0, m1, p0, p1, n_, kq_, a, lda, packed8_.data(), comp_.data(), c, n_, ep_);
      done(m0, m1, p0 * kernels::kQuadNR, p1 * kernels::kQuadNR);
    });
  }

  int64_t rows(const Shape& x) const { return k_ ? shape_numel(x) / k_ : 0; }
  // Scratch for A as the kernel reads it (uint8 quads with the AMX tail rows, or int16 pairs), 64-aligned.
  size_t a_bytes(int64_t m) const {
    const size_t b = !packed8_.empty() ? static_cast<size_t>((m + row_pad_) * 4 * kq_) : static_cast<size_t>(m * 2 * kp_) * sizeof(int16_t);
    return (b + 63) / 64 * 64;
  }
  DType x_dtype_ = DType::kUint8;
  int32_t x_zero_ = 0;
  int64_t k_ = 0, n_ = 0, kp_ = 0, kq_ = 0;
  int64_t row_pad_ = 0;  // zero rows of A after the last, read by the u8 x s8 kernel (AMX tiles)
  const char* kernel_ = nullptr;  // the kernel prepare chose, for the step profile
  std::vector<int16_t> wide_;     // until prepare()
  AlignedVector<int16_t> packed_;  // int16-pair panels (scalar/AVX2 kernels)
  AlignedVector<int8_t> packed8_;  // or u8 x s8 quad panels (VNNI)
  std::vector<int32_t> comp_;     // VNNI: -zero_point(x) * column sums of the weights
  std::vector<float> scale_, bias_;
  kernels::QgemmEpilogue ep_;
  QAddAfter after_;
  LutAfter lut_;
  DequantizeAfter dequantized_;
};

std::unique_ptr<Op> create_qgemm(const Node& n, const Graph& g) { return std::make_unique<QGemmImpl>(n, g); }

}  // namespace

void run_qgemm_s16(const RunContext& rc, int64_t m, int64_t n, int64_t kp, const int16_t* a, int64_t lda,
               const int16_t* b_packed, void* c, int64_t ldc, const kernels::QgemmEpilogue& ep, const TileDone* done) {
  const int64_t rows = gemm_task_rows(m, n, kernels::kQgemmNR, 4, static_cast<double>(lda) * sizeof(int16_t),
                                      16 * kernels::kQgemmMR, rc.kernels.qgemm_s16.traits.mr);
  const GemmTiles tiles{kernels::kQgemmNR, rows, 4};
  const double ops = static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(2 * kp);
  run_gemm_tiles(rc, m, n, ops, tiles, [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
    rc.kernels.qgemm_s16(m0, m1, p0, p1, n, kp, a, lda, b_packed, c, ldc, ep);
  }, done);
}

std::unique_ptr<Op> create_qgemm_unit(const Node& n, const Graph& g) { return create_qgemm(n, g); }

}  // namespace optim
