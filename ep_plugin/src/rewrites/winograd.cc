// Chooses Winograd F(2x2, 3x3) for the channels-last convolutions it suits: 3x3, stride 1, no dilation, one
// group, at most kMaxChannels input and output channels.
// - float (ops/conv_winograd.cc): 2.25x fewer multiply-adds (Zen 4, 2 threads: 64->64 at 56x56 in 0.63 ms, the
//   CPU EP 1.36; Intel Xeon, AVX2 kernels, two 512->512 at 7x7, batch 8: 19.3 ms, direct 28.1); the transformed
//   weights take 16/9 the memory of the direct ones.
// - integer units (ops/qconv_winograd.cc, exact, on int16 pairs) unless the table's u8 x s8 kernel sums quads
//   in one instruction (VNNI: denser than Winograd on pairs), with at least kMinIntegerChannels input channels
//   (the stems keep their channels-first path, rewrites/nchw_stem.cc) and sums that fit int32
//   (QWinogradForm::sums_fit_int32). AVX2, 2 threads, ResNet-18 int8 batch 8: 1.40x with 8-bit weights, 1.17x
//   with 7-bit ones (over the u8 x s8 pair kernel).
// Marks the node with algorithm="winograd" (its step label says so). EP option winograd=0 keeps every
// convolution direct, for comparison. Runs after conv_epilogues.
#include "rewrite.h"

#include "../ops/conv_common.h"
#include "../ops/conv_winograd.h"
#include "../ops/qconv_block.h"
#include "../ops/qconv_winograd.h"

namespace optim {

namespace {
constexpr int64_t kMaxChannels = 1024;  // wider: U (16 x Cin x Cout floats, 64 MB at 1024) outgrows the caches
constexpr int64_t kMinIntegerChannels = 8;

// The 4-D constant weights of a channels-last convolution (float or integer unit), or null.
const Tensor* conv_weights(const Node& conv, const Graph& g, bool integer) {
  const size_t index = integer ? size_t{kQGemmW} : size_t{1};
  const Tensor* w = conv.has_input(index) ? g.constant(conv.inputs[index]) : nullptr;
  if (!w || (w->shape.size() != 3 && w->shape.size() != 4)) return nullptr;
  return integer || w->dtype == DType::kFloat32 ? w : nullptr;
}

// Whether integer unit `conv` runs it (a refusal when it would not for a reason worth telling).
bool integer_unit_suits(const Node& conv, const Graph& g, const ConvGeometry& cg, RewriteContext& ctx) {
  if (is_qconv_block(conv) || has_stage(conv, Stage::kGate) || conv.attr_i(kNchwInputAttr, 0)) return false;
  const QConvUnit unit(conv, g);
  // Direct u8 x s8 quads beat Winograd on pairs where each instruction sums four products (VNNI); AVX2's quads
  // (vpmaddubsw, then vpmaddwd: 7-bit weights) do not: there Winograd's 16 pair products per 2x2 pixels win.
  if (!ctx.kernels) return false;
  if (!ctx.kernels->conv_gemm_u8s8.traits.int16_pairs && !QGemmForm::u8s8_weights(unit, *ctx.kernels).empty()) return false;
  if (cg.cin_g < kMinIntegerChannels) {
    ctx.refuse("winograd", conv, std::to_string(cg.cin_g) + " input channels: fewer than " +
                                     std::to_string(kMinIntegerChannels) + " stay direct");
    return false;
  }
  if (!QWinogradForm::sums_fit_int32(unit)) {
    ctx.refuse("winograd", conv, "its transformed weights could take an int32 sum out of range: stays direct");
    return false;
  }
  return true;
}

}  // namespace

size_t choose_winograd(Graph& g, RewriteContext& ctx) {
  if (!ctx.winograd) return 0;
  size_t chosen = 0;
  for (Node& conv : g.nodes) {
    const bool integer = is_internal_op(&conv, "NhwcQConv");
    if (!(integer || is_internal_op(&conv, "NhwcConv")) || conv.has_attr("algorithm")) continue;
    const Tensor* w = conv_weights(conv, g, integer);
    if (!w) continue;
    const ConvGeometry cg(conv, w->shape);
    if (!WinogradF23::suits(cg)) continue;
    if (cg.cin_g > kMaxChannels || cg.cout > kMaxChannels) {
      ctx.refuse("winograd", conv, std::to_string(cg.cin_g) + " input and " + std::to_string(cg.cout) +
                                       " output channels: more than " + std::to_string(kMaxChannels) +
                                       " stay direct (the transformed weights would outgrow the caches)");
      continue;
    }
    if (integer && !integer_unit_suits(conv, g, cg, ctx)) continue;
    conv.set_attr_s("algorithm", "winograd");
    ++chosen;
  }
  return chosen;
}

}  // namespace optim
