// The ops OptimEP builds itself while compiling a partition (domain optim.internal): integer QDQ units
// (rewrites/qdq_units.cc), attention's quantized softmax (QSoftmax), the quantized linear Resize (QResize), the channels-last forms of the layout rewrite
// (rewrites/channels_last.cc), fused activations (rewrites/activations.cc), attention over a key / value cache
// (rewrites/group_attention.cc) and weight-only projections of one input (rewrites/matmul_nbits_siblings.cc). A model can never claim
// them; the rewrites that create them check what they need.
#include <map>

#include "op.h"
#include "qgemm.h"

namespace optim {

using Create = std::unique_ptr<Op> (*)(const Node&, const Graph&);

std::unique_ptr<Op> create_qgemm_unit(const Node&, const Graph&);   // qgemm.cc
std::unique_ptr<Op> create_qconv_unit(const Node&, const Graph&);   // qconv.cc
std::unique_ptr<Op> create_qbinary_unit(const Node&, const Graph&);  // qbinary.cc
std::unique_ptr<Op> create_qmatmul_unit(const Node&, const Graph&); // qmatmul.cc
std::unique_ptr<Op> create_qsoftmax(const Node&, const Graph&);     // qsoftmax.cc
std::unique_ptr<Op> create_nhwc_conv(const Node&, const Graph&);    // conv_nhwc_op.cc
std::unique_ptr<Op> create_nhwc_qconv(const Node&, const Graph&);   // qconv_block.cc
std::unique_ptr<Op> create_to_nhwc(const Node&, const Graph&);      // layout.cc
std::unique_ptr<Op> create_to_nchw(const Node&, const Graph&);
std::unique_ptr<Op> create_nhwc_maxpool(const Node&, const Graph&); // pool_nhwc.cc
std::unique_ptr<Op> create_nhwc_avgpool(const Node&, const Graph&);
std::unique_ptr<Op> create_nhwc_gap(const Node&, const Graph&);
std::unique_ptr<Op> create_nhwc_gmp(const Node&, const Graph&);
std::unique_ptr<Op> create_silu(const Node&, const Graph&);         // elementwise.cc
std::unique_ptr<Op> create_qlut(const Node&, const Graph&);         // qlut.cc
std::unique_ptr<Op> create_nhwc_resize(const Node&, const Graph&);  // resize.cc
std::unique_ptr<Op> create_qresize(const Node&, const Graph&);
std::unique_ptr<Op> create_nhwc_qresize(const Node&, const Graph&);
std::unique_ptr<Op> create_group_attention(const Node&, const Graph&);  // group_attention.cc
std::unique_ptr<Op> create_rotary(const Node&, const Graph&);           // rotary.cc
std::unique_ptr<Op> make_matmul_nbits_group(const Node&, const Graph&);  // matmul_nbits_group.cc

std::unique_ptr<Op> create_internal_op(const Node& node, const Graph& graph) {
  static const std::map<std::string, Create> ops = {
      {"QGemm", create_qgemm_unit},           {"QConv", create_qconv_unit},
      {"QAdd", create_qbinary_unit},          {"QMul", create_qbinary_unit},
      {"QMatMul", create_qmatmul_unit},     {"QSoftmax", create_qsoftmax},
      {"NhwcConv", create_nhwc_conv},         {"NhwcQConv", create_nhwc_qconv},
      {"ToNhwc", create_to_nhwc},             {"ToNchw", create_to_nchw},
      {"NhwcMaxPool", create_nhwc_maxpool},   {"NhwcAveragePool", create_nhwc_avgpool},
      {"NhwcGlobalAveragePool", create_nhwc_gap}, {"NhwcGlobalMaxPool", create_nhwc_gmp},
      {"Silu", create_silu},                  {"QLut", create_qlut},
      {"NhwcResize", create_nhwc_resize},     {"QResize", create_qresize},
      {"NhwcQResize", create_nhwc_qresize},   {"GroupAttention", create_group_attention},
      {"Rotary", create_rotary},
      {"MatMulNBitsGroup", make_matmul_nbits_group},
  };
  auto it = ops.find(node.op);
  if (it == ops.end()) throw Error("internal op " + node.op + " is unknown");
  return it->second(node, graph);
}

}  // namespace optim
