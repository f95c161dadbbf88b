// NhwcQConv (qconv_nhwc.h): the integer channels-last convolution unit.
#include "qconv_nhwc.h"

#include "qconv_winograd.h"

namespace optim {

namespace {

// The form of unit u (node n, whose gate stage, if any, `gate` read).
std::unique_ptr<QConvForm> choose_qconv_form(const Node& n, const QConvUnit& u, GateBefore gate) {
  if (u.nchw_input && (u.cg.group != 1 || u.cg.spatial != 2 || gate))
    throw Error(n.label() + ": only a plain 2-D convolution reads its input channels-first");
  if (gate) {
    if (!u.cg.is_pointwise() || u.x_dtype != DType::kUint8)
      throw Error(n.label() + ": a gate folded into a unit that is not a 1x1 convolution of uint8");
    return std::make_unique<QGatedForm>(u, std::move(gate));
  }
  if (n.attr_s("algorithm", "") == "winograd") return std::make_unique<QWinogradForm>(u);  // rewrites/winograd.cc
  if (!u.nchw_input && u.cg.cin_g == 1 && u.cg.cout == u.cg.group && u.depthwise_exact())
    return std::make_unique<QDepthwiseForm>(u);
  return std::make_unique<QGemmForm>(u);
}

}  // namespace

NhwcQConv::NhwcQConv(const Node& n, const Graph& g)
    : unit_(n, g), form_(choose_qconv_form(n, unit_, GateBefore(n, g))), label_(n.label()) {}

size_t NhwcQConv::scratch_bytes(const std::vector<const Shape*>& in) const {
  return form_->scratch_bytes(unit_.layout(*in[0]));
}

void NhwcQConv::run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const {
  const NhwcConvLayout l = unit_.layout(*in[0].shape);
  if (l.n == 0 || l.pixels() == 0) return;
  // A folded QAdd goes over each block of output pixels the form finished, while it is in cache.
  QAddRows other;
  if (unit_.after) {
    const TensorRef& o = in[unit_.after.other_input()];
    other = {static_cast<const uint8_t*>(o.data), unit_.after.other_stride(*o.shape, *out[0].shape)};
  }
  form_->run(rc, l, in, static_cast<uint8_t*>(out[0].data), other);
}

const QGemmForm& NhwcQConv::gemm() const {
  if (const auto* f = dynamic_cast<const QGemmForm*>(form_.get())) return *f;
  throw Error(label_ + ": not a dense 1x1 convolution (it runs " + form_->kernel_name() + ")");
}

}  // namespace optim
