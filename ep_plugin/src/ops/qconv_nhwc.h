// NhwcQConv: the integer QDQ convolution unit (qconv.cc's QConv) on channels-last tensors (conv_nhwc.h),
// built by the layout rewrite. Three forms, each exact in its sums and requantized per output channel:
// - u8 x s8 quads (conv_gemm_u8s8: AVX-512 VNNI, AVX-VNNI, or AVX2 for weights that pass u8s8_pairs_exact)
//   when the table has them and the weights fit int8: the input is read where it lies (uint8, no padding read,
//   channels a multiple of 4) or copied as uint8 (int8 inputs flipped by +128) with the zero point as padding;
//   the zero point is compensated per column;
// - int16 pairs (conv_gemm_s16) otherwise: the input copied as int16 minus its zero point, padding 0;
// - depthwise (dwconv_q8): summed in float32, exact while every partial sum stays below 2^24, which the
//   weights are checked for here (else the dense forms run it).
// The int8 depthwise blocks (qconv_block.h) run a unit's pieces on one block of pixels at a time.
#pragma once

#include "../aligned_vector.h"
#include "conv_nhwc.h"
#include "gate_before.h"
#include "lut_after.h"
#include "qadd_after.h"
#include "qgemm.h"

namespace optim {

class NhwcQConv : public Op {
 public:
  NhwcQConv(const Node& n, const Graph& g);
  void prepare(const kernels::KernelTable& kt) override;
  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    return {nhwc_conv_output_shape(cg_, channels_last(*in[0]))};
  }
  size_t scratch_bytes(const std::vector<const Shape*>& in) const override;
  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override;

  // --- pieces for one thread and one block of pixels (after prepare) ---
  const ConvGeometry& geometry() const { return cg_; }
  DType input_type() const { return x_dtype_; }
  int32_t input_zero() const { return x_zero_; }
  bool runs_depthwise() const { return depthwise_; }
  std::string kernel_name() const override { return kernel_ ? kernel_ : ""; }
  bool has_qadd() const { return static_cast<bool>(after_); }
  // The folded QAdd's other operand's row stride (QAddAfter::other_stride).
  int64_t qadd_other_stride(const Shape& other, const Shape& y) const { return after_.other_stride(other, y); }
  // A 1x1 convolution of stride 1 (is_pointwise) as a GEMM over `pixels` uint8 rows of Cin values at x into
  // rows of Cout at y, then the folded QAdd, if any, with the other operand's rows at `other` (row stride
  // ldo, 0: one row for all), and the folded lookup table. Scratch: pointwise_scratch_bytes(pixels).
  size_t pointwise_scratch_bytes(int64_t pixels) const;
  void pointwise_rows(const RunContext& rc, const uint8_t* x, int64_t pixels, uint8_t* y, const uint8_t* other,
                      int64_t ldo, void* scratch) const;
  // A depthwise unit over x - x_zero as float32 in geometry g: output pixels [m0, m1) into y (row stride Cout),
  // then its folded lookup table.
  void depthwise_pixels(const RunContext& rc, const kernels::DwconvGeometry& g, const float* x, int64_t m0, int64_t m1,
                        uint8_t* y) const;

 private:
  // A folded QAdd's other operand (qadd_after.h): its bytes and row stride (0: one row for every pixel).
  struct Other {
    const uint8_t* base = nullptr;
    int64_t ldo = 0;
    // The operand's rows for the output block that starts `offset` bytes into the output.
    const uint8_t* at(int64_t offset) const { return ldo ? base + offset : base; }
  };
  kernels::QgemmEpilogue epilogue() const;
  // What runs on each finished block of output rows [m0, m1), columns [j0, j1) of y (row stride Cout), in cache:
  // the folded QAdd with the other operand's rows at `other` (row stride ldo), then the folded table.
  void finish_rows(const RunContext& rc, uint8_t* y, const uint8_t* other, int64_t ldo, int64_t m0, int64_t m1, int64_t j0,
                   int64_t j1) const;
  // The GEMM kernel on rows [m0, m1) x panels [p0, p1) of a, then finish_rows on them; the u8 x s8 kernel takes
  // the folded QAdd into its epilogue instead (the unit's own bytes never stored and read back).
  void gemm_rows(const RunContext& rc, const kernels::ConvGemmQ8Args& a, const uint8_t* other, int64_t ldo, int64_t m0,
                 int64_t m1, int64_t p0, int64_t p1) const;
  void run_depthwise(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, uint8_t* y,
                     const kernels::QgemmEpilogue& ep, const Other& other) const;
  bool depthwise_exact() const;
  static constexpr int64_t kGatedBlockBytes = 32 << 10;  // a block of gated rows: in L1/L2 for the GEMM
  static constexpr int64_t kGatedSlots = 16;
  int64_t gated_rows() const;
  int64_t gated_slots(const NhwcConvLayout& l) const;
  size_t gated_part_bytes() const;
  size_t gated_slot_bytes() const;
  void run_gated(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, const TensorRef& gate, uint8_t* y,
                 const uint8_t* other, int64_t ldo) const;
  // The uint8 the u8 x s8 kernels see for the zero point (int8 values are flipped by +128).
  int32_t stored_zero() const { return x_zero_ + (x_dtype_ == DType::kInt8 ? 128 : 0); }
  int64_t elem_bytes() const { return u8s8_ ? 1 : 2; }
  bool reads_in_place(const NhwcConvLayout& l) const {
    return u8s8_ && x_dtype_ == DType::kUint8 && kt_ == cg_.cin_g && !l.reads_padding && !nchw_input_;
  }
  // Input shape x as the channels-last shape it stands for (x itself, or with nchw_input [N, C, H, W] read as
  // [N, H, W, C]), and the geometry for it.
  Shape channels_last(const Shape& x) const { return nchw_input_ ? nchw_as_channels_last(x) : x; }
  NhwcConvLayout layout(const Shape& x) const { return NhwcConvLayout(cg_, channels_last(x)); }
  int64_t images_per_turn(const NhwcConvLayout& l) const;
  // Rows [r0, r1) of the prepared input of image img, group gi, into dst (which holds rows from dst_row0 on).
  void prepare_image_rows(const NhwcConvLayout& l, const TensorRef& x, int64_t img, int64_t gi, int64_t r0, int64_t r1,
                          uint8_t* dst, int64_t dst_row0) const;
  // Bands of output rows of one image (plan_conv_bands; one group, weights that stay in cache, an input that
  // needs a prepared copy: the early 3x3 and strided convolutions, stems): each task prepares the input rows its
  // band reads into its own slot and runs the GEMM on them while they are in cache, instead of a prepared copy of
  // every image going through memory first in a pass of its own over the pool.
  static constexpr int64_t kConvBandBytes = 64 << 10;     // a band's prepared rows: in L1 / L2 for the GEMM
  static constexpr int64_t kBandWeightBytes = 256 << 10;  // weights that stay in cache across the bands
  bool runs_in_bands(const NhwcConvLayout& l) const;
  ConvBands plan_bands(const NhwcConvLayout& l) const;
  int64_t band_slot_bytes(const NhwcConvLayout& l, const ConvBands& b) const;
  void convolve_bands(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, uint8_t* y, const Other& other,
                      uint8_t* slots) const;
  void prepare_all(const RunContext& rc, const NhwcConvLayout& l, const TensorRef& x, int64_t i0, int64_t images,
                   uint8_t* dst) const;

  ConvGeometry cg_;
  DType x_dtype_ = DType::kUint8;
  int32_t x_zero_ = 0;
  std::vector<int16_t> wide_;  // [Cout, Cin/g, taps] minus the weight zero points
  bool depthwise_ = false, u8s8_ = false;
  const char* kernel_ = nullptr;  // the kernel prepare chose, for the step profile
  int64_t kt_ = 1;  // values per tap in the prepared input (channels padded to pairs or quads)
  std::vector<std::vector<uint8_t>> packed_;  // per group: GEMM B panels (int16 pairs or int8 quads)
  std::vector<int32_t> comp_;                 // u8 x s8: -stored zero point * column sums, per output channel
  AlignedVector<float> dw_;                   // depthwise: taps x channels, weights minus their zero points
  std::vector<float> scale_, bias_;
  kernels::QgemmEpilogue ep_;
  QAddAfter after_;
  LutAfter lut_;  // after the QAdd
  GateBefore gate_;
  bool nchw_input_ = false;  // input 0 is [N, C, H, W] (rewrites/nchw_stem.cc)
};

}  // namespace optim
