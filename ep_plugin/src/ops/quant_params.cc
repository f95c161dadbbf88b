// The quantization parameters of integer units and their scalar constants (quant_params.h).
#include "quant_params.h"

#include <algorithm>

namespace optim {

float float_scalar(const Graph& g, const std::string& name, const char* what) {
  const Tensor* t = g.constant(name);
  if (!t || t->dtype != DType::kFloat32 || t->numel() != 1) throw Error(std::string(what) + " is not a float32 scalar constant");
  return t->data<float>()[0];
}

int32_t zero_point(const Graph& g, const std::string& name) {
  if (name.empty()) return 0;
  const Tensor* t = g.constant(name);
  if (!t || t->numel() != 1) throw Error("zero point '" + name + "' is not a scalar constant");
  return int8_at(*t, 0);
}

float QuantParams::w_scale(int64_t channel) const {
  return w_scales->data<float>()[w_scales->numel() == 1 ? 0 : channel];
}

int32_t QuantParams::w_zero(int64_t channel) const {
  return w_zeros ? int8_at(*w_zeros, w_zeros->numel() == 1 ? 0 : channel) : 0;
}

float QuantParams::out_scale(int64_t channel) const { return x_scale * w_scale(channel) / y_scale; }

std::vector<float> QuantParams::out_scales(int64_t channels) const {
  std::vector<float> s(static_cast<size_t>(channels));
  for (int64_t c = 0; c < channels; ++c) s[static_cast<size_t>(c)] = out_scale(c);
  return s;
}

std::vector<int16_t> QuantParams::centered_rows(const Tensor& w, int64_t channels, int64_t k) const {
  std::vector<int16_t> rows(static_cast<size_t>(channels * k));
  for (int64_t c = 0; c < channels; ++c)
    for (int64_t i = 0; i < k; ++i) rows[static_cast<size_t>(c * k + i)] = static_cast<int16_t>(int8_at(w, c * k + i) - w_zero(c));
  return rows;
}

std::vector<float> QuantParams::bias(int64_t channels) const {
  std::vector<float> b = bias_values.size() == 1 ? std::vector<float>(static_cast<size_t>(channels), bias_values[0]) : bias_values;
  for (float& v : b) v /= y_scale;
  return b;
}

QuantParams read_quant_params(const Node& n, const Graph& g) {
  QuantParams qp;
  const ValueInfo* x = g.value(n.inputs[n.attr_i(kQuantizeInputAttr, 0) ? kQGemmXZero : kQGemmX]);
  qp.x_dtype = x ? x->dtype : DType::kUndefined;
  if (qp.x_dtype != DType::kUint8 && qp.x_dtype != DType::kInt8) throw Error("x is not uint8/int8");
  qp.x_zero = zero_point(g, n.inputs[kQGemmXZero]);
  qp.x_scale = float_scalar(g, n.inputs[kQGemmXScale], "x scale");
  qp.w_scales = g.constant(n.inputs[kQGemmWScale]);
  if (!qp.w_scales || qp.w_scales->dtype != DType::kFloat32) throw Error("weight scale is not a float32 constant");
  if (!n.inputs[kQGemmWZero].empty()) qp.w_zeros = g.constant(n.inputs[kQGemmWZero]);
  if (!n.inputs[kQGemmBias].empty()) {
    const Tensor* b = g.constant(n.inputs[kQGemmBias]);
    if (!b || b->dtype != DType::kFloat32) throw Error("bias is not a float32 constant");
    qp.bias_values.assign(b->data<float>(), b->data<float>() + b->numel());
  }
  kernels::QgemmEpilogue& ep = qp.epilogue;
  const ValueInfo* y = g.value(n.outputs[0]);
  ep.out = y && y->dtype == DType::kInt8 ? kernels::QuantOut::kInt8 : kernels::QuantOut::kUint8;
  qp.y_scale = float_scalar(g, n.inputs[kQGemmYScale], "y scale");
  ep.out_zero = zero_point(g, n.inputs[kQGemmYZero]);
  ep.qmin = ep.out == kernels::QuantOut::kInt8 ? -128 : 0;
  ep.qmax = ep.out == kernels::QuantOut::kInt8 ? 127 : 255;
  if (n.attr_i("relu", 0)) ep.qmin = std::max(ep.qmin, ep.out_zero);  // Relu: nothing below real 0
  return qp;
}

}  // namespace optim
