// QSoftmax: DequantizeLinear(x) [* or / a scalar] [+ mask] -> Softmax over the last axis -> QuantizeLinear in one
// pass (rewrites/qdq_softmax.cc). Each row of x is dequantized into a float row in cache, scaled, masked,
// normalized and quantized with the kernels the unfused nodes use, in their order: the same bytes, without four
// float tensors of batch x heads x queries x keys written and read again.
#include <algorithm>

#include "op.h"
#include "quant_params.h"

namespace optim {
namespace {

// Inputs, as the rewrite writes them.
enum : size_t { kX = 0, kXScale, kXZero, kMask, kYScale, kYZero };

class QSoftmaxImpl : public Op {
 public:
  QSoftmaxImpl(const Node& n, const Graph& g) {
    x_scale_ = float_scalar(g, n.inputs[kXScale], "the scores' scale");
    x_zero_ = n.has_input(kXZero) ? zero_point(g, n.inputs[kXZero]) : 0;
    y_scale_ = float_scalar(g, n.inputs[kYScale], "the weights' scale");
    y_zero_ = n.has_input(kYZero) ? zero_point(g, n.inputs[kYZero]) : 0;
    x_u8_ = is_u8(g, n.inputs[kX]);
    y_u8_ = is_u8(g, n.outputs[0]);
    const std::string op = n.attr_s("scale_op", "");
    if (!op.empty() && op != "Mul" && op != "Div") throw Error(n.label() + ": scale_op " + op + " is neither Mul nor Div");
    scaled_ = !op.empty();
    scale_op_ = op == "Div" ? kernels::BinaryOp::kDiv : kernels::BinaryOp::kMul;
    factor_ = n.attr_f("scale", 1.f);
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[kX];
    if (x.empty()) throw Error("the scores are a scalar: there is no last axis to normalize");
    if (in.size() > kMask && in[kMask]) {
      const Shape& mask = *in[kMask];
      bool fits = mask.size() <= x.size();
      for (size_t i = 0; fits && i < mask.size(); ++i) {
        const int64_t md = mask[mask.size() - 1 - i];
        fits = md == 1 || md == x[x.size() - 1 - i];
      }
      if (!fits) throw Error("mask " + shape_str(mask) + " does not broadcast into the scores " + shape_str(x));
    }
    return {x};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& xs = *in[kX].shape;
    const int64_t len = xs.back(), rows = len ? shape_numel(xs) / len : 0;
    if (rows == 0) return;
    const uint8_t* x = static_cast<const uint8_t*>(in[kX].data);
    uint8_t* y = static_cast<uint8_t*>(out[0].data);  // one byte per element
    const MaskRows mask = in.size() > kMask && in[kMask].present() ? MaskRows(*in[kMask].shape, xs) : MaskRows();
    const float* m = mask ? in[kMask].as<float>() : nullptr;
    // Blocks of rows through each element-wise kernel at once (a row of 128 keys is too short to pay for six
    // kernel calls); the softmax itself per row.
    const int64_t block = std::max<int64_t>(1, kBlockElements / len);
    parallel_rows(rc, rows, len, [&](int64_t r0, int64_t r1) {
      thread_local std::vector<float> buffer;  // each worker's float rows
      buffer.resize(static_cast<size_t>(std::min(block, r1 - r0) * len));
      float* v = buffer.data();
      for (int64_t b0 = r0; b0 < r1; b0 += block) {
        const int64_t b1 = std::min(r1, b0 + block), n = (b1 - b0) * len;
        rc.kernels.dequantize(x + b0 * len, x_u8_, x_zero_, x_scale_, v, n);
        if (scaled_) rc.kernels.binary_vs(scale_op_, v, factor_, v, n);
        if (mask) add_mask(rc, mask, m, b0, b1, len, v);
        for (int64_t r = 0; r < b1 - b0; ++r) rc.kernels.softmax(v + r * len, v + r * len, len);
        rc.kernels.quantize(v, y_scale_, y_zero_, y_u8_, y + b0 * len, n);
      }
    });
  }

 private:
  static constexpr int64_t kBlockElements = 4096;  // 16 KiB of float rows: in L1 from one kernel to the next

  class MaskRows;
  // v (rows [b0, b1) of the scores) += their mask rows: one call over the block where the mask rows follow each other.
  static void add_mask(const RunContext& rc, const MaskRows& mask, const float* m, int64_t b0, int64_t b1, int64_t len,
                       float* v) {
    bool follow = !mask.per_row();
    for (int64_t r = b0 + 1; follow && r < b1; ++r) follow = mask.offset(r) == mask.offset(r - 1) + len;
    if (follow) {
      rc.kernels.binary_vv(kernels::BinaryOp::kAdd, v, m + mask.offset(b0), v, (b1 - b0) * len);
      return;
    }
    for (int64_t r = b0; r < b1; ++r) {
      const float* mr = m + mask.offset(r);
      float* row = v + (r - b0) * len;
      if (mask.per_row()) rc.kernels.binary_vs(kernels::BinaryOp::kAdd, row, mr[0], row, len);
      else rc.kernels.binary_vv(kernels::BinaryOp::kAdd, row, mr, row, len);
    }
  }

  // Where row r of the scores finds its mask values: the mask's offset for each row index, by the mask's strides
  // over the scores' leading dims (0 where it broadcasts); its last dim either the row's length or 1.
  class MaskRows {
   public:
    MaskRows() = default;
    MaskRows(const Shape& mask, const Shape& x) : active_(true) {
      const size_t rank = x.size(), lead = rank - mask.size();
      auto dim = [&](size_t i) { return i < lead ? int64_t{1} : mask[i - lead]; };
      per_row_ = dim(rank - 1) == 1;
      int64_t stride = dim(rank - 1);
      for (size_t i = rank - 1; i-- > 0;) {
        dims_.insert(dims_.begin(), x[i]);
        strides_.insert(strides_.begin(), dim(i) == 1 ? 0 : stride);
        stride *= dim(i);
      }
    }
    explicit operator bool() const { return active_; }
    bool per_row() const { return per_row_; }
    int64_t offset(int64_t r) const {
      int64_t off = 0;
      for (size_t i = dims_.size(); i-- > 0;) {
        off += (r % dims_[i]) * strides_[i];
        r /= dims_[i];
      }
      return off;
    }

   private:
    bool active_ = false, per_row_ = false;
    std::vector<int64_t> dims_, strides_;  // the scores' leading dims and the mask's strides along them
  };

  float x_scale_ = 1.f, y_scale_ = 1.f, factor_ = 1.f;
  int32_t x_zero_ = 0, y_zero_ = 0;
  bool x_u8_ = true, y_u8_ = true, scaled_ = false;
  kernels::BinaryOp scale_op_ = kernels::BinaryOp::kMul;
};

}  // namespace

std::unique_ptr<Op> create_qsoftmax(const Node& n, const Graph& g) { return std::make_unique<QSoftmaxImpl>(n, g); }

}  // namespace optim
