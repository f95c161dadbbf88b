// QAdd: the quantized form of a QDQ Add unit DequantizeLinear(a) + DequantizeLinear(b) [-> Relu] ->
// QuantizeLinear, built by qdq_fusion.cc: one pass over the int8 inputs, no float tensors, with the
// float operations of the unit in their order (so the result equals ONNX's bit for bit).
#include <algorithm>

#include "op.h"
#include "qgemm.h"

namespace optim {
namespace {

float float_const(const Graph& g, const std::string& name) {
  const Tensor* t = g.constant(name);
  if (!t || t->dtype != DType::kFloat32 || t->numel() != 1) throw Error("'" + name + "' is not a float32 scalar constant");
  return t->data<float>()[0];
}

int32_t zero_const(const Graph& g, const std::string& name) {
  if (name.empty()) return 0;
  const Tensor* t = g.constant(name);
  if (!t || t->numel() != 1) throw Error("zero point '" + name + "' is not a scalar constant");
  return t->dtype == DType::kUint8 ? t->data<uint8_t>()[0] : t->data<int8_t>()[0];
}

bool is_u8(const Graph& g, const std::string& v) {
  const ValueInfo* vi = g.value(v);
  return !vi || vi->dtype == DType::kUint8;
}

// Copies one-byte elements of `src` (shape `from`) broadcast to shape `to` into dst. The trailing dims
// that `from` shares with `to` are one contiguous block copied whole; only the leading part is
// indexed (a scalar operand is a plain fill).
void broadcast_bytes(const uint8_t* src, const Shape& from, const Shape& to, uint8_t* dst) {
  const int64_t n = shape_numel(to);
  if (shape_numel(from) == 1) {
    std::fill(dst, dst + n, src[0]);
    return;
  }
  const size_t r = to.size(), lead = r - from.size();
  auto from_dim = [&](size_t i) { return i < lead ? int64_t{1} : from[i - lead]; };
  size_t split = r;  // dims [split, r) equal in both: one contiguous block
  int64_t block = 1;
  while (split > 0 && from_dim(split - 1) == to[split - 1]) {
    --split;
    block *= to[split];
  }
  std::vector<int64_t> stride(split, 0);  // stride in src (in blocks) per leading output dim, 0 if broadcast
  int64_t st = 1;
  for (size_t i = split; i-- > 0;) {
    if (from_dim(i) != 1) stride[i] = st;
    st *= from_dim(i);
  }
  const int64_t blocks = block ? n / block : 0;
  for (int64_t o = 0; o < blocks; ++o) {
    int64_t rem = o, off = 0;
    for (size_t i = split; i-- > 0;) {
      off += (rem % to[i]) * stride[i];
      rem /= to[i];
    }
    std::copy(src + off * block, src + (off + 1) * block, dst + o * block);
  }
}

class QAddImpl : public Op {
 public:
  QAddImpl(const Node& n, const Graph& g) {
    p_.a_u8 = is_u8(g, n.inputs[kQAddA]);
    p_.b_u8 = is_u8(g, n.inputs[kQAddB]);
    p_.y_u8 = is_u8(g, n.outputs[0]);
    p_.sa = float_const(g, n.inputs[kQAddAScale]);
    p_.sb = float_const(g, n.inputs[kQAddBScale]);
    p_.sy = float_const(g, n.inputs[kQAddYScale]);
    p_.za = zero_const(g, n.inputs[kQAddAZero]);
    p_.zb = zero_const(g, n.inputs[kQAddBZero]);
    p_.zy = zero_const(g, n.inputs[kQAddYZero]);
    p_.qmin = p_.y_u8 ? 0 : -128;
    p_.qmax = p_.y_u8 ? 255 : 127;
    if (n.attr_i("relu", 0)) p_.qmin = std::max(p_.qmin, p_.zy);
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {broadcast_shapes(*in[kQAddA], *in[kQAddB])};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    if (*in[kQAddA] == *in[kQAddB]) return 0;
    return 2 * static_cast<size_t>(shape_numel(broadcast_shapes(*in[kQAddA], *in[kQAddB])));
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& ys = *out[0].shape;
    const uint8_t* a = static_cast<const uint8_t*>(in[kQAddA].data);
    const uint8_t* b = static_cast<const uint8_t*>(in[kQAddB].data);
    if (*in[kQAddA].shape != ys || *in[kQAddB].shape != ys) {  // rare: broadcast both into scratch first
      uint8_t* sa = static_cast<uint8_t*>(rc.scratch());
      uint8_t* sb = sa + out[0].numel();
      broadcast_bytes(a, *in[kQAddA].shape, ys, sa);
      broadcast_bytes(b, *in[kQAddB].shape, ys, sb);
      a = sa;
      b = sb;
    }
    uint8_t* y = static_cast<uint8_t*>(out[0].data);
    parallel_chunks(rc, out[0].numel(), [&](int64_t s, int64_t e) { rc.kernels.qadd(a + s, b + s, p_, y + s, e - s); });
  }

 private:
  kernels::QAddParams p_;
};

std::unique_ptr<Op> create_qadd(const Node& n, const Graph& g) { return std::make_unique<QAddImpl>(n, g); }

}  // namespace

std::unique_ptr<Op> create_qadd_unit(const Node& n, const Graph& g) { return create_qadd(n, g); }

}  // namespace optim
