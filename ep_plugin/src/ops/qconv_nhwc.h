// NhwcQConv: the integer QDQ convolution unit (qconv.cc's QConv) on channels-last tensors (conv_nhwc.h), built by
// the layout rewrite: the unit's parameters (QConvUnit) and the form that computes it (qconv_nhwc_forms.h: dense
// GEMM on u8 x s8 quads or int16 pairs, Winograd on int16 pairs (qconv_winograd.h), gated 1x1, depthwise), chosen once
// from the node.
// The int8 depthwise blocks (qconv_block.h) run a unit's pieces on one block of pixels at a time.
#pragma once

#include <memory>

#include "qconv_nhwc_forms.h"

namespace optim {

class NhwcQConv : public Op {
 public:
  NhwcQConv(const Node& n, const Graph& g);
  NhwcQConv(const NhwcQConv&) = delete;  // the form refers to unit_
  NhwcQConv& operator=(const NhwcQConv&) = delete;
  void prepare(const kernels::KernelTable& kt) override { form_->prepare(kt); }
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {nhwc_conv_output_shape(unit_.cg, unit_.channels_last(*in[0]))};
  }
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override;
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override;
  std::string kernel_name() const override { return form_->kernel_name(); }

  // --- for the blocks (qconv_block.cc), after prepare ---
  const ConvGeometry& geometry() const { return unit_.cg; }
  DType input_type() const { return unit_.x_dtype; }
  int32_t input_zero() const { return unit_.x_zero; }
  int32_t output_zero() const { return unit_.ep.out_zero; }
  bool has_qadd() const { return static_cast<bool>(unit_.after); }
  // The folded QAdd's other operand's row stride (QAddAfter::other_stride).
  int64_t qadd_other_stride(const Shape& other, const Shape& y) const { return unit_.after.other_stride(other, y); }
  // The depthwise form, or null when the unit runs another.
  const QDepthwiseForm* depthwise() const { return dynamic_cast<const QDepthwiseForm*>(form_.get()); }
  // The dense GEMM form (1x1 rows: QGemmForm::pointwise_rows); throws Error when the unit runs another.
  const QGemmForm& gemm() const;

 private:
  QConvUnit unit_;
  std::unique_ptr<QConvForm> form_;
  std::string label_;
};

}  // namespace optim
