// optim.internal MatMulNBitsGroup (rewrites/matmul_nbits_siblings.cc): MatMulNBits nodes reading one A (a layer's
// query / key / value projections, its gate and up projections) as one step. With int8 activations A is quantized
// once for all of them and their columns share one round of tasks on the pool: a decode step's small GEMVs no longer
// each pay the pool's wake-up and their own quantization of A. Inputs: A, then per part B, scales, zero points, bias
// ("" when absent); attributes: the parts' common K, bits, block_size, accuracy_level, their N in `Ns` and their
// node names in `part_names`. One output per part.
#include <algorithm>

#include "matmul_nbits.h"

namespace optim {
namespace {

class MatMulNBitsGroup : public Op {
 public:
  MatMulNBitsGroup(const Node& n, const Graph& g) : k_(n.attr_i("K", 0)) {
    const std::vector<int64_t> ns = n.attr_ints("Ns");
    const std::vector<std::string> names = n.attr_strings("part_names");
    if (ns.empty() || n.inputs.size() != 1 + 4 * ns.size() || names.size() != ns.size() || n.outputs.size() != ns.size())
      throw Error(n.label() + ": inputs, Ns, part_names and outputs do not describe the same parts");
    for (size_t i = 0; i < ns.size(); ++i) {
      Node part;
      part.name = names[i];
      part.op = "MatMulNBits";
      part.domain = kMicrosoftDomain;
      part.attrs = n.attrs;
      part.set_attr_i("N", ns[i]);
      part.inputs = {n.inputs[0], n.inputs[1 + 4 * i], n.inputs[2 + 4 * i], n.inputs[3 + 4 * i], "", n.inputs[4 + 4 * i]};
      parts_.push_back(create_matmul_nbits_part(part, g));
    }
  }

  void prepare(const kernels::KernelTable& kt) override {
    q8_ = true;
    for (auto& p : parts_) {
      p->prepare(kt);
      q8_ = q8_ && p->q8();
    }
  }
  std::string kernel_name() const override { return parts_[0]->kernel_name(); }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    std::vector<Shape> out;
    for (const auto& p : parts_) out.push_back(p->infer({in[0]})[0]);
    return out;
  }
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    size_t most = 0;
    for (const auto& p : parts_) most = std::max(most, p->scratch_bytes({in[0]}));
    return most;
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    if (!q8_) {  // a part with float activations: each runs as its own node would
      for (size_t i = 0; i < parts_.size(); ++i) parts_[i]->run(rc, {in[0]}, {out[i]});
      return;
    }
    const int64_t m = in[0].shape->empty() ? 0 : shape_numel(*in[0].shape) / k_;
    if (m == 0) return;
    const Q8Rows rows = parts_[0]->quantize_rows(rc, in[0].as<float>(), m);  // one K and block for all
    std::vector<kernels::MatMulNBitsQ8Args> args;
    std::vector<int64_t> per_task, first_task{0};
    for (size_t i = 0; i < parts_.size(); ++i) {
      args.push_back(parts_[i]->q8_args(rows, out[i].as<float>()));
      per_task.push_back(parts_[i]->columns_per_task(m));
      first_task.push_back(first_task.back() + (parts_[i]->n() + per_task.back() - 1) / per_task.back());
    }
    rc.parallel_for(static_cast<size_t>(first_task.back()), [&](size_t t) {
      const size_t i = static_cast<size_t>(std::upper_bound(first_task.begin(), first_task.end(), static_cast<int64_t>(t)) - first_task.begin() - 1);
      const int64_t n0 = (static_cast<int64_t>(t) - first_task[i]) * per_task[i];
      rc.kernels.matmul_nbits_q8(0, m, n0, std::min(parts_[i]->n(), n0 + per_task[i]), args[i]);
    });
  }

 private:
  int64_t k_;
  std::vector<std::unique_ptr<MatMulNBitsPart>> parts_;
  bool q8_ = false;
};

}  // namespace

std::unique_ptr<Op> make_matmul_nbits_group(const Node& n, const Graph& g) { return std::make_unique<MatMulNBitsGroup>(n, g); }

}  // namespace optim
