// MatMul (numpy semantics, batched, broadcast) and Gemm on float32, both on the packed-B SGEMM.
// Constant B operands (weights) are packed once when the op is created, and repacked for the bf16 GEMM at
// prepare() when the session runs with precision=bf16 (a run-time B stays float32).
#include <algorithm>
#include <cstring>

#include "sgemm_driver.h"

namespace optim {
namespace {

struct MatmulShapes {
  Shape out;
  Shape batch;  // broadcast batch dims
  int64_t m = 1, k = 1, n = 1;
  bool a_vec = false, b_vec = false;
};

MatmulShapes matmul_shapes(const Shape& a, const Shape& b) {
  if (a.empty() || b.empty()) throw Error("MatMul inputs must have rank >= 1, got A " + shape_str(a) + " B " + shape_str(b));
  MatmulShapes s;
  Shape aa = a, bb = b;
  if (aa.size() == 1) { aa.insert(aa.begin(), 1); s.a_vec = true; }
  if (bb.size() == 1) { bb.push_back(1); s.b_vec = true; }
  s.m = aa[aa.size() - 2];
  s.k = aa.back();
  s.n = bb.back();
  if (bb[bb.size() - 2] != s.k)
    throw Error("MatMul inner dimensions differ: A " + shape_str(a) + " has K=" + std::to_string(s.k) + ", B " +
                shape_str(b) + " has K=" + std::to_string(bb[bb.size() - 2]));
  s.batch = broadcast_shapes(Shape(aa.begin(), aa.end() - 2), Shape(bb.begin(), bb.end() - 2));
  s.out = s.batch;
  if (!s.a_vec) s.out.push_back(s.m);
  if (!s.b_vec) s.out.push_back(s.n);
  return s;
}

class MatMulImpl : public Op {
 public:
  // bias: a folded Add's constant of B's columns (rewrites/matmul_bias.cc), only with a constant 2-D B; so is a
  // folded Gelu (attribute kThenGelu), run on each block of the output as its task finishes it.
  MatMulImpl(const Node& n, const Tensor* b_const, const Tensor* bias) {
    if (b_const && b_const->shape.size() == 2) {
      packed_ = pack_matrix(b_const->data<float>(), b_const->shape[0], b_const->shape[1], false);
      has_packed_ = true;
    }
    if (bias) {
      if (!has_packed_ || bias->dtype != DType::kFloat32 || bias->numel() != b_const->shape[1])
        throw Error("a MatMul bias needs a constant 2-D B and one float32 per column of it");
      bias_.assign(bias->data<float>(), bias->data<float>() + bias->numel());
    }
    if (n.has_attr(kThenGelu)) {
      if (!has_packed_) throw Error(n.label() + ": a folded Gelu needs a constant 2-D B");
      gelu_ = true;
      gelu_op_ = gelu_op(n.attr_s(kThenGelu, "none"));
    }
  }

  void prepare(const kernels::KernelTable& kt) override {
    if (has_packed_) packed_.use_bf16(kt);
  }
  std::string kernel_name() const override { return packed_.bf16_kernel ? packed_.bf16_kernel : ""; }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {matmul_shapes(*in[0], *in[1]).out};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    if (has_packed_) return 0;
    const MatmulShapes s = matmul_shapes(*in[0], *in[1]);
    return static_cast<size_t>(std::max<int64_t>(1, shape_numel(s.batch))) *
           kernels::sgemm_packed_b_floats(s.k, s.n) * sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& sa = *in[0].shape;
    const Shape& sb = *in[1].shape;
    const MatmulShapes s = matmul_shapes(sa, sb);
    const float* a = in[0].as<float>();
    const float* b = in[1].as<float>();
    float* y = out[0].as<float>();
    kernels::SgemmEpilogue ep;
    if (!bias_.empty()) ep.bias_col = bias_.data();
    if (has_packed_) {
      // B is a 2-D weight: all of A's leading dims fold into M, one GEMM.
      const int64_t rows = s.k ? in[0].numel() / s.k : out[0].numel() / std::max<int64_t>(s.n, 1);
      auto gelu = [&](int64_t m0, int64_t m1, int64_t j0, int64_t j1) {
        if (j0 == 0 && j1 == s.n) return rc.kernels.unary(gelu_op_, y + m0 * s.n, y + m0 * s.n, (m1 - m0) * s.n);
        for (int64_t i = m0; i < m1; ++i) rc.kernels.unary(gelu_op_, y + i * s.n + j0, y + i * s.n + j0, j1 - j0);
      };
      if (s.k == 0) {  // empty inner dimension: A*B is zeros (plus the bias)
        for (int64_t i = 0; i < rows * s.n; ++i) y[i] = bias_.empty() ? 0.f : bias_[static_cast<size_t>(i % s.n)];
        if (gelu_) gelu(0, rows, 0, s.n);
        return;
      }
      if (!gelu_) return run_sgemm(rc, rows, a, s.k, packed_, y, s.n, ep);
      const SgemmAfter after = gelu;
      run_sgemm(rc, rows, a, s.k, packed_, y, s.n, ep, &after);
      return;
    }
    const int64_t batches = std::max<int64_t>(1, shape_numel(s.batch));
    // Offsets of each batch's A and B matrices under broadcasting.
    const size_t br = s.batch.size();
    const size_t ar = sa.size() < 2 ? 0 : sa.size() - 2, brk = sb.size() < 2 ? 0 : sb.size() - 2;
    std::vector<int64_t> astr(br, 0), bstr(br, 0);
    int64_t as_ = s.m * s.k, bs_ = s.k * s.n;
    for (size_t i = 0; i < br; ++i) {
      const size_t ai = br - 1 - i;
      if (i < ar) { const int64_t d = sa[ar - 1 - i]; astr[ai] = d == 1 ? 0 : as_; as_ *= d; }
      if (i < brk) { const int64_t d = sb[brk - 1 - i]; bstr[ai] = d == 1 ? 0 : bs_; bs_ *= d; }
    }
    float* packs = static_cast<float*>(rc.scratch());
    const size_t pack_floats = kernels::sgemm_packed_b_floats(s.k, s.n);
    auto one = [&](int64_t bi, bool threaded) {
      int64_t rem = bi, ao = 0, bo = 0;
      for (size_t i = br; i-- > 0;) {
        const int64_t idx = rem % s.batch[i];
        rem /= s.batch[i];
        ao += idx * astr[i];
        bo += idx * bstr[i];
      }
      float* pack = packs + static_cast<size_t>(bi) * pack_floats;
      kernels::sgemm_pack_b(b + bo, s.n, false, s.k, s.n, pack);
      float* yo = y + bi * s.m * s.n;
      if (threaded) {
        run_sgemm(rc, s.m, s.n, s.k, a + ao, s.k, pack, yo, s.n, ep);
      } else {
        const int64_t panels = (s.n + kernels::kSgemmNR - 1) / kernels::kSgemmNR;
        rc.kernels.sgemm(0, s.m, 0, panels, s.n, s.k, a + ao, s.k, pack, yo, s.n, ep);
      }
    };
    if (batches == 1) {
      one(0, true);
    } else {
      rc.parallel_for(static_cast<size_t>(batches), [&](size_t bi) { one(static_cast<int64_t>(bi), false); });
    }
  }

 private:
  bool has_packed_ = false;
  PackedMatrix packed_;
  std::vector<float> bias_;
  bool gelu_ = false;
  kernels::UnaryOp gelu_op_ = kernels::UnaryOp::kGelu;
};

class GemmImpl : public Op {
 public:
  GemmImpl(const Node& n, const Graph& g) {
    alpha_ = n.attr_f("alpha", 1.f);
    beta_ = n.attr_f("beta", 1.f);
    trans_a_ = n.attr_i("transA", 0) != 0;
    trans_b_ = n.attr_i("transB", 0) != 0;
    if (const Tensor* b = g.constant(n.inputs[1])) {
      const int64_t k = trans_b_ ? b->shape[1] : b->shape[0];
      const int64_t nn = trans_b_ ? b->shape[0] : b->shape[1];
      packed_ = pack_matrix(b->data<float>(), k, nn, trans_b_);
      has_packed_ = true;
      // A constant bias of one row becomes a per-column epilogue add (no pre-fill pass).
      if (n.has_input(2)) {
        if (const Tensor* c = g.constant(n.inputs[2])) {
          const int64_t cn = c->numel();
          const bool row = (c->shape.size() == 1 && cn == nn) || (c->shape.size() == 2 && c->shape[0] == 1 && c->shape[1] == nn);
          const bool scalar = cn == 1;
          if (row || scalar) {
            bias_col_.resize(static_cast<size_t>(nn));
            for (int64_t j = 0; j < nn; ++j) bias_col_[j] = beta_ * c->data<float>()[scalar ? 0 : j];
          }
        }
      }
    }
  }

  void prepare(const kernels::KernelTable& kt) override {
    if (has_packed_) packed_.use_bf16(kt);
  }
  std::string kernel_name() const override { return packed_.bf16_kernel ? packed_.bf16_kernel : ""; }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& a = *in[0];
    const Shape& b = *in[1];
    if (a.size() != 2 || b.size() != 2) throw Error("Gemm needs 2-D A and B, got A " + shape_str(a) + " B " + shape_str(b));
    const int64_t m = trans_a_ ? a[1] : a[0], k = trans_a_ ? a[0] : a[1];
    const int64_t kb = trans_b_ ? b[1] : b[0], n = trans_b_ ? b[0] : b[1];
    if (k != kb) throw Error("Gemm inner dimensions differ: A " + shape_str(a) + " B " + shape_str(b));
    Shape out{m, n};
    if (in.size() > 2 && in[2]) {
      const Shape bc = broadcast_shapes(*in[2], out);
      if (bc != out) throw Error("Gemm C " + shape_str(*in[2]) + " does not broadcast to " + shape_str(out));
    }
    return {out};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    size_t bytes = 0;
    const Shape& a = *in[0];
    const Shape& b = *in[1];
    if (trans_a_) bytes += static_cast<size_t>(shape_numel(a)) * sizeof(float);
    if (!has_packed_) {
      const int64_t k = trans_b_ ? b[1] : b[0], n = trans_b_ ? b[0] : b[1];
      bytes += kernels::sgemm_packed_b_floats(k, n) * sizeof(float);
    }
    return bytes;
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& sa = *in[0].shape;
    const Shape& os = *out[0].shape;
    const int64_t m = os[0], n = os[1];
    const int64_t k = trans_a_ ? sa[0] : sa[1];
    const float* a = in[0].as<float>();
    float* y = out[0].as<float>();
    char* scratch = static_cast<char*>(rc.scratch());
    if (trans_a_) {  // rare in exported models: transpose A into scratch rather than a second kernel
      float* at = reinterpret_cast<float*>(scratch);
      for (int64_t i = 0; i < m; ++i)
        for (int64_t kk = 0; kk < k; ++kk) at[i * k + kk] = a[kk * m + i];
      a = at;
      scratch += static_cast<size_t>(m * k) * sizeof(float);
    }
    const float* bp = nullptr;
    if (!has_packed_) {
      float* p = reinterpret_cast<float*>(scratch);
      kernels::sgemm_pack_b(in[1].as<float>(), trans_b_ ? k : n, trans_b_, k, n, p);
      bp = p;
    }
    kernels::SgemmEpilogue ep;
    ep.alpha = alpha_;
    const bool has_c = in.size() > 2 && in[2].present() && beta_ != 0.f;
    if (has_c && !bias_col_.empty()) {
      ep.bias_col = bias_col_.data();
    } else if (has_c) {
      prefill_c(in[2], m, n, y);
      ep.accumulate = true;
    }
    if (k == 0) {  // empty inner dimension: A*B is zeros
      if (!ep.accumulate) std::fill(y, y + m * n, 0.f);
      for (int64_t i = 0; i < m && ep.bias_col; ++i)
        for (int64_t j = 0; j < n; ++j) y[i * n + j] += ep.bias_col[j];
      return;
    }
    if (has_packed_) return run_sgemm(rc, m, a, k, packed_, y, n, ep);
    run_sgemm(rc, m, n, k, a, k, bp, y, n, ep);
  }

 private:
  // y = beta * broadcast(C) so the GEMM can accumulate into it.
  void prefill_c(const TensorRef& c, int64_t m, int64_t n, float* y) const {
    const Shape& cs = *c.shape;
    const float* cd = c.as<float>();
    const int64_t cm = cs.size() == 2 ? cs[0] : 1;
    const int64_t cn = cs.empty() ? 1 : cs.back();
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) y[i * n + j] = beta_ * cd[(cm == 1 ? 0 : i) * cn + (cn == 1 ? 0 : j)];
  }

  float alpha_ = 1.f, beta_ = 1.f;
  bool trans_a_ = false, trans_b_ = false;
  bool has_packed_ = false;
  PackedMatrix packed_;
  std::vector<float> bias_col_;
};

std::string check_matmul(const Node& n, const Graph& g) {
  return require_float_inputs(g, n);
}

std::string check_gemm(const Node& n, const Graph& g) {
  if (std::string r = require_float_inputs(g, n); !r.empty()) return r;
  if (const Tensor* b = g.constant(n.inputs[1]); b && b->shape.size() != 2) return "Gemm B is not 2-D";
  return "";
}

std::unique_ptr<Op> create_matmul(const Node& n, const Graph& g) {
  const Tensor* bias = n.has_input(2) ? g.constant(n.inputs[2]) : nullptr;
  if (n.has_input(2) && !bias) throw Error(n.label() + ": its folded bias is not a constant");
  return std::make_unique<MatMulImpl>(n, g.constant(n.inputs[1]), bias);
}
std::unique_ptr<Op> create_gemm(const Node& n, const Graph& g) { return std::make_unique<GemmImpl>(n, g); }

}  // namespace

std::vector<OpDef> matmul_op_defs() {
  return {
      {"MatMul", 1, 13, check_matmul, create_matmul},
      {"Gemm", 7, 13, check_gemm, create_gemm},
  };
}

}  // namespace optim
