// QLut: y = table[x] for a quantized element-wise region folded by rewrites/qdq_lookup_tables.cc (x uint8 or int8,
// the table its 256 output bytes in the order of x's values: int8 x indexes at x + 128).
#include "op.h"

namespace optim {
namespace {

class QLutImpl : public Op {
 public:
  QLutImpl(const Node& n, const Graph& g) {
    const Tensor* t = g.constant(n.inputs[1]);
    if (!t || t->dtype != DType::kUint8 || t->numel() != 256) throw Error(n.label() + ": the table is not 256 bytes");
    std::copy(t->bytes.begin(), t->bytes.end(), table_);
    const ValueInfo* x = g.value(n.inputs[0]);
    if (!x || (x->dtype != DType::kUint8 && x->dtype != DType::kInt8)) throw Error(n.label() + ": x is not uint8/int8");
    flip_ = x->dtype == DType::kInt8 ? 0x80 : 0;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override { return {*in[0]}; }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const uint8_t* x = static_cast<const uint8_t*>(in[0].data);
    uint8_t* y = static_cast<uint8_t*>(out[0].data);
    parallel_chunks(rc, in[0].numel(), [&](int64_t s, int64_t e) { rc.kernels.lut8(x + s, flip_, table_, y + s, e - s); });
  }

 private:
  uint8_t table_[256] = {};
  uint8_t flip_ = 0;
};

}  // namespace

std::unique_ptr<Op> create_qlut(const Node& n, const Graph& g) { return std::make_unique<QLutImpl>(n, g); }

}  // namespace optim
