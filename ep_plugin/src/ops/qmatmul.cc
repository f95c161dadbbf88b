// QMatMul: the integer form of a QDQ MatMul of two activations, DequantizeLinear(a) x DequantizeLinear(b)
// [-> Relu] -> QuantizeLinear (attention's Q x K^T and P x V), built by rewrites/qdq_units.cc with QGemm's input
// layout (the "weights" are the run-time tensor B). Per matrix of the batch: A's rows minus their zero
// point as int16, B minus its zero point packed into int16-pair panels (per run: B changes every call),
// then the exact int16-pair GEMM with the requantizing epilogue. Both operands are per tensor, so
// uint8 x uint8 works too (the u8 x s8 VNNI/AMX kernels could not take B as it is).
#include <algorithm>

#include "broadcast.h"
#include "qgemm.h"

namespace optim {
namespace {

template <typename T>
void widen_rows(const T* a, int64_t m, int64_t k, int32_t zero, int64_t lda, int16_t* out) {
  for (int64_t i = 0; i < m; ++i) widen_row(a + i * k, k, zero, lda, out + i * lda);
}

// B (k x n) minus its zero point into the igemm panels: per panel and K pair, NR (even, odd) pairs.
template <typename T>
void pack_b(const T* b, int64_t k, int64_t n, int32_t zero, int64_t kp, int16_t* out) {
  constexpr int64_t NR = kernels::kQgemmNR;
  const int64_t panels = (n + NR - 1) / NR;
  for (int64_t p = 0; p < panels; ++p)
    for (int64_t q = 0; q < kp; ++q) {
      int16_t* o = out + (p * kp + q) * 2 * NR;
      for (int64_t j = 0; j < NR; ++j)
        for (int64_t t = 0; t < 2; ++t) {
          const int64_t kk = 2 * q + t, col = p * NR + j;
          o[2 * j + t] = kk < k && col < n ? static_cast<int16_t>(static_cast<int32_t>(b[kk * n + col]) - zero) : 0;
        }
    }
}

class QMatMulImpl : public Op {
 public:
  QMatMulImpl(const Node& n, const Graph& g) {
    const QuantParams qp = read_quant_params(n, g);
    a_dtype_ = qp.x_dtype;
    a_zero_ = qp.x_zero;
    const ValueInfo* b = g.value(n.inputs[kQGemmW]);
    b_dtype_ = b ? b->dtype : DType::kUndefined;
    if (b_dtype_ != DType::kUint8 && b_dtype_ != DType::kInt8) throw Error("B is not uint8/int8");
    if (qp.w_scales->numel() != 1) throw Error("B's scale is not per tensor");
    b_zero_ = qp.w_zero(0);
    ep_ = qp.epilogue;
    ep_.scale = qp.out_scale(0);
  }

  // A [..., M, K] x B [..., K, N], the leading dims broadcast as numpy does.
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& a = *in[0];
    const Shape& b = *in[kQGemmW];
    if (a.size() < 2 || b.size() < 2 || a.back() != b[b.size() - 2])
      throw Error("A " + shape_str(a) + " and B " + shape_str(b) + " do not multiply");
    Shape out = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2));
    out.push_back(a[a.size() - 2]);
    out.push_back(b.back());
    return {out};
  }

  // The big-matrix path's widened A and packed B (the batched path keeps its own per worker).
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const Shape& as = *in[0];
    const Shape& bs = *in[kQGemmW];
    if (as.size() < 2 || bs.size() < 2) return 0;
    const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back(), kp = (k + 1) / 2;
    const int64_t matrices = shape_numel(broadcast_shapes(Shape(as.begin(), as.end() - 2), Shape(bs.begin(), bs.end() - 2)));
    if (!splits_matrices(m, k, n, matrices)) return 0;
    return static_cast<size_t>(m * 2 * kp + static_cast<int64_t>(kernels::qgemm_s16_packed_b_elems(kp, n))) * sizeof(int16_t);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& as = *in[0].shape;
    const Shape& bs = *in[kQGemmW].shape;
    const Shape& ys = *out[0].shape;
    const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back(), kp = (k + 1) / 2;
    if (m == 0 || n == 0) return;
    auto* y = static_cast<uint8_t*>(out[0].data);  // one byte per element
    const Shape lead(ys.begin(), ys.end() - 2), a_lead(as.begin(), as.end() - 2), b_lead(bs.begin(), bs.end() - 2);
    // The matrices of the batch (attention heads) and which A and B each reads, then whole matrices per
    // task: each small, and widening / packing is a share of their work.
    std::vector<std::array<int64_t, 2>> pairs(static_cast<size_t>(std::max<int64_t>(shape_numel(lead), 0)));
    for_each_broadcast<2>(lead, {&a_lead, &b_lead}, [&](int64_t o, const std::array<int64_t, 2>& at) { pairs[static_cast<size_t>(o)] = at; });
    const int64_t matrices = static_cast<int64_t>(pairs.size());
    const int64_t per_matrix = m * n * k;
    if (splits_matrices(m, k, n, matrices)) {  // big matrices: split each one over the pool
      int16_t* a16 = static_cast<int16_t*>(rc.scratch());  // A widened, then B's panels (scratch_bytes)
      int16_t* packed = a16 + m * 2 * kp;
      for (int64_t o = 0; o < matrices; ++o) {
        const std::array<int64_t, 2>& at = pairs[static_cast<size_t>(o)];
        // A's rows widened over the pool too: a long sequence's A is as much work to widen as the GEMM's
        // epilogue (SegFormer's 16384 x 256 attention weights).
        parallel_rows(rc, m, k, [&](int64_t r0, int64_t r1) { widen_a(in, at, r0, r1, k, kp, a16); });
        pack(in, at, k, n, kp, packed);
        run_qgemm_s16(rc, m, n, kp, a16, 2 * kp, packed, y + o * m * n, n, ep_);
      }
      return;
    }
    const int64_t per_task = std::max<int64_t>(1, kMacsPerTask / std::max<int64_t>(per_matrix, 1));
    rc.parallel_for(static_cast<size_t>((matrices + per_task - 1) / per_task), [&](size_t t) {
      thread_local std::vector<int16_t> a16, packed;  // per worker: tasks of one run share nothing
      a16.resize(static_cast<size_t>(m * 2 * kp));
      packed.resize(kernels::qgemm_s16_packed_b_elems(kp, n));
      const int64_t o1 = std::min(matrices, (static_cast<int64_t>(t) + 1) * per_task);
      for (int64_t o = static_cast<int64_t>(t) * per_task; o < o1; ++o) {
        prepare(in, pairs[static_cast<size_t>(o)], m, k, n, kp, a16.data(), packed.data());
        rc.kernels.qgemm_s16(0, m, 0, (n + kernels::kQgemmNR - 1) / kernels::kQgemmNR, n, kp, a16.data(), 2 * kp,
                             packed.data(), y + o * m * n, n, ep_);
      }
    });
  }

 private:
  static bool splits_matrices(int64_t m, int64_t k, int64_t n, int64_t matrices) {
    return matrices == 1 || m * n * k >= 8 * kMacsPerTask;
  }

  // A's rows minus their zero point (int16, K padded to even) and B's panels for one matrix of the batch.
  void prepare(const std::vector<TensorRef>& in, const std::array<int64_t, 2>& at, int64_t m, int64_t k, int64_t n,
               int64_t kp, int16_t* a16, int16_t* packed) const {
    widen_a(in, at, 0, m, k, kp, a16);
    pack(in, at, k, n, kp, packed);
  }
  // Rows [r0, r1) of matrix at[0] of A into rows [r0, r1) of a16.
  void widen_a(const std::vector<TensorRef>& in, const std::array<int64_t, 2>& at, int64_t r0, int64_t r1, int64_t k,
               int64_t kp, int16_t* a16) const {
    const int64_t m = in[0].shape->at(in[0].shape->size() - 2), first = at[0] * m * k + r0 * k;
    if (a_dtype_ == DType::kUint8) widen_rows(in[0].as<uint8_t>() + first, r1 - r0, k, a_zero_, 2 * kp, a16 + r0 * 2 * kp);
    else widen_rows(in[0].as<int8_t>() + first, r1 - r0, k, a_zero_, 2 * kp, a16 + r0 * 2 * kp);
  }
  void pack(const std::vector<TensorRef>& in, const std::array<int64_t, 2>& at, int64_t k, int64_t n, int64_t kp,
            int16_t* packed) const {
    if (b_dtype_ == DType::kUint8) pack_b(in[kQGemmW].as<uint8_t>() + at[1] * k * n, k, n, b_zero_, kp, packed);
    else pack_b(in[kQGemmW].as<int8_t>() + at[1] * k * n, k, n, b_zero_, kp, packed);
  }

  DType a_dtype_ = DType::kUint8, b_dtype_ = DType::kUint8;
  int32_t a_zero_ = 0, b_zero_ = 0;
  kernels::QgemmEpilogue ep_;
};

std::unique_ptr<Op> create_qmatmul(const Node& n, const Graph& g) { return std::make_unique<QMatMulImpl>(n, g); }

}  // namespace

std::unique_ptr<Op> create_qmatmul_unit(const Node& n, const Graph& g) { return create_qmatmul(n, g); }

}  // namespace optim
