#include "rewrite.h"

#include <set>

namespace optim {

namespace {

// Each rewrite's `after` entries name rewrites earlier in the list: Error naming the first that is not.
void check_order(const std::vector<Rewrite>& list) {
  std::set<std::string> done;
  for (const Rewrite& r : list) {
    for (const auto& [before, why] : r.after)
      if (!done.count(before))
        throw Error(std::string("rewrite list: ") + r.name + " must run after " + before + " (" + why + ")");
    done.insert(r.name);
  }
}

std::vector<Rewrite> checked(std::vector<Rewrite> list) {
  check_order(list);
  return list;
}

}  // namespace

const std::vector<Rewrite>& rewrite_list() {
  // The QDQ patterns first, while the Q/DQ pairs that mark them are in place; float fusions once constant
  // DequantizeLinears are weights; the channels-last layout after every rewrite that makes nodes it moves; the
  // folds into convolutions and units after it, each after the folds whose results it takes in; stems last.
  static const std::vector<Rewrite> list = checked({
      {"quantized_data_movement", keep_quantized_through_data_movement},
      {"qdq_concat", quantize_concat_inputs},
      {"qdq_units", fuse_qdq_units,
       {{"quantized_data_movement", "a MaxPool between two units must not hide their Q/DQ pairs"},
        {"qdq_concat", "a Concat's inputs keep their own quantization first"}}},
      {"qdq_adds", fuse_qdq_adds, {{"qdq_units", "a unit's bias Add belongs to the unit"}}},
      {"qdq_softmax", fuse_qdq_softmax, {{"qdq_units", "the scores' QMatMul takes the QuantizeLinear before them first"}}},
      {"constant_dequantize", fold_constant_dequantize,
       {{"qdq_units", "the units take their constant weights' DequantizeLinears"},
        {"qdq_adds", "a QAdd takes its operands' DequantizeLinears"}}},
      {"gelu", fuse_gelu, {{"constant_dequantize", "GELU's constants must be plain weights to be recognised"}}},
      {"activations", fuse_activations, {{"constant_dequantize", "the same, for SiLU / HardSwish"}}},
      {"group_attention", fuse_group_attention, {{"constant_dequantize", "the scores' scale must be a plain constant"}}},
      {"matmul_nbits_siblings", group_matmul_nbits_siblings},
      {"rms_norm", fuse_rms_norm, {{"constant_dequantize", "the norm's weight must be a plain constant"}}},
      {"rotary", fuse_rotary},
      {"qdq_lookup_tables", fold_qdq_lookup_tables,
       {{"qdq_concat", "tables take the requantizations the Concat rewrite leaves"},
        {"gelu", "the float fusions take their patterns first; tables take what remains"},
        {"activations", "the same"}}},
      {"qdq_muls", fuse_qdq_muls, {{"qdq_lookup_tables", "a SiLU's Mul of x by its own sigmoid belongs to a table"}}},
      {"channels_last", to_channels_last,
       {{"qdq_units", "the layout moves the units"}, {"qdq_adds", "and the QAdds"}, {"qdq_muls", "and the QMuls"},
        {"qdq_lookup_tables", "and the tables"}, {"gelu", "and the fused activations"}, {"activations", "the same"}}},
      {"token_grid", view_tokens_as_maps, {{"channels_last", "transformer tokens are seen as its channels-last maps"}}},
      {"conv_epilogues", fuse_conv_epilogues, {{"channels_last", "it folds what follows a channels-last convolution"}}},
      {"qadd_fold", fold_qadds_into_units,
       {{"channels_last", "it pairs NhwcQConv units with channels-last QAdds"}, {"qdq_adds", "it folds QAdds"}}},
      {"lut_fold", fold_luts_into_units, {{"qadd_fold", "a unit's table looks up its QAdd's result"}}},
      {"dequantize_pool", fold_dequantize_into_pools, {{"channels_last", "it folds into channels-last pools"}}},
      {"dequantize_fold", fold_dequantize_into_gemms, {{"qadd_fold", "a QGemm takes a QAdd or a DequantizeLinear, the QAdd first"}}},
      {"depthwise_pointwise", fold_depthwise_into_pointwise,
       {{"conv_epilogues", "the projection brings its residual Add and the depthwise its activation"}}},
      {"qdepthwise_block", fold_qdepthwise_blocks,
       {{"qadd_fold", "the projection brings its residual QAdd"}, {"lut_fold", "the units bring their tables"}}},
      {"gate_fold", fold_gates_into_units, {{"qdepthwise_block", "a gated unit is never a block"}}},
      {"channel_scales", fold_channel_scales,
       {{"depthwise_pointwise", "a 1x1 convolution that took a depthwise one takes no gate"}}},
      {"winograd", choose_winograd,
       {{"conv_epilogues", "the choice is made on final convolutions"}, {"depthwise_pointwise", "the same"},
        {"channel_scales", "the same"}}},
      {"matmul_bias", fuse_matmul_bias,
       {{"qdq_units", "units take their own biases"}, {"gelu", "the GELU fusion reads the Add's output by name"}}},
      {"nchw_stem", read_nchw_in_stems,
       {{"winograd", "after every choice that rules a convolution out"}, {"channel_scales", "the same"},
        {"depthwise_pointwise", "the same"}, {"qdepthwise_block", "the same"}, {"gate_fold", "the same"},
        {"conv_epilogues", "the same"}}},
  });
  return list;
}

void run_rewrites(Graph& g, RewriteContext& ctx) {
  for (const Rewrite& r : rewrite_list()) {
    const size_t n = r.run(g, ctx);
    if (n) ctx.applied[r.name] += n;
  }
}

}  // namespace optim
