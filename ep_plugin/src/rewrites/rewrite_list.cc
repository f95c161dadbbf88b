#include "rewrite.h"

namespace optim {

const std::vector<Rewrite>& rewrite_list() {
  // Order: the QDQ patterns first, while the Q/DQ pairs that mark them are still in place (data movement
  // and concatenations, whose requantizations qdq_lut takes later, before units, so a MaxPool between two
  // units does not hide them; units before Adds, since a unit's bias Add belongs to it); then constant
  // DequantizeLinears left over become float weights; then float fusions (GELU, SiLU / HardSwish) before the
  // lookup tables, which take the quantized element-wise regions that remain (a SiLU's Mul of x by its own
  // sigmoid among them); the Muls of two tensors after those; the layout last, as it moves whatever the
  // others left, then transformer tokens seen as the channels-last maps they are, and the convolution epilogues
  // after it (they fold what follows a channels-last convolution;
  // the quantized Adds after integer units likewise, then their lookup tables, the DequantizeLinears before
  // global pools, then a QGemm's DequantizeLinear and bias Add);
  // then, on the final convolutions, depthwise ones (float, then int8 with their residual QAdds already in the
  // projections) and squeeze-excite gates (float, and int8 after the blocks) into the 1x1 ones that read them
  // and the Winograd choice;
  // float MatMuls' bias Adds (after the units, which take their own biases, and the GELU fusion, which
  // reads the Add's output by name); last, stems reading the partition's channels-first input (after every
  // choice that rules a convolution out).
  static const std::vector<Rewrite> list = {
      {"quantized_data_movement", keep_quantized_through_data_movement},
      {"qdq_concat", quantize_concat_inputs},
      {"qdq_units", fuse_qdq_units},
      {"qdq_adds", fuse_qdq_adds},
      {"fold_dequantize", fold_constant_dequantize},
      {"gelu", fuse_gelu},
      {"activations", fuse_activations},
      {"qdq_lookup_tables", fold_qdq_lookup_tables},
      {"qdq_muls", fuse_qdq_muls},
      {"channels_last", to_channels_last},
      {"token_grid", view_tokens_as_maps},
      {"conv_epilogues", fuse_conv_epilogues},
      {"qadd_fold", fold_qadds_into_units},
      {"lut_fold", fold_luts_into_units},
      {"dequantize_pool", fold_dequantize_into_pools},
      {"dequantize_fold", fold_dequantize_into_gemms},
      {"depthwise_pointwise", fold_depthwise_into_pointwise},
      {"qdepthwise_block", fold_qdepthwise_blocks},
      {"gate_fold", fold_gates_into_units},
      {"channel_scales", fold_channel_scales},
      {"winograd", choose_winograd},
      {"matmul_bias", fuse_matmul_bias},
      {"nchw_stem", read_nchw_in_stems},
  };
  return list;
}

void run_rewrites(Graph& g, RewriteContext& ctx) {
  for (const Rewrite& r : rewrite_list()) {
    const size_t n = r.run(g, ctx);
    if (n) ctx.applied[r.name] += n;
  }
}

}  // namespace optim
