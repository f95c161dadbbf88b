// The ways an integer channels-last convolution unit (qconv_nhwc.h) computes its uint8/int8 output, one class per
// form, chosen once from the node (qconv_nhwc.cc), each exact in its sums and requantized per output channel:
// - QGemmForm: u8 x s8 quads (conv_gemm_u8s8: AVX-512 VNNI, AVX-VNNI, or AVX2 for weights that pass
//   u8s8_pairs_exact) when the table has them and the weights fit int8: the input is read where it lies (uint8, no
//   padding read, channels a multiple of 4) or copied as uint8 (int8 inputs flipped by +128) with the zero point
//   as padding, the zero point compensated per column; int16 pairs (conv_gemm_s16) otherwise: the input copied as
//   int16 minus its zero point, padding 0;
// - QGatedForm: a 1x1 convolution with a squeeze-excite gate on its input channels folded in (gate_before.h):
//   blocks of gated rows through QGemmForm's pointwise rows;
// - QWinogradForm (qconv_winograd.h): Winograd F(2x2, 3x3) on int16 pairs, where rewrites/winograd.cc chose it;
// - QDepthwiseForm: one channel per group (dwconv_q8), summed in float32, exact while every partial sum stays
//   below 2^24, which the weights are checked for (else QGemmForm runs it).
// Every form ends a block of finished output rows the same way (QConvUnit::finish_rows): the folded QAdd, then
// the folded lookup table, while the block is in cache.
#pragma once

#include <memory>
#include <vector>

#include "../aligned_vector.h"
#include "conv_nhwc.h"
#include "gate_before.h"
#include "lut_after.h"
#include "qadd_after.h"
#include "qgemm.h"

namespace optim {

// What every form of one unit reads: geometry, input type and zero point, weights minus their zero points,
// the requantization, and the stages after the sums (QAdd, lookup table).
struct QConvUnit {
  QConvUnit(const Node& n, const Graph& g);

  ConvGeometry cg;
  DType x_dtype = DType::kUint8;
  int32_t x_zero = 0;
  std::vector<int16_t> wide;  // [Cout, Cin/g, taps] minus the weight zero points
  std::vector<float> scale, bias;
  kernels::QgemmEpilogue ep;  // scale_col / bias_col unset: epilogue() points them at scale / bias
  QAddAfter after;
  LutAfter lut;  // after the QAdd
  bool nchw_input = false;  // input 0 is [N, C, H, W] (rewrites/nchw_stem.cc)
  bool quantize_input = false;  // ... of float32, quantized by x_scale and x_zero as it is read
  float x_scale = 1.f;

  kernels::QgemmEpilogue epilogue() const;
  // The uint8 the u8 x s8 kernels see for the zero point (int8 values are flipped by +128).
  int32_t stored_zero() const { return x_zero + (x_dtype == DType::kInt8 ? 128 : 0); }
  // Input shape x as the channels-last shape it stands for (x itself, or with nchw_input [N, C, H, W] read as
  // [N, H, W, C]), and the geometry for it.
  Shape channels_last(const Shape& x) const { return nchw_input ? nchw_as_channels_last(x) : x; }
  NhwcConvLayout layout(const Shape& x) const { return NhwcConvLayout(cg, channels_last(x)); }
  // Whether float32 sums of every depthwise channel stay exact: |x - zx| <= 255 times its weights' sum.
  bool depthwise_exact() const;
  // Rows [m0, m1), columns [j0, j1) of y (row stride Cout), just computed: the folded QAdd with the other
  // operand's rows at `other` (row stride ldo), then the folded table.
  void finish_rows(const RunContext& rc, uint8_t* y, const uint8_t* other, int64_t ldo, int64_t m0, int64_t m1,
                   int64_t j0, int64_t j1) const;
};

// A folded QAdd's other operand: its bytes and row stride (0: one row for every pixel; base null: no QAdd).
struct QAddRows {
  const uint8_t* base = nullptr;
  int64_t ldo = 0;
  // The operand's rows for the output block that starts `offset` bytes into the output.
  const uint8_t* at(int64_t offset) const { return ldo ? base + offset : base; }
};

class QConvForm {
 public:
  virtual ~QConvForm() = default;
  // Packs the weights for the kernels of table kt.
  virtual void prepare(const kernels::KernelTable& kt) = 0;
  virtual size_t scratch_bytes(const NhwcConvLayout& l) const = 0;
  // The unit over the node's inputs `in` (input 0 in layout l; the gate's among them) into y.
  virtual void run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
                   const QAddRows& other) const = 0;
  virtual const char* kernel_name() const = 0;

 protected:
  explicit QConvForm(const QConvUnit& u) : u_(u) {}
  const QConvUnit& u_;
};

class QGemmForm : public QConvForm {
 public:
  explicit QGemmForm(const QConvUnit& u) : QConvForm(u) {}
  // How the GEMM's K runs over the prepared input for a kernel whose K is a multiple of kmult (2: int16 pairs, 4:
  // u8 x s8 quads): kt values a pixel (the channels padded to kmult) and a run of them per tap; or, row_run > 0,
  // a stem reading a few channels channels-first (kw * cin padded to kmult is less than kw padded pixels: 7x7 RGB,
  // 22 pair values a kernel row instead of 28), pixels of exactly cin values and one run of row_run values per
  // kernel row (conv_weights_by_rows), which reads up to kmult - 1 values past its window (slack, zero weights).
  struct KLayout {
    int64_t kt = 1, row_run = 0, slack = 0;
  };
  static KLayout k_layout(const QConvUnit& u, int64_t kmult);
  // The u8 x s8 kernel's weights (per group: B in k_layout(u, 4)) when the table has it and the weights fit int8
  // (and, for a kernel that sums pairs in int16, every group's B passes u8s8_pairs_exact); empty when the unit runs
  // on int16 pairs.
  static std::vector<std::vector<int8_t>> u8s8_weights(const QConvUnit& u, const kernels::KernelTable& kt);
  void prepare(const kernels::KernelTable& kt) override;
  size_t scratch_bytes(const NhwcConvLayout& l) const override;
  void run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
           const QAddRows& other) const override;
  const char* kernel_name() const override { return kernel_ ? kernel_ : ""; }

  // A 1x1 convolution of stride 1 (is_pointwise) as a GEMM over `pixels` uint8 rows of Cin values at x into
  // rows of Cout at y, then the folded QAdd, if any, with the other operand's rows at `other` (row stride
  // ldo, 0: one row for all), and the folded lookup table. Scratch: pointwise_scratch_bytes(pixels).
  size_t pointwise_scratch_bytes(int64_t pixels) const;
  void pointwise_rows(const RunContext& rc, const uint8_t* x, int64_t pixels, uint8_t* y, const uint8_t* other,
                      int64_t ldo, void* scratch) const;
  // Whether the rows can come as int16 x - x_zero already (int16 pairs, Cin even): pointwise_centered_rows.
  bool reads_centered_rows() const { return !u8s8_ && kt_ == u_.cg.cin_g; }
  void pointwise_centered_rows(const RunContext& rc, const int16_t* x, int64_t pixels, uint8_t* y, const uint8_t* other,
                               int64_t ldo) const;
  // Whether the output can go out as float32 q - y_zero (int16 pairs, nothing folded after the sums), the float
  // band a block's depthwise reads: pointwise_rows_as_centered_floats (rows of Cout floats).
  bool writes_centered_floats() const { return !u8s8_ && !u_.after && !u_.lut; }
  void pointwise_rows_as_centered_floats(const RunContext& rc, const uint8_t* x, int64_t pixels, float* y, void* scratch) const;

 private:
  int64_t elem_bytes() const { return u8s8_ ? 1 : 2; }
  // Unit u's weights of group gi as the GEMM's B in layout k: K = runs x run values.
  template <typename T>
  static std::vector<T> weights_as_b(const QConvUnit& u, int64_t gi, const KLayout& k);
  // The runs a pixel reads from an input of cs values per pixel in rows of row_pixels pixels (NhwcConvLayout::taps,
  // with row_run's length).
  NhwcConvLayout::Taps taps(const NhwcConvLayout& l, int64_t cs, int64_t row_pixels) const;
  // Zeros the k_.slack values a kernel-row run reads past a prepared input's end (their weights are 0; defined
  // values all the same).
  void clear_slack(uint8_t* end) const { std::fill(end, end + k_.slack * elem_bytes(), uint8_t{0}); }
  bool reads_in_place(const NhwcConvLayout& l) const {
    return u8s8_ && u_.x_dtype == DType::kUint8 && kt_ == u_.cg.cin_g && !l.reads_padding && !u_.nchw_input;
  }
  // The GEMM kernel on rows [m0, m1) x panels [p0, p1) of a, then finish_rows on them; the u8 x s8 kernel takes
  // the folded QAdd into its epilogue instead (the unit's own bytes never stored and read back).
  void gemm_rows(const RunContext& rc, const kernels::ConvGemmQ8Args& a, const uint8_t* other, int64_t ldo, int64_t m0,
                 int64_t m1, int64_t p0, int64_t p1) const;
  // The 1x1 GEMM over `pixels` prepared rows (kt_ values each) at a (pointwise_input: x's rows as the kernel reads
  // them, copied into scratch when they need to be), into y (QgemmEpilogue::centered_float: floats).
  const void* pointwise_input(const uint8_t* x, int64_t pixels, void* scratch) const;
  void pointwise_gemm(const RunContext& rc, const void* a, int64_t pixels, void* y, const uint8_t* other, int64_t ldo,
                      bool centered_float) const;
  int64_t images_per_turn(const NhwcConvLayout& l) const;
  // Rows [r0, r1) of the prepared input of image img, group gi, into dst (which holds rows from dst_row0 on).
  void prepare_image_rows(const NhwcConvLayout& l, const TensorRef& x, int64_t img, int64_t gi, int64_t r0, int64_t r1,
                          uint8_t* dst, int64_t dst_row0) const;
  void prepare_all(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, int64_t i0, int64_t images,
                   uint8_t* dst) const;
  // Bands of output rows of one image (plan_conv_bands; one group, weights that stay in cache, an input that
  // needs a prepared copy: the early 3x3 and strided convolutions, stems): each task prepares the input rows its
  // band reads into its own slot and runs the GEMM on them while they are in cache, instead of a prepared copy of
  // every image going through memory first in a pass of its own over the pool.
  static constexpr int64_t kConvBandBytes = 64 << 10;     // a band's prepared rows: in L1 / L2 for the GEMM
  static constexpr int64_t kBandWeightBytes = 256 << 10;  // weights that stay in cache across the bands
  bool runs_in_bands(const NhwcConvLayout& l) const;
  ConvBands plan_bands(const NhwcConvLayout& l) const;
  int64_t band_slot_bytes(const NhwcConvLayout& l, const ConvBands& b) const;
  void convolve_bands(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, uint8_t* y,
                      const QAddRows& other, uint8_t* slots) const;

  bool u8s8_ = false;
  const char* kernel_ = nullptr;  // the kernel prepare chose, for the step profile
  kernels::QuantizePixelsFn quantize_pixels_ = nullptr;  // quantize_input: the table's
  int64_t kt_ = 1;  // values per pixel in the prepared input (channels padded to pairs or quads, or k_.kt)
  KLayout k_;
  std::vector<AlignedVector<uint8_t>> packed_;  // per group: GEMM B panels (int16 pairs or int8 quads)
  std::vector<int32_t> comp_;                 // u8 x s8: -stored zero point * column sums, per output channel
};

// Gated (gate_before.h): blocks of rows of one image over the pool; each gates its rows into the thread's slot,
// next to the gate row repeated for them, and runs the 1x1 GEMM on them there.
class QGatedForm : public QConvForm {
 public:
  QGatedForm(const QConvUnit& u, GateBefore gate) : QConvForm(u), gemm_(u), gate_(std::move(gate)) {}
  void prepare(const kernels::KernelTable& kt) override { gemm_.prepare(kt); }
  size_t scratch_bytes(const NhwcConvLayout& l) const override;
  void run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
           const QAddRows& other) const override;
  const char* kernel_name() const override { return gemm_.kernel_name(); }

 private:
  static constexpr int64_t kGatedBlockBytes = 32 << 10;  // a block of gated rows: in L1/L2 for the GEMM
  static constexpr int64_t kGatedSlots = 16;
  int64_t gated_rows() const;
  int64_t gated_slots(const NhwcConvLayout& l) const;
  size_t gated_part_bytes() const;
  size_t gated_slot_bytes() const;

  QGemmForm gemm_;
  GateBefore gate_;
};

class QDepthwiseForm : public QConvForm {
 public:
  explicit QDepthwiseForm(const QConvUnit& u) : QConvForm(u) {}
  void prepare(const kernels::KernelTable& kt) override;
  size_t scratch_bytes(const NhwcConvLayout&) const override { return 0; }
  void run(const RunContext& rc, const NhwcConvLayout& l, const std::vector<TensorRef>& in, uint8_t* y,
           const QAddRows& other) const override;
  const char* kernel_name() const override { return kernel_ ? kernel_ : ""; }

  // The unit over x - x_zero as float32 in geometry g: output pixels [m0, m1) into y (row stride Cout), then
  // its folded lookup table.
  void pixels(const RunContext& rc, const kernels::DwconvGeometry& g, const float* x, int64_t m0, int64_t m1,
              uint8_t* y) const;
  // The same as int16 q - y_zero (for an int16-pair GEMM after it), for a unit without a lookup table.
  bool writes_centered() const { return !u_.lut; }
  void centered_pixels(const RunContext& rc, const kernels::DwconvGeometry& g, const float* x, int64_t m0, int64_t m1,
                       int16_t* y) const;

 private:
  void band_pixels(const RunContext& rc, const kernels::DwconvGeometry& g, const float* x, int64_t m0, int64_t m1, void* y,
                   bool centered16) const;

  const char* kernel_ = nullptr;
  AlignedVector<float> dw_;  // taps x channels, weights minus their zero points
};

}  // namespace optim
