// QDQ units as integer ops: DequantizeLinear(x), DequantizeLinear(W const) -> MatMul | Gemm | Conv (+ bias)
// [-> Relu] -> QuantizeLinear becomes one internal QGemm or QConv node (exact int32 accumulation,
// requantized in the epilogue), and DequantizeLinear(a) x DequantizeLinear(b) -> MatMul -> QuantizeLinear of
// two activations one QMatMul. A unit that does not match stays as it is and runs in float, which is still
// exactly what ONNX defines; its reason is a refusal (the placement report's float_units).
#include "rewrite.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "../graph_matcher.h"
#include "../ops/qgemm.h"
#include "qdq_checks.h"

namespace optim {

size_t fuse_qdq_units(Graph& g, RewriteContext& ctx) {
  Matcher m(g, ctx.outputs);
  auto refuse = [&](const Node& n, const std::string& why) { ctx.refuse("qdq_units", n, why); };
  std::vector<Node> added;
  const size_t original = g.nodes.size();
  for (size_t i = 0; i < original; ++i) {
    if (m.dead().count(i)) continue;
    const Node& mm = g.nodes[i];
    const bool gemm = mm.op == "Gemm", conv = mm.op == "Conv";
    if ((mm.op != "MatMul" && !gemm && !conv) || !(mm.domain.empty() || mm.domain == "ai.onnx") || mm.inputs.size() < 2) continue;
    if (gemm && (mm.attr_i("transA", 0) != 0 || mm.attr_f("alpha", 1.f) != 1.f || mm.attr_f("beta", 1.f) != 1.f)) {
      refuse(mm, "Gemm with transA or alpha/beta other than 1");
      continue;
    }
    const bool trans_b = gemm && mm.attr_i("transB", 0) != 0;
    const Node* dx = m.produced_by(mm.inputs[0], "DequantizeLinear");
    const Node* dw = m.produced_by(mm.inputs[1], "DequantizeLinear");
    if (!dx || !dw) {
      refuse(mm, "its inputs are not both DequantizeLinear outputs");
      continue;
    }
    if (!activation_dq_ok(g, *dx)) {
      refuse(mm, "input A is not a uint8/int8 tensor dequantized with a constant per-tensor scale and zero point");
      continue;
    }
    // MatMul of two quantized activations (attention's Q x K^T and P x V): an integer unit too, B packed per run.
    auto matrix_rank = [&](const std::string& v) {  // both operands at least 2-D (no vector products)
      const ValueInfo* vi = g.value(v);
      return vi && vi->has_shape && vi->shape.size() >= 2;
    };
    const bool act_act = mm.op == "MatMul" && !g.constant(dw->inputs[0]) && activation_dq_ok(g, *dw) &&
                         matrix_rank(dx->inputs[0]) && matrix_rank(dw->inputs[0]);
    if (!act_act && (conv ? !conv_weight_dq_ok(g, *dw) : !weight_dq_ok(g, *dw, trans_b))) {
      refuse(mm, conv ? "its weights are not a constant 1-D/2-D int8/uint8 kernel dequantized per tensor or per output channel"
                      : "input B is not a constant 2-D int8/uint8 weight dequantized per tensor or per output column");
      continue;
    }
    if (conv && mm.attr_s("auto_pad", "NOTSET") != "NOTSET" && mm.attr_s("auto_pad", "NOTSET") != "VALID" &&
        mm.attr_s("auto_pad", "NOTSET") != "SAME_UPPER" && mm.attr_s("auto_pad", "NOTSET") != "SAME_LOWER") {
      refuse(mm, "auto_pad is not one OptimEP implements");
      continue;
    }
    const Tensor* w = g.constant(dw->inputs[0]);
    const int64_t n = act_act ? -1 : conv ? w->shape[0] : trans_b ? w->shape[0] : w->shape[1];  // -1: no bias

    // Walk forward: [bias Add] [Relu] QuantizeLinear, each the sole reader of the value before it.
    std::vector<float> bias;
    const Node* bias_dq = nullptr;
    std::vector<const Node*> chain;
    std::string value = mm.outputs[0];
    if ((gemm || conv) && mm.has_input(2)) {
      if (!bias_values(g, m, mm.inputs[2], n, &bias)) {
        refuse(mm, "its bias is not a float32 or dequantized int32 constant of one value per output channel");
        continue;
      }
      bias_dq = m.produced_by(mm.inputs[2], "DequantizeLinear");
    }
    const Node* next = m.sole_reader(value);
    if (next && !gemm && !conv && !act_act && next->op == "Add" && bias.empty()) {
      const std::string& other = next->inputs[0] == value ? next->inputs[1] : next->inputs[0];
      if (bias_values(g, m, other, n, &bias)) {
        bias_dq = m.produced_by(other, "DequantizeLinear");
        chain.push_back(next);
        value = next->outputs[0];
        next = m.sole_reader(value);
      }
    }
    bool relu = false;
    if (next && next->op == "Relu") {
      relu = true;
      chain.push_back(next);
      value = next->outputs[0];
      next = m.sole_reader(value);
    }
    if (!next || next->op != "QuantizeLinear") {
      refuse(mm, "its result is not read by exactly one QuantizeLinear (through an optional bias Add and Relu) "
                 "inside the partition");
      continue;
    }
    const DType out_type = dtype_of(g, next->outputs[0]);
    if (!is_float_scalar(g, next->inputs[1]) || !is_int8_scalar_or_absent(g, *next, 2) ||
        (out_type != DType::kUint8 && out_type != DType::kInt8)) {
      refuse(mm, "its QuantizeLinear is not per tensor to uint8/int8 with constant scale and zero point");
      continue;
    }

    Node q;
    q.name = mm.name;  // errors name the user's MatMul/Gemm
    q.op = conv ? "QConv" : act_act ? "QMatMul" : "QGemm";
    q.domain = kInternalDomain;
    q.since_version = 1;
    q.inputs.assign(kQGemmInputCount, "");
    q.inputs[kQGemmX] = dx->inputs[0];
    q.inputs[kQGemmXScale] = dx->inputs[1];
    q.inputs[kQGemmXZero] = dx->has_input(2) ? dx->inputs[2] : "";
    q.inputs[kQGemmW] = dw->inputs[0];
    q.inputs[kQGemmWScale] = dw->inputs[1];
    q.inputs[kQGemmWZero] = dw->has_input(2) ? dw->inputs[2] : "";
    if (!bias.empty()) {
      Tensor bt;
      bt.dtype = DType::kFloat32;
      bt.shape = {static_cast<int64_t>(bias.size())};
      bt.bytes.resize(bias.size() * sizeof(float));
      std::copy(bias.begin(), bias.end(), reinterpret_cast<float*>(bt.bytes.data()));
      q.inputs[kQGemmBias] = g.add_constant(mm.name + "/optim_bias_f32", std::move(bt));
    }
    q.inputs[kQGemmYScale] = next->inputs[1];
    q.inputs[kQGemmYZero] = next->has_input(2) ? next->inputs[2] : "";
    q.outputs = {next->outputs[0]};
    if (conv) q.attrs = mm.attrs;  // kernel_shape, strides, pads, dilations, group, auto_pad
    q.set_attr_i("transB", trans_b ? 1 : 0);
    q.set_attr_i("relu", relu ? 1 : 0);
    retire_pattern(m, mm, chain, next, {dw, dx, bias_dq});
    added.push_back(std::move(q));
  }
  return commit_added(g, m, added);
}

}  // namespace optim
