// QAdd / QMul: the quantized form of a QDQ Add or Mul unit DequantizeLinear(a) OP DequantizeLinear(b)
// [-> Relu] -> QuantizeLinear (residual adds, squeeze-excite scales), built by rewrites/qdq_binary.cc: one
// pass over the int8 inputs, no float tensors, with the float operations of the unit in their order (so the
// result equals ONNX's bit for bit).
#include <algorithm>

#include "op.h"
#include "qadd_after.h"

namespace optim {
namespace {

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

class QBinaryImpl : public Op {
 public:
  QBinaryImpl(const Node& n, const Graph& g) {
    p_ = read_qbinary_params(n, g, {kQBinaryAScale, kQBinaryAZero, kQBinaryBScale, kQBinaryBZero, kQBinaryYScale, kQBinaryYZero},
                             is_u8(g, n.inputs[kQBinaryA]), is_u8(g, n.inputs[kQBinaryB]), is_u8(g, n.outputs[0]), "relu");
    p_.mul = n.op == "QMul";
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {broadcast_shapes(*in[kQBinaryA], *in[kQBinaryB])};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const Shape ys = broadcast_shapes(*in[kQBinaryA], *in[kQBinaryB]);
    if (*in[kQBinaryA] == *in[kQBinaryB] || rows_of(*in[kQBinaryA], *in[kQBinaryB], ys).len > 0) return 0;
    return 2 * static_cast<size_t>(shape_numel(ys));
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& ys = *out[0].shape;
    const uint8_t* a = static_cast<const uint8_t*>(in[kQBinaryA].data);
    const uint8_t* b = static_cast<const uint8_t*>(in[kQBinaryB].data);
    if (run_rows(rc, a, *in[kQBinaryA].shape, b, *in[kQBinaryB].shape, out[0])) return;
    if (*in[kQBinaryA].shape != ys || *in[kQBinaryB].shape != ys) {  // rare: broadcast both into scratch first
      uint8_t* sa = static_cast<uint8_t*>(rc.scratch());
      uint8_t* sb = sa + out[0].numel();
      broadcast_bytes(a, *in[kQBinaryA].shape, ys, sa);
      broadcast_bytes(b, *in[kQBinaryB].shape, ys, sb);
      a = sa;
      b = sb;
    }
    uint8_t* y = static_cast<uint8_t*>(out[0].data);
    parallel_chunks(rc, out[0].numel(), [&](int64_t s, int64_t e) { rc.kernels.qbinary(a + s, b + s, p_, y + s, e - s); });
  }

 private:
  // One side whole and the other repeating along leading dims over rows of at least 16 values (a
  // squeeze-excite scale [N, 1, 1, C] over an NHWC [N, H, W, C]): no broadcast copy of the whole tensor.
  static constexpr int64_t kTiledBytes = 4096;
  struct Rows {
    int64_t len = 0;  // values per row (the trailing dims both sides share); 0: not this case
    size_t lead = 0;  // the leading dims the rows are indexed by
  };
  static Rows rows_of(const Shape& as, const Shape& bs, const Shape& ys) {
    const bool a_whole = as == ys, b_whole = bs == ys;
    const Shape& rs = a_whole ? bs : as;  // the repeating side
    if (a_whole == b_whole || rs.size() != ys.size()) return {};
    Rows r{1, ys.size()};
    while (r.lead > 0 && rs[r.lead - 1] == ys[r.lead - 1]) r.len *= ys[--r.lead];
    return r.len >= 16 && r.lead > 0 ? r : Rows{};
  }

  // The sides swap when the whole one is b (+ and * commute exactly in float). False when not that case.
  bool run_rows(const RunContext& rc, const uint8_t* a, const Shape& as, const uint8_t* b, const Shape& bs,
                const TensorOut& out) const {
    const Shape& ys = *out.shape;
    const Rows rows = rows_of(as, bs, ys);
    if (rows.len == 0) return false;
    const bool a_whole = as == ys;
    const Shape& rs = a_whole ? bs : as;
    const size_t d = rows.lead;
    const int64_t row = rows.len;
    std::vector<int64_t> stride(d, 0);  // the repeating side's stride (in rows) per leading dim, 0 if repeated
    for (int64_t s = 1, i = static_cast<int64_t>(d) - 1; i >= 0; --i) {
      stride[static_cast<size_t>(i)] = rs[static_cast<size_t>(i)] == 1 ? 0 : s;
      s *= rs[static_cast<size_t>(i)];
    }
    kernels::QBinaryParams p = p_;
    if (!a_whole) {
      std::swap(p.a_u8, p.b_u8);
      std::swap(p.sa, p.sb);
      std::swap(p.za, p.zb);
      std::swap(a, b);
    }
    // Consecutive rows that read the same repeating row (a squeeze-excite scale over one image's H x W pixels):
    // that row copied `tiled` times goes to the kernel as one operand of `tiled` rows, so short rows (C = 32)
    // are not one kernel call each.
    int64_t same = 1;
    for (size_t i = d; i-- > 0 && stride[i] == 0;) same *= ys[i];
    const int64_t tiled = std::clamp<int64_t>(kTiledBytes / row, 1, same);
    uint8_t* y = static_cast<uint8_t*>(out.data);
    parallel_rows(rc, shape_numel(ys) / row, row, [&](int64_t r0, int64_t r1) {
      std::vector<uint8_t> copies(tiled > 1 ? static_cast<size_t>(tiled * row) : 0);
      int64_t copied_at = -1;  // the repeating row `copies` holds
      for (int64_t r = r0; r < r1;) {
        int64_t rest = r, at = 0;
        for (size_t i = d; i-- > 0;) {
          at += rest % ys[i] * stride[i];
          rest /= ys[i];
        }
        const int64_t n = std::min({r1 - r, tiled, same - r % same});  // rows reading that same row
        const uint8_t* other = b + at * row;
        if (n > 1) {
          if (copied_at != at)
            for (int64_t k = 0; k < tiled; ++k) std::copy(other, other + row, copies.data() + k * row);
          copied_at = at;
          other = copies.data();
        }
        rc.kernels.qbinary(a + r * row, other, p, y + r * row, n * row);
        r += n;
      }
    });
    return true;
  }

  kernels::QBinaryParams p_;
};

}  // namespace

kernels::QBinaryParams read_qbinary_params(const Node& n, const Graph& g, const size_t (&at)[6], bool a_u8, bool b_u8,
                                           bool y_u8, const char* relu_attr) {
  kernels::QBinaryParams p;
  p.a_u8 = a_u8;
  p.b_u8 = b_u8;
  p.y_u8 = y_u8;
  p.sa = float_scalar(g, n.inputs[at[0]], "a scale");
  p.za = zero_point(g, n.inputs[at[1]]);
  p.sb = float_scalar(g, n.inputs[at[2]], "b scale");
  p.zb = zero_point(g, n.inputs[at[3]]);
  p.sy = float_scalar(g, n.inputs[at[4]], "y scale");
  p.zy = zero_point(g, n.inputs[at[5]]);
  p.qmin = p.y_u8 ? 0 : -128;
  p.qmax = p.y_u8 ? 255 : 127;
  if (n.attr_i(relu_attr, 0)) p.qmin = std::max(p.qmin, p.zy);
  return p;
}

std::unique_ptr<Op> create_qbinary_unit(const Node& n, const Graph& g) { return std::make_unique<QBinaryImpl>(n, g); }

}  // namespace optim
