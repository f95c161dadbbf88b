// ToNhwc / ToNchw: the layout changes the NHWC rewrite (rewrites/channels_last.cc) puts at the edges of a
// channels-last region: [N, C, spatial...] <-> [N, spatial..., C], any fixed-size element type. Per image
// it is a C x S <-> S x C transpose, done in cache-sized blocks over the pool.
#include <algorithm>
#include <cstring>

#include "transpose_blocks.h"

namespace optim {
namespace {

class LayoutImpl : public Op {
 public:
  explicit LayoutImpl(bool to_nhwc) : to_nhwc_(to_nhwc) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.size() < 3) throw Error("X " + shape_str(x) + " has no spatial dimension to move channels around");
    Shape y = x;
    if (to_nhwc_) {
      y.erase(y.begin() + 1);
      y.push_back(x[1]);
    } else {
      y.pop_back();
      y.insert(y.begin() + 1, x.back());
    }
    return {y};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& x = *in[0].shape;
    const int64_t images = x[0], c = to_nhwc_ ? x[1] : x.back();
    if (shape_numel(x) == 0) return;
    const int64_t spatial = shape_numel(x) / (images * c);
    // To NHWC each image is C rows of S values turned into S rows of C; back, the other way.
    transpose_batched(rc, in[0].data, out[0].data, images, to_nhwc_ ? c : spatial, to_nhwc_ ? spatial : c,
                      dtype_size(in[0].dtype));
  }

 private:
  bool to_nhwc_;
};

}  // namespace

std::unique_ptr<Op> create_to_nhwc(const Node&, const Graph&) { return std::make_unique<LayoutImpl>(true); }
std::unique_ptr<Op> create_to_nchw(const Node&, const Graph&) { return std::make_unique<LayoutImpl>(false); }

}  // namespace optim
