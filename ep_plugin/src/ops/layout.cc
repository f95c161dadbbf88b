// ToNhwc / ToNchw: the layout changes the NHWC rewrite (rewrites/nhwc_layout.cc) puts at the edges of a
// channels-last region: [N, C, spatial...] <-> [N, spatial..., C], any fixed-size element type. Per image
// it is a C x S <-> S x C transpose, done in cache-sized blocks over the pool.
#include <algorithm>
#include <cstring>

#include "op.h"

namespace optim {
namespace {

constexpr int64_t kBlock = 64;

// Per image, dst (cols x rows) = transpose of src (rows x cols), in kBlock x kBlock blocks over the pool;
// 4-byte and 1-byte elements through the kernel table, others here.
template <typename T>
void transpose_images(const RunContext& rc, const T* src, T* dst, int64_t images, int64_t rows, int64_t cols) {
  const int64_t rb = (rows + kBlock - 1) / kBlock, cb = (cols + kBlock - 1) / kBlock;
  const int64_t blocks = images * rb * cb;
  const int64_t per_task = std::max<int64_t>(1, kParallelChunk / (kBlock * kBlock));
  const int64_t tasks = (blocks + per_task - 1) / per_task;
  rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
    const int64_t b1 = std::min(blocks, (static_cast<int64_t>(t) + 1) * per_task);
    for (int64_t b = static_cast<int64_t>(t) * per_task; b < b1; ++b) {
      const int64_t img = b / (rb * cb), r = b % (rb * cb) / cb * kBlock, c = b % cb * kBlock;
      const int64_t nr = std::min(rows - r, kBlock), nc = std::min(cols - c, kBlock);
      const T* s = src + img * rows * cols + r * cols + c;
      T* d = dst + img * rows * cols + c * rows + r;
      if constexpr (sizeof(T) == 4) {
        rc.kernels.transpose32(s, cols, d, rows, nr, nc);
      } else if constexpr (sizeof(T) == 1) {
        rc.kernels.transpose8(s, cols, d, rows, nr, nc);
      } else {
        for (int64_t j = 0; j < nc; ++j)
          for (int64_t i = 0; i < nr; ++i) d[j * rows + i] = s[i * cols + j];
      }
    }
  });
}

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
    const int64_t spatial = images * c ? shape_numel(x) / (images * c) : 0;
    if (shape_numel(x) == 0) return;
    // To NHWC each image is C rows of S values turned into S rows of C; back, the other way.
    const int64_t rows = to_nhwc_ ? c : spatial, cols = to_nhwc_ ? spatial : c;
    if (rows == 1 || cols == 1) {
      std::memcpy(out[0].data, in[0].data, static_cast<size_t>(shape_numel(x)) * dtype_size(in[0].dtype));
      return;
    }
    switch (dtype_size(in[0].dtype)) {
      case 1: return transpose_images(rc, in[0].as<uint8_t>(), out[0].as<uint8_t>(), images, rows, cols);
      case 2: return transpose_images(rc, in[0].as<uint16_t>(), out[0].as<uint16_t>(), images, rows, cols);
      case 4: return transpose_images(rc, in[0].as<uint32_t>(), out[0].as<uint32_t>(), images, rows, cols);
      case 8: return transpose_images(rc, in[0].as<uint64_t>(), out[0].as<uint64_t>(), images, rows, cols);
      default: throw Error(std::string("cannot move elements of type ") + dtype_name(in[0].dtype));
    }
  }

 private:
  bool to_nhwc_;
};

}  // namespace

std::unique_ptr<Op> create_to_nhwc(const Node&, const Graph&) { return std::make_unique<LayoutImpl>(true); }
std::unique_ptr<Op> create_to_nchw(const Node&, const Graph&) { return std::make_unique<LayoutImpl>(false); }

}  // namespace optim
