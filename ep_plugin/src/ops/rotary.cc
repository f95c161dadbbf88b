// optim.internal Rotary (rewrites/rotary.cc): y = x * cos + rotate_half(x) * sin over the last axis, rotate_half(x)
// = [-x[h:], x[:h]] (h = half the last dim), cos and sin broadcasting to x (e.g. [B, 1, S, D] against [B, H, S, D]).
// Each product rounded before the sum, as the Mul and Add steps it replaces computed it.
#include "op.h"

namespace optim {
namespace {

constexpr size_t kMaxRank = 8;

class Rotary : public Op {
 public:
  explicit Rotary(std::string label) : label_(std::move(label)) {}

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& x = *in[0];
    if (x.empty() || x.size() > kMaxRank || x.back() % 2 != 0)
      throw Error(label_ + ": x " + shape_str(x) + " has no last axis of even size (rank at most 8)");
    for (size_t k = 1; k <= 2; ++k) {
      const Shape& c = *in[k];
      bool fits = c.size() <= x.size() && !c.empty() && c.back() == x.back();
      for (size_t d = 0; fits && d < c.size(); ++d) {
        const int64_t want = x[x.size() - c.size() + d];
        fits = c[d] == 1 || c[d] == want;
      }
      if (!fits)
        throw Error(label_ + ": " + (k == 1 ? "cos " : "sin ") + shape_str(c) + " does not broadcast to x " +
                    shape_str(x) + " over whole rows");
    }
    return {x};
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const Shape& x = *in[0].shape;
    const int64_t width = x.back(), half = width / 2, rows = in[0].numel() / std::max<int64_t>(width, 1);
    if (rows == 0) return;
    // Per row of x (all dims but the last): where that row of cos / sin starts (0 strides where they broadcast).
    int64_t stride[2][kMaxRank] = {};
    for (size_t k = 0; k < 2; ++k) {
      const Shape& c = *in[k + 1].shape;
      int64_t step = width;
      for (size_t d = c.size() - 1; d-- > 0;) {
        stride[k][x.size() - c.size() + d] = c[d] == 1 ? 0 : step;
        step *= c[d];
      }
    }
    const float *xp = in[0].as<float>(), *cp = in[1].as<float>(), *sp = in[2].as<float>();
    float* y = out[0].as<float>();
    parallel_rows(rc, rows, width, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        int64_t at[2] = {0, 0}, rest = r;
        for (size_t d = x.size() - 1; d-- > 0;) {
          const int64_t i = rest % x[d];
          rest /= x[d];
          at[0] += i * stride[0][d];
          at[1] += i * stride[1][d];
        }
        const float *row = xp + r * width, *c = cp + at[0], *s = sp + at[1];
        float* yr = y + r * width;
        for (int64_t j = 0; j < half; ++j) {
          const float a = row[j] * c[j], b = -row[j + half] * s[j];
          yr[j] = a + b;
        }
        for (int64_t j = half; j < width; ++j) {
          const float a = row[j] * c[j], b = row[j - half] * s[j];
          yr[j] = a + b;
        }
      }
    });
  }

 private:
  std::string label_;
};

}  // namespace

std::unique_ptr<Op> create_rotary(const Node& n, const Graph&) { return std::make_unique<Rotary>(n.label()); }

}  // namespace optim
