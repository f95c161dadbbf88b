// Element-wise float32 ops: Add/Sub/Mul/Div with numpy broadcasting, unary activations, Clip.
#include <algorithm>
#include <cmath>
#include <limits>

#include "op.h"

namespace optim {
namespace {

using kernels::BinaryOp;
using kernels::UnaryOp;

class BinaryOpImpl : public Op {
 public:
  explicit BinaryOpImpl(BinaryOp op) : op_(op) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {broadcast_shapes(*in[0], *in[1])};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& os = *out[0].shape;
    const int64_t total = shape_numel(os);
    if (total == 0) return;
    const float* a = in[0].as<float>();
    const float* b = in[1].as<float>();
    float* y = out[0].as<float>();
    const int64_t na = in[0].numel(), nb = in[1].numel();
    const auto& k = rc.kernels;
    // Fast paths: equal shapes, or one side a single value.
    if (na == total && nb == total) {
      parallel_chunks(rc, total, [&](int64_t s, int64_t e) { k.binary_vv(op_, a + s, b + s, y + s, e - s); });
      return;
    }
    if (na == total && nb == 1) {
      parallel_chunks(rc, total, [&](int64_t s, int64_t e) { k.binary_vs(op_, a + s, b[0], y + s, e - s); });
      return;
    }
    if (na == 1 && nb == total) {
      parallel_chunks(rc, total, [&](int64_t s, int64_t e) { k.binary_sv(op_, a[0], b + s, y + s, e - s); });
      return;
    }
    run_broadcast(rc, *in[0].shape, *in[1].shape, os, a, b, y);
  }

 private:
  // General broadcast: the innermost dims where each side is either fully present or fully broadcast
  // form one contiguous run handled by a vector kernel; the outer dims are walked with strides.
  void run_broadcast(const RunContext& rc, const Shape& sa, const Shape& sb, const Shape& so, const float* a,
                     const float* b, float* y) const {
    const size_t r = so.size();
    Shape pa(r, 1), pb(r, 1);
    std::copy(sa.begin(), sa.end(), pa.begin() + (r - sa.size()));
    std::copy(sb.begin(), sb.end(), pb.begin() + (r - sb.size()));
    // Merge inner dims with the same broadcast pattern.
    int64_t inner = 1;
    size_t d = r;
    int pattern = -1;  // bit0: a broadcast, bit1: b broadcast
    while (d > 0) {
      const size_t i = d - 1;
      if (so[i] == 1) { --d; continue; }
      const int p = (pa[i] == 1 ? 1 : 0) | (pb[i] == 1 ? 2 : 0);
      if (pattern == -1) pattern = p;
      if (p != pattern) break;
      inner *= so[i];
      --d;
    }
    if (pattern == -1) pattern = 0;
    const size_t outer_rank = d;
    std::vector<int64_t> astride(outer_rank), bstride(outer_rank);
    int64_t as_ = pattern & 1 ? 1 : inner, bs_ = pattern & 2 ? 1 : inner;
    for (size_t i = outer_rank; i-- > 0;) {
      astride[i] = pa[i] == 1 ? 0 : as_;
      bstride[i] = pb[i] == 1 ? 0 : bs_;
      as_ *= pa[i];
      bs_ *= pb[i];
    }
    int64_t outer = 1;
    for (size_t i = 0; i < outer_rank; ++i) outer *= so[i];
    const auto& k = rc.kernels;
    const BinaryOp op = op_;
    auto body = [&](int64_t o0, int64_t o1) {
      for (int64_t o = o0; o < o1; ++o) {
        int64_t rem = o, ao = 0, bo = 0;
        for (size_t i = outer_rank; i-- > 0;) {
          const int64_t idx = rem % so[i];
          rem /= so[i];
          ao += idx * astride[i];
          bo += idx * bstride[i];
        }
        float* yo = y + o * inner;
        switch (pattern) {
          case 0: k.binary_vv(op, a + ao, b + bo, yo, inner); break;
          case 1: k.binary_sv(op, a[ao], b + bo, yo, inner); break;
          case 2: k.binary_vs(op, a + ao, b[bo], yo, inner); break;
          default: {
            float v;
            k.binary_vv(op, a + ao, b + bo, &v, 1);
            std::fill(yo, yo + inner, v);
          }
        }
      }
    };
    parallel_rows(rc, outer, inner, body);
  }

  BinaryOp op_;
};

class UnaryOpImpl : public Op {
 public:
  explicit UnaryOpImpl(UnaryOp op) : op_(op) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {*in[0]}; }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    parallel_chunks(rc, in[0].numel(), [&](int64_t s, int64_t e) { rc.kernels.unary(op_, x + s, y + s, e - s); });
  }

 private:
  UnaryOp op_;
};

// Clip bounds: attributes before opset 11, optional scalar inputs 1 and 2 after (read on each run, so
// they may be constants or computed upstream).
class ClipImpl : public Op {
 public:
  ClipImpl(float lo, float hi) : lo_(lo), hi_(hi) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i] && shape_numel(*in[i]) != 1)
        throw Error(std::string("Clip ") + (i == 1 ? "min" : "max") + " " + shape_str(*in[i]) + " is not a scalar");
    return {*in[0]};
  }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const float lo = in.size() > 1 && in[1].present() ? in[1].as<float>()[0] : lo_;
    const float hi = in.size() > 2 && in[2].present() ? in[2].as<float>()[0] : hi_;
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    parallel_chunks(rc, in[0].numel(), [&](int64_t s, int64_t e) { rc.kernels.clip(x + s, y + s, e - s, lo, hi); });
  }

 private:
  float lo_, hi_;
};

// HardSigmoid, HardSwish, LeakyRelu: activations with parameters (alpha, beta).
class ActivationImpl : public Op {
 public:
  ActivationImpl(kernels::ActivationOp op, kernels::ActivationParams p) : op_(op), p_(p) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {*in[0]}; }
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const float* x = in[0].as<float>();
    float* y = out[0].as<float>();
    parallel_chunks(rc, in[0].numel(), [&](int64_t s, int64_t e) { rc.kernels.activation(op_, p_, x + s, y + s, e - s); });
  }

 private:
  kernels::ActivationOp op_;
  kernels::ActivationParams p_;
};

std::unique_ptr<Op> create_activation(const Node& n, const Graph&) {
  using kernels::ActivationOp;
  if (n.op == "Silu") return std::make_unique<ActivationImpl>(ActivationOp::kSilu, kernels::ActivationParams{});
  if (n.op == "LeakyRelu") return std::make_unique<ActivationImpl>(ActivationOp::kLeakyRelu, kernels::ActivationParams{n.attr_f("alpha", 0.01f), 0.f});
  // HardSwish has no attributes (alpha 1/6, beta 1/2); the fusion of x * HardSigmoid(x) keeps the HardSigmoid's.
  const bool swish = n.op == "HardSwish";
  const kernels::ActivationParams p{n.attr_f("alpha", swish ? 1.f / 6.f : 0.2f), n.attr_f("beta", 0.5f)};
  return std::make_unique<ActivationImpl>(swish ? ActivationOp::kHardSwish : ActivationOp::kHardSigmoid, p);
}

BinaryOp binary_kind(const std::string& op) {
  if (op == "Add") return BinaryOp::kAdd;
  if (op == "Sub") return BinaryOp::kSub;
  if (op == "Mul") return BinaryOp::kMul;
  return BinaryOp::kDiv;
}

UnaryOp unary_kind(const Node& n) {
  const std::string& op = n.op;
  if (op == "Relu") return UnaryOp::kRelu;
  if (op == "Sigmoid") return UnaryOp::kSigmoid;
  if (op == "Tanh") return UnaryOp::kTanh;
  if (op == "Erf") return UnaryOp::kErf;
  if (op == "Sqrt") return UnaryOp::kSqrt;
  if (op == "Exp") return UnaryOp::kExp;
  if (op == "Neg") return UnaryOp::kNeg;
  if (op == "Abs") return UnaryOp::kAbs;
  return n.attr_s("approximate", "none") == "tanh" ? UnaryOp::kGeluTanh : UnaryOp::kGelu;
}

std::string check_binary(const Node& n, const Graph& g) {
  return require_float_inputs(g, n);
}

std::string check_unary(const Node& n, const Graph& g) {
  if (n.op == "Gelu") {
    const std::string approx = n.attr_s("approximate", "none");
    if (approx != "none" && approx != "tanh") return "Gelu approximate='" + approx + "' is not supported";
  }
  return require_float(g, n, 0);
}

std::string check_clip(const Node& n, const Graph& g) {
  return require_float_inputs(g, n);
}

std::unique_ptr<Op> create_binary(const Node& n, const Graph&) {
  return std::make_unique<BinaryOpImpl>(binary_kind(n.op));
}
std::unique_ptr<Op> create_unary(const Node& n, const Graph&) { return std::make_unique<UnaryOpImpl>(unary_kind(n)); }
std::unique_ptr<Op> create_clip(const Node& n, const Graph&) {
  const float inf = std::numeric_limits<float>::infinity();
  if (n.since_version < 11) return std::make_unique<ClipImpl>(n.attr_f("min", -inf), n.attr_f("max", inf));
  return std::make_unique<ClipImpl>(-inf, inf);
}

}  // namespace

// x * sigmoid(x), built by rewrites/activations.cc (internal_ops.cc).
std::unique_ptr<Op> create_silu(const Node& n, const Graph& g) { return create_activation(n, g); }

std::vector<OpDef> elementwise_op_defs() {
  return {
      {"Add", 7, 14, check_binary, create_binary},
      {"Sub", 7, 14, check_binary, create_binary},
      {"Mul", 7, 14, check_binary, create_binary},
      {"Div", 7, 14, check_binary, create_binary},
      {"Relu", 6, 14, check_unary, create_unary},
      {"Sigmoid", 6, 13, check_unary, create_unary},
      {"Tanh", 6, 13, check_unary, create_unary},
      {"Erf", 9, 13, check_unary, create_unary},
      {"Sqrt", 6, 13, check_unary, create_unary},
      {"Exp", 6, 13, check_unary, create_unary},
      {"Neg", 6, 13, check_unary, create_unary},
      {"Abs", 6, 13, check_unary, create_unary},
      {"Gelu", 20, 20, check_unary, create_unary},
      {"Clip", 6, 13, check_clip, create_clip},
      {"HardSigmoid", 6, 22, check_unary, create_activation},
      {"HardSwish", 14, 22, check_unary, create_activation},
      {"LeakyRelu", 6, 16, check_unary, create_activation},
  };
}

}  // namespace optim
