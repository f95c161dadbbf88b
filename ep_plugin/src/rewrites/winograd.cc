// Chooses Winograd F(2x2, 3x3) (ops/conv_winograd.cc) for the float channels-last convolutions it suits:
// 3x3, stride 1, no dilation, one group, at most kMaxChannels input and output channels. It does 2.25x
// fewer multiply-adds (Zen 4, 2 threads: 64->64 at 56x56 in 0.63 ms, the CPU EP 1.36; Intel Xeon, AVX2 kernels,
// two 512->512 at 7x7, batch 8: 19.3 ms, direct 28.1); the transformed weights take 16/9 the memory of the
// direct ones.
// Marks the NhwcConv with algorithm="winograd" (its step label says so). EP option winograd=0 keeps every
// convolution direct, for comparison. Runs after conv_epilogues.
#include "rewrite.h"

#include "../ops/conv_common.h"
#include "../ops/conv_winograd.h"

namespace optim {

namespace {
constexpr int64_t kMaxChannels = 1024;  // wider: U (16 x Cin x Cout floats, 64 MB at 1024) outgrows the caches
}  // namespace

size_t choose_winograd(Graph& g, RewriteContext& ctx) {
  if (!ctx.winograd) return 0;
  size_t chosen = 0;
  for (Node& conv : g.nodes) {
    if (!is_internal_op(&conv, "NhwcConv") || conv.has_attr("algorithm")) continue;
    const Tensor* w = conv.has_input(1) ? g.constant(conv.inputs[1]) : nullptr;
    if (!w || w->dtype != DType::kFloat32 || (w->shape.size() != 3 && w->shape.size() != 4)) continue;
    const ConvGeometry cg(conv, w->shape);
    if (!WinogradF23::suits(cg)) continue;
    if (cg.cin_g > kMaxChannels || cg.cout > kMaxChannels) {
      ctx.refuse("winograd", conv, std::to_string(cg.cin_g) + " input and " + std::to_string(cg.cout) +
                                       " output channels: more than " + std::to_string(kMaxChannels) +
                                       " stay direct (the transformed weights would outgrow the caches)");
      continue;
    }
    conv.set_attr_s("algorithm", "winograd");
    ++chosen;
  }
  return chosen;
}

}  // namespace optim
