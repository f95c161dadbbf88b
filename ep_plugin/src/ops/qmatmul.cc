// QMatMul: the integer form of a QDQ MatMul of two activations, DequantizeLinear(a) x DequantizeLinear(b)
// [-> Relu] -> QuantizeLinear (attention's Q x K^T and P x V), built by rewrites/qdq_units.cc with QGemm's input
// layout (the "weights" are the run-time tensor B). Per matrix of the batch, packed on every run (B changes
// every call): where the table has a u8 x s8 kernel, A as uint8 and B as int8 with the zero points' terms as
// column and row compensations (qmatmul_u8s8.h; a pair kernel only where the matrix cannot saturate it); else
// A's rows minus their zero point as int16 and B's into int16-pair panels. Then the exact GEMM with the
// requantizing epilogue. Both operands are per tensor, so uint8 x uint8 works too.
#include <algorithm>
#include <atomic>

#include "broadcast.h"
#include "qgemm.h"
#include "qmatmul_u8s8.h"

namespace optim {
namespace {

template <typename T>
void widen_rows(const T* a, int64_t m, int64_t k, int32_t zero, int64_t lda, int16_t* out) {
  for (int64_t i = 0; i < m; ++i) widen_row(a + i * k, k, zero, lda, out + i * lda);
}

// B (k x n) minus its zero point into the igemm panels: per panel and K pair, NR (even, odd) pairs. B
// changes every run, so this is on the hot path: whole panels interleave two rows of B with no test per
// element (the compiler vectorizes it); the last, partial panel and an odd K's last row pad with 0.
template <typename T>
void pack_b(const T* b, int64_t k, int64_t n, int32_t zero, int64_t kp, int16_t* out) {
  constexpr int64_t NR = kernels::kQgemmNR;
  const int64_t full = n / NR, panels = (n + NR - 1) / NR;
  for (int64_t q = 0; q < kp; ++q) {
    const T* r0 = b + 2 * q * n;
    const T* r1 = 2 * q + 1 < k ? r0 + n : nullptr;
    for (int64_t p = 0; p < full; ++p) {
      int16_t* __restrict o = out + (p * kp + q) * 2 * NR;
      const T* __restrict e = r0 + p * NR;
      if (r1) {
        const T* __restrict odd = r1 + p * NR;
        for (int64_t j = 0; j < NR; ++j) {
          o[2 * j] = static_cast<int16_t>(static_cast<int32_t>(e[j]) - zero);
          o[2 * j + 1] = static_cast<int16_t>(static_cast<int32_t>(odd[j]) - zero);
        }
      } else {
        for (int64_t j = 0; j < NR; ++j) {
          o[2 * j] = static_cast<int16_t>(static_cast<int32_t>(e[j]) - zero);
          o[2 * j + 1] = 0;
        }
      }
    }
    if (full == panels) continue;
    int16_t* o = out + (full * kp + q) * 2 * NR;
    for (int64_t j = 0; j < NR; ++j) {
      const int64_t col = full * NR + j;
      o[2 * j] = col < n ? static_cast<int16_t>(static_cast<int32_t>(r0[col]) - zero) : 0;
      o[2 * j + 1] = col < n && r1 ? static_cast<int16_t>(static_cast<int32_t>(r1[col]) - zero) : 0;
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

  void prepare(const kernels::KernelTable& kt) override {
    u8s8_ = kt.qgemm_u8s8;
    s16_name_ = kt.qgemm_s16.name;
  }

  // The u8 x s8 kernel where the table has one; a pair kernel's matrices that could saturate take the int16 one.
  std::string kernel_name() const override {
    if (!u8s8_) return s16_name_ ? s16_name_ : "";
    return std::string(u8s8_.name) + (u8s8_.traits.int16_pairs ? " (or int16 pairs)" : "");
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
      for (int64_t o = 0; o < matrices; ++o) {
        const std::array<int64_t, 2>& at = pairs[static_cast<size_t>(o)];
        if (!u8s8_ || !run_big_u8s8(rc, in, at, m, k, n, y + o * m * n)) run_big_s16(rc, in, at, m, k, n, kp, y + o * m * n);
      }
      return;
    }
    const int64_t per_task = std::max<int64_t>(1, kMacsPerTask / std::max<int64_t>(per_matrix, 1));
    rc.parallel_for(static_cast<size_t>((matrices + per_task - 1) / per_task), [&](size_t t) {
      const int64_t o1 = std::min(matrices, (static_cast<int64_t>(t) + 1) * per_task);
      for (int64_t o = static_cast<int64_t>(t) * per_task; o < o1; ++o) {
        const std::array<int64_t, 2>& at = pairs[static_cast<size_t>(o)];
        if (u8s8_ && run_small_u8s8(in, at, m, k, n, y + o * m * n)) continue;
        thread_local std::vector<int16_t> a16, packed;  // per worker: tasks of one run share nothing
        a16.resize(static_cast<size_t>(m * 2 * kp));
        packed.resize(kernels::qgemm_s16_packed_b_elems(kp, n));
        widen_and_pack(in, at, m, k, n, kp, a16.data(), packed.data());
        rc.kernels.qgemm_s16(0, m, 0, (n + kernels::kQgemmNR - 1) / kernels::kQgemmNR, n, kp, a16.data(), 2 * kp,
                             packed.data(), y + o * m * n, n, ep_);
      }
    });
  }

 private:
  static bool splits_matrices(int64_t m, int64_t k, int64_t n, int64_t matrices) {
    return matrices == 1 || m * n * k >= 8 * kMacsPerTask;
  }

  U8s8Operand operand_a(const std::vector<TensorRef>& in, int64_t matrix, int64_t m, int64_t k) const {
    return {static_cast<const uint8_t*>(in[0].data) + matrix * m * k, a_dtype_ == DType::kUint8, a_zero_};
  }
  U8s8Operand operand_b(const std::vector<TensorRef>& in, int64_t matrix, int64_t k, int64_t n) const {
    return {static_cast<const uint8_t*>(in[kQGemmW].data) + matrix * k * n, b_dtype_ == DType::kUint8, b_zero_};
  }
  kernels::QgemmEpilogue epilogue(const U8s8Matrix& mm) const {
    kernels::QgemmEpilogue ep = ep_;
    ep.acc_row = mm.comp_row.data();
    return ep;
  }

  // One matrix of the batch on this thread with the u8 x s8 kernel; false (nothing written) where a pair kernel
  // could saturate on it.
  bool run_small_u8s8(const std::vector<TensorRef>& in, const std::array<int64_t, 2>& at, int64_t m, int64_t k,
                      int64_t n, uint8_t* y) const {
    thread_local U8s8Matrix mm;  // per worker: tasks of one run share nothing
    u8s8_size(mm, m, k, n, u8s8_.traits);
    const U8s8Operand a = operand_a(in, at[0], m, k);
    const int32_t max_pair = u8s8_rows(mm, a, 0, m, k, u8s8_.traits.int16_pairs);
    if (!u8s8_finish(mm, a, operand_b(in, at[1], k, n), m, k, n, u8s8_.traits.int16_pairs, max_pair)) return false;
    u8s8_(0, m, 0, (n + kernels::kQuadNR - 1) / kernels::kQuadNR, n, mm.kq, mm.a.data(), mm.lda, mm.packed.data(),
          mm.comp_col.data(), y, n, epilogue(mm));
    return true;
  }

  // One big matrix split over the pool: A's rows prepared there too (a long sequence's A is as much work as the
  // GEMM's epilogue: SegFormer's 16384 x 256 attention weights), then tiles of rows x panels.
  bool run_big_u8s8(const RunContext& rc, const std::vector<TensorRef>& in, const std::array<int64_t, 2>& at, int64_t m,
                    int64_t k, int64_t n, uint8_t* y) const {
    thread_local U8s8Matrix mine;
    U8s8Matrix& mm = mine;  // the lambdas below run on the pool's threads: a thread_local would be theirs
    u8s8_size(mm, m, k, n, u8s8_.traits);
    const U8s8Operand a = operand_a(in, at[0], m, k);
    std::atomic<int32_t> max_pair{0};
    parallel_rows(rc, m, k, [&](int64_t r0, int64_t r1) {
      const int32_t mp = u8s8_rows(mm, a, r0, r1, k, u8s8_.traits.int16_pairs);
      for (int32_t seen = max_pair.load(); mp > seen && !max_pair.compare_exchange_weak(seen, mp);) {}
    });
    if (!u8s8_finish(mm, a, operand_b(in, at[1], k, n), m, k, n, u8s8_.traits.int16_pairs, max_pair.load())) return false;
    const kernels::QgemmEpilogue ep = epilogue(mm);
    const GemmTiles tiles{kernels::kQuadNR,
                          gemm_task_rows(m, n, kernels::kQuadNR, 4, static_cast<double>(mm.lda), 8 * kernels::kQuadMR,
                                         u8s8_.traits.mr), 4};
    const double ops = 2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
    run_gemm_tiles(rc, m, n, ops, tiles, [&](int64_t m0, int64_t m1, int64_t p0, int64_t p1) {
      u8s8_(m0, m1, p0, p1, n, mm.kq, mm.a.data(), mm.lda, mm.packed.data(), mm.comp_col.data(), y, n, ep);
    }, nullptr);
    return true;
  }

  // The same with int16 pairs, in the op's scratch (scratch_bytes).
  void run_big_s16(const RunContext& rc, const std::vector<TensorRef>& in, const std::array<int64_t, 2>& at, int64_t m,
                   int64_t k, int64_t n, int64_t kp, uint8_t* y) const {
    int16_t* a16 = static_cast<int16_t*>(rc.scratch());  // A widened, then B's panels
    int16_t* packed = a16 + m * 2 * kp;
    parallel_rows(rc, m, k, [&](int64_t r0, int64_t r1) { widen_a(in, at, r0, r1, k, kp, a16); });
    pack(in, at, k, n, kp, packed);
    run_qgemm_s16(rc, m, n, kp, a16, 2 * kp, packed, y, n, ep_);
  }

  // A's rows minus their zero point (int16, K padded to even) and B's panels for one matrix of the batch.
  void widen_and_pack(const std::vector<TensorRef>& in, const std::array<int64_t, 2>& at, int64_t m, int64_t k, int64_t n,
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
  kernels::Kernel<kernels::QgemmU8S8Fn> u8s8_;  // empty: the table has none (scalar)
  const char* s16_name_ = nullptr;
};

std::unique_ptr<Op> create_qmatmul(const Node& n, const Graph& g) { return std::make_unique<QMatMulImpl>(n, g); }

}  // namespace

std::unique_ptr<Op> create_qmatmul_unit(const Node& n, const Graph& g) { return create_qmatmul(n, g); }

}  // namespace optim
