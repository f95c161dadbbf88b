// QuantizeLinear (float32 -> uint8/int8) and DequantizeLinear (uint8/int8/int32 -> float32), per
// tensor or per axis, as ONNX defines them: q = saturate(round_half_to_even(x / scale) + zero_point),
// x = (q - zero_point) * scale. Scale and zero point are read from the inputs on each run.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "op.h"

namespace optim {
namespace {

// Per-element position along `axis`: index = (i / inner) % channels.
struct AxisLayout {
  int64_t channels = 1, inner = 1;
};

AxisLayout axis_layout(const Shape& x, const Shape& scale, int64_t axis_attr) {
  AxisLayout l;
  if (shape_numel(scale) == 1 && scale.size() <= 1) return l;  // per tensor
  if (scale.size() != 1) throw Error("scale " + shape_str(scale) + " is neither a scalar nor 1-D (blocked quantization is not supported)");
  const int64_t axis = normalize_axis(axis_attr, static_cast<int64_t>(x.size()), "quantization axis");
  l.channels = x[static_cast<size_t>(axis)];
  if (scale[0] != l.channels)
    throw Error("scale " + shape_str(scale) + " does not match the " + std::to_string(l.channels) + " entries of axis " +
                std::to_string(axis) + " of " + shape_str(x));
  for (size_t i = static_cast<size_t>(axis) + 1; i < x.size(); ++i) l.inner *= x[i];
  return l;
}

void check_zero_point(const std::vector<const Shape*>& in) {
  if (in.size() > 2 && in[2] && shape_numel(*in[2]) != shape_numel(*in[1]))
    throw Error("zero point " + shape_str(*in[2]) + " does not match scale " + shape_str(*in[1]));
}

// Runs fn(begin, end, channel) over runs of elements that share one scale/zero point: the whole
// tensor per tensor, blocks of `inner` elements per axis; in parallel chunks.
void for_each_run(const RunContext& rc, int64_t total, const AxisLayout& l,
                  const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  if (l.channels == 1) {
    parallel_chunks(rc, total, [&](int64_t b, int64_t e) { fn(b, e, 0); });
    return;
  }
  const int64_t blocks = l.inner ? total / l.inner : 0;
  parallel_chunks(rc, blocks, [&](int64_t b, int64_t e) {
    for (int64_t blk = b; blk < e; ++blk) fn(blk * l.inner, (blk + 1) * l.inner, blk % l.channels);
  });
}

int32_t zero_point_at(const TensorRef& zp, int64_t c) {
  if (!zp.present()) return 0;
  switch (zp.dtype) {
    case DType::kUint8: return zp.as<uint8_t>()[c];
    case DType::kInt8: return zp.as<int8_t>()[c];
    default: return zp.as<int32_t>()[c];
  }
}

// Quantize/DequantizeLinear's shapes: the output is the input's; scale and zero point per tensor or along axis.
class PerAxisOp : public Op {
 public:
  explicit PerAxisOp(int64_t axis) : axis_(axis) {}
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    axis_layout(*in[0], *in[1], axis_);
    check_zero_point(in);
    return {*in[0]};
  }

 protected:
  int64_t axis_;
};

class QuantizeImpl : public PerAxisOp {
 public:
  QuantizeImpl(int64_t axis, DType out) : PerAxisOp(axis), out_(out) {}
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const AxisLayout l = axis_layout(*in[0].shape, *in[1].shape, axis_);
    const float* x = in[0].as<float>();
    const float* scale = in[1].as<float>();
    const TensorRef zp = in.size() > 2 ? in[2] : TensorRef{};
    const bool to_u8 = out_ == DType::kUint8;
    uint8_t* q = static_cast<uint8_t*>(out[0].data);
    for_each_run(rc, in[0].numel(), l, [&](int64_t b, int64_t e, int64_t c) {
      rc.kernels.quantize(x + b, scale[c], zero_point_at(zp, c), to_u8, q + b, e - b);
    });
  }

 private:
  DType out_;
};

class DequantizeImpl : public PerAxisOp {
 public:
  DequantizeImpl(int64_t axis, DType in) : PerAxisOp(axis), in_(in) {}
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const AxisLayout l = axis_layout(*in[0].shape, *in[1].shape, axis_);
    const float* scale = in[1].as<float>();
    const TensorRef zp = in.size() > 2 ? in[2] : TensorRef{};
    float* y = out[0].as<float>();
    for_each_run(rc, in[0].numel(), l, [&](int64_t b, int64_t e, int64_t c) {
      const int32_t z = zero_point_at(zp, c);
      if (in_ == DType::kInt32) {  // biases: subtract in 64 bits, the values may reach 2^31
        const int32_t* q = in[0].as<int32_t>();
        for (int64_t i = b; i < e; ++i) y[i] = static_cast<float>(static_cast<int64_t>(q[i]) - z) * scale[c];
        return;
      }
      rc.kernels.dequantize(static_cast<const uint8_t*>(in[0].data) + b, in_ == DType::kUint8, z, scale[c], y + b, e - b);
    });
  }

 private:
  DType in_;
};

std::string check_scale_and_block(const Node& n, const Graph& g) {
  if (n.attr_i("block_size", 0) != 0) return n.op + " with block_size (blocked quantization) is not supported";
  const ValueInfo* s = g.value(n.inputs[1]);
  if (s && s->dtype != DType::kFloat32) return n.op + " scale is " + std::string(dtype_name(s->dtype)) + ", not float32";
  return "";
}

DType value_dtype(const Graph& g, const std::string& name) {
  const ValueInfo* v = g.value(name);
  return v ? v->dtype : DType::kUndefined;
}

std::string check_quantize(const Node& n, const Graph& g) {
  if (std::string r = check_scale_and_block(n, g); !r.empty()) return r;
  if (std::string r = require_float(g, n, 0); !r.empty()) return r;
  if (n.attr_i("saturate", 1) != 1) return "QuantizeLinear saturate=0 is not supported";
  const int64_t precision = n.attr_i("precision", 0);  // 0: the scale's type; 1: float32
  if (precision != 0 && precision != 1) return "QuantizeLinear precision other than float32 is not supported";
  const DType out = value_dtype(g, n.outputs[0]);
  if (out != DType::kUint8 && out != DType::kInt8)
    return std::string("QuantizeLinear to ") + dtype_name(out) + " is not supported (uint8 and int8 are)";
  return "";
}

std::string check_dequantize(const Node& n, const Graph& g) {
  if (std::string r = check_scale_and_block(n, g); !r.empty()) return r;
  const DType in = value_dtype(g, n.inputs[0]);
  if (in != DType::kUint8 && in != DType::kInt8 && in != DType::kInt32)
    return std::string("DequantizeLinear from ") + dtype_name(in) + " is not supported (uint8, int8 and int32 are)";
  if (value_dtype(g, n.outputs[0]) != DType::kFloat32) return "DequantizeLinear to a type other than float32 is not supported";
  return "";
}

std::unique_ptr<Op> create_quantize(const Node& n, const Graph& g) {
  return std::make_unique<QuantizeImpl>(n.attr_i("axis", 1), value_dtype(g, n.outputs[0]));
}
std::unique_ptr<Op> create_dequantize(const Node& n, const Graph& g) {
  return std::make_unique<DequantizeImpl>(n.attr_i("axis", 1), value_dtype(g, n.inputs[0]));
}

}  // namespace

std::vector<OpDef> quantize_op_defs() {
  return {
      // Later versions add types (float8, int4, ...), blocked quantization and precision/output_dtype
      // attributes; the checks refuse every form other than float32 <-> uint8/int8(/int32).
      {"QuantizeLinear", 10, 25, check_quantize, create_quantize},
      {"DequantizeLinear", 10, 25, check_dequantize, create_dequantize},
  };
}

}  // namespace optim
