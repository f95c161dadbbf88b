// The int8 depthwise blocks (qconv_block.h).
#include "qconv_block.h"

#include <array>
#include <atomic>
#include <numeric>

#include "depthwise_bands.h"
#include "qconv_nhwc.h"

namespace optim {

namespace {

constexpr size_t kAlignBytes = 64;

size_t aligned(size_t bytes) { return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes; }

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

class QConvBlock : public Op {
 public:
  QConvBlock(const Node& n, const Graph& g) : label_(n.label()) {
    last_ = std::make_unique<NhwcQConv>(qconv_block_unit(n, ""), g);
    if (has_stage(n, Stage::kDepthwise)) dw_ = std::make_unique<NhwcQConv>(qconv_block_unit(n, "dw_"), g);
    if (has_stage(n, Stage::kExpansion)) ex_ = std::make_unique<NhwcQConv>(qconv_block_unit(n, "ex_"), g);
    if (has_stage(n, Stage::kAdd)) other_input_ = stage_input(n, Stage::kAdd, kAddOther);
    if (!dw_ && !ex_) throw Error(label_ + ": a depthwise block with neither a depthwise nor an expansion folded in");
  }

  void prepare(const kernels::KernelTable& kt) override {
    for (NhwcQConv* u : units()) {
      u->prepare(kt);
      if (u->input_type() != DType::kUint8) throw Error(label_ + ": a unit of its depthwise block does not read uint8");
    }
    if (!dw_unit().depthwise() || dw_unit().has_qadd() || dw_unit().geometry().spatial != 2)
      throw Error(label_ + ": its depthwise unit cannot run on float32 sums of a band");
    for (const NhwcQConv* u : std::initializer_list<const NhwcQConv*>{ex_.get(), projection()})
      if (u && !u->geometry().is_pointwise()) throw Error(label_ + ": a folded 1x1 unit is not a 1x1 convolution of stride 1");
    for (const NhwcQConv* u : std::initializer_list<const NhwcQConv*>{ex_.get(), projection()})
      if (u) u->gemm();  // throws when a 1x1 unit runs another form
    if (ex_ && ex_->has_qadd()) throw Error(label_ + ": its expansion has a QAdd folded in");
    centered_tile_ = projection() && dw_unit().depthwise()->writes_centered() && projection()->gemm().reads_centered_rows() &&
                     dw_unit().output_zero() == projection()->input_zero();
    centered_band_ = ex_ && ex_->gemm().writes_centered_floats() && ex_->output_zero() == dw_unit().input_zero();
  }

  std::string kernel_name() const override {  // in the order they run: expansion, depthwise, projection
    std::string names;
    for (const NhwcQConv* u : {ex_.get(), dw_.get(), last_.get()})
      if (u) names += (names.empty() ? "" : " + ") + u->kernel_name();
    return names;
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape mid = depthwise_input(*in[0]);
    const Shape d = dw_unit().infer({&mid})[0];
    return {projection() ? projection()->infer({&d})[0] : d};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const NhwcConvLayout l(dw_unit().geometry(), depthwise_input(*in[0]));
    const DepthwiseBands p = plan(l);
    return static_cast<size_t>(p.slots) * slot_bytes(slot_parts(l, p));
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const NhwcConvLayout l(dw_unit().geometry(), depthwise_input(*in[0].shape));
    if (l.n == 0 || l.pixels() == 0) return;
    const DepthwiseBands p = plan(l);
    const SlotParts parts = slot_parts(l, p);
    const size_t slot = slot_bytes(parts);
    const int64_t c = l.c, cout = projection() ? projection()->geometry().cout : c;
    const int64_t cin = ex_ ? ex_->geometry().cin_g : c;
    const auto* x = static_cast<const uint8_t*>(in[0].data);
    auto* y = static_cast<uint8_t*>(out[0].data);
    const bool qadd = projection() && projection()->has_qadd();
    const auto* other = qadd ? static_cast<const uint8_t*>(in[other_input_].data) : nullptr;
    const int64_t ldo = qadd ? projection()->qadd_other_stride(*in[other_input_].shape, *out[0].shape) : 0;
    std::atomic<int64_t> next{0};
    rc.parallel_for(static_cast<size_t>(p.slots), [&](size_t s) {
      const Slot buf = carve(static_cast<uint8_t*>(rc.scratch()) + s * slot, parts);
      BandRows held;
      auto one_band = [&](int64_t img, int64_t oy0, int64_t oy1) {
        const auto [r0, r1] = depthwise_input_rows(l, oy0, oy1);
        const auto [band, fresh0] = held.place(buf.band, l.w * c, band_capacity_rows(p), r0, r1);
        const int64_t fresh = (r1 - fresh0) * l.w;
        if (fresh > 0) {  // the rows not held yet: expanded (requantized as the unit would), then x - x_zero
          const uint8_t* rows = x + (img * l.h + fresh0) * l.w * cin;
          float* band_rows = band + (fresh0 - r0) * l.w * c;
          if (centered_band_) {  // the expansion's epilogue writes them as floats itself
            ex_->gemm().pointwise_rows_as_centered_floats(rc, rows, fresh, band_rows, buf.ex_scratch);
          } else {
            if (ex_) {
              ex_->gemm().pointwise_rows(rc, rows, fresh, buf.expanded, nullptr, 0, buf.ex_scratch);
              rows = buf.expanded;
            }
            rc.kernels.dequantize(rows, true, dw_unit().input_zero(), 1.f, band_rows, fresh * c);
          }
        }
        const kernels::DwconvGeometry g = band_geometry(l, c, r0, r1, oy0, oy1);
        const int64_t pixels = (oy1 - oy0) * l.ow, first = img * l.pixels() + oy0 * l.ow;
        if (!projection()) {
          dw_unit().depthwise()->pixels(rc, g, band, 0, pixels, y + first * c);
          return;
        }
        const uint8_t* others = ldo ? other + first * cout : other;
        if (centered_tile_) {  // the projection's int16 rows straight from the depthwise epilogue
          auto* rows = reinterpret_cast<int16_t*>(buf.tile);
          dw_unit().depthwise()->centered_pixels(rc, g, band, 0, pixels, rows);
          projection()->gemm().pointwise_centered_rows(rc, rows, pixels, y + first * cout, others, ldo);
          return;
        }
        dw_unit().depthwise()->pixels(rc, g, band, 0, pixels, buf.tile);
        projection()->gemm().pointwise_rows(rc, buf.tile, pixels, y + first * cout, others, ldo, buf.pw_scratch);
      };
      for (int64_t item; (item = next.fetch_add(1)) < p.items;) {
        held = BandRows{};
        p.for_each_band(item, one_band);
      }
    });
  }

 private:
  const NhwcQConv& dw_unit() const { return dw_ ? *dw_ : *last_; }
  const NhwcQConv* projection() const { return dw_ ? last_.get() : nullptr; }
  std::vector<NhwcQConv*> units() const {
    std::vector<NhwcQConv*> u{last_.get()};
    if (dw_) u.push_back(dw_.get());
    if (ex_) u.push_back(ex_.get());
    return u;
  }
  Shape depthwise_input(const Shape& x) const { return ex_ ? ex_->infer({&x})[0] : x; }

  // Per band: x - x_zero of its input rows (float32) and their uint8 expansion before the conversion (none when
  // centered_band_), its depthwise tile (uint8; int16 q - zero when the projection reads those, centered_tile_),
  // and what the 1x1 units copy their rows into when they cannot read them in place.
  DepthwiseBands plan(const NhwcConvLayout& l) const {
    return plan_depthwise_bands(l, l.c * static_cast<int64_t>(sizeof(float) + 1), l.c);
  }
  struct Slot {
    float* band;
    uint8_t *expanded, *tile;
    void *ex_scratch, *pw_scratch;
  };
  using SlotParts = std::array<size_t, 5>;  // the bytes of each of a Slot's parts, in its order, 64-aligned
  SlotParts slot_parts(const NhwcConvLayout& l, const DepthwiseBands& p) const {
    const int64_t in_pixels = p.in_rows * l.w, out_pixels = p.rows * l.ow;
    return {aligned(static_cast<size_t>(band_capacity_rows(p) * l.w * l.c) * sizeof(float)),
            aligned(centered_band_ ? 0 : static_cast<size_t>(in_pixels * l.c)),
            aligned(static_cast<size_t>(out_pixels * l.c) * (centered_tile_ ? sizeof(int16_t) : 1)),
            aligned(ex_ ? ex_->gemm().pointwise_scratch_bytes(in_pixels) : 0),
            aligned(projection() && !centered_tile_ ? projection()->gemm().pointwise_scratch_bytes(out_pixels) : 0)};
  }
  // Rows the float band holds (BandRows::place).
  static int64_t band_capacity_rows(const DepthwiseBands& p) { return kBandCapacity * p.in_rows; }
  static size_t slot_bytes(const SlotParts& parts) { return std::accumulate(parts.begin(), parts.end(), size_t{0}); }
  static Slot carve(uint8_t* at, const SlotParts& parts) {
    Slot s;
    s.band = reinterpret_cast<float*>(at);
    s.expanded = at += parts[0];
    s.tile = at += parts[1];
    s.ex_scratch = at += parts[2];
    s.pw_scratch = at + parts[3];
    return s;
  }

  std::string label_;
  std::unique_ptr<NhwcQConv> last_, dw_, ex_;
  size_t other_input_ = 0;  // the projection's folded QAdd's other operand, in the block node's inputs
  // The depthwise unit writes int16 q - zero for a projection on int16 pairs (no widening copy of its bytes), and
  // an expansion on int16 pairs writes the depthwise's float band itself (no bytes converted again).
  bool centered_tile_ = false, centered_band_ = false;
};

}  // namespace

bool is_qconv_block(const Node& n) { return has_stage(n, Stage::kDepthwise) || has_stage(n, Stage::kExpansion); }

Node qconv_block_unit(const Node& n, const std::string& prefix) {
  Node u;
  u.op = "NhwcQConv";
  u.domain = kInternalDomain;
  u.outputs = {n.outputs.at(0)};
  if (prefix.empty()) {
    const Node own = unit_with_stages(n, {Stage::kAdd});
    u.name = n.name;
    u.inputs = own.inputs;
    for (const auto& [name, a] : own.attrs)
      if (!starts_with(name, "dw_") && !starts_with(name, "ex_")) u.attrs[name] = a;
    return u;
  }
  const Stage stage = prefix == "dw_" ? Stage::kDepthwise : Stage::kExpansion;
  u.name = n.attr_s(prefix + "name", n.name);
  u.inputs = {n.inputs.at(0)};
  for (size_t i = 0; i < kUnitStageInputs; ++i) u.inputs.push_back(stage_value(n, stage, i));
  for (const auto& [name, a] : n.attrs)
    if (starts_with(name, prefix.c_str())) u.attrs[name.substr(prefix.size())] = a;
  return u;
}

std::unique_ptr<Op> create_nhwc_qconv(const Node& n, const Graph& g) {
  if (is_qconv_block(n)) return std::make_unique<QConvBlock>(n, g);
  return std::make_unique<NhwcQConv>(n, g);
}

}  // namespace optim
