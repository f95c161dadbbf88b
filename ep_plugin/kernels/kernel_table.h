// The one table of compute kernels, per instruction set. Ops call kernels only through a KernelTable
// chosen once (best available ISA, or forced by the `isa` EP option), so every optimized kernel has a
// scalar reference twin that tests run side by side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace optim::kernels {

// The kernel sets, worst first; a table for one level holds the best row per family up to that level.
// avx2: AVX2 + FMA; its u8 x s8 integer kernels sum pairs in int16 (vpmaddubsw), exact only for weights whose
// pairs pass u8s8_pairs_exact (7-bit weights always do), so ops keep the int16-pair kernels for the others.
// avxvnni: the AVX2 table with the u8 x s8 kernels on 256-bit VNNI (VEX vpdpbusd: Alder Lake and later client
// chips, Sapphire Rapids, Zen 5), exact for any int8 weights.
// avx512: the float, element-wise, depthwise and pooling kernels on 512-bit vectors (F, BW, VL: Skylake-SP/X and
// later, Zen 4); integer GEMMs as on AVX2. Rows of the avxvnni level also need the CPU's AVX-VNNI, which the
// AVX-512 CPUs before Sapphire Rapids (and Zen 4) lack: where it is missing they are skipped.
// avx512vnni: the avx512 table with the integer GEMMs and convolutions on AVX-512 VNNI (vpdpbusd, vpdpwssd).
// amx: the avx512vnni table with the u8 x s8 GEMM on AMX tiles (tdpbusd) where the CPU and OS allow it.
enum class Isa { kScalar = 0, kAvx2 = 1, kAvxVnni = 2, kAvx512 = 3, kAvx512Vnni = 4, kAmx = 5 };
constexpr int kIsaCount = 6;

const char* isa_name(Isa isa);
// Best ISA this CPU runs, best first: AMX, AVX-512 VNNI, AVX-512, AVX-VNNI, AVX2+FMA, then scalar.
Isa best_isa();
bool isa_supported(Isa isa);
// Parses "scalar" / "avx2" / "avxvnni" / "avx512" / "avx512vnni" / "amx" / "auto"; false for anything else.
bool parse_isa(const std::string& text, Isa* out);
// The names parse_isa accepts besides "auto", worst first, comma-separated (for error messages).
const char* isa_names();

// --- SGEMM on a pre-packed B --------------------------------------------------------------------
// B (k x n) is packed into panels of kSgemmNR columns: panel p holds rows 0..k-1 of columns
// p*NR..p*NR+NR-1, zero padded, contiguous per row. A is row-major with stride lda.
constexpr int64_t kSgemmNR = 16;
constexpr int64_t kSgemmMR = 6;

struct SgemmEpilogue {
  float alpha = 1.f;                  // C = alpha * A*B (+ C when accumulate)
  bool accumulate = false;
  const float* bias_col = nullptr;    // added per column j (length n), after alpha
  const float* bias_row = nullptr;    // added per row i (length m)
  bool relu = false;
};

// Computes rows [m0, m1) and panels [p0, p1) of C. Threads split work by calling it on disjoint tiles.
using SgemmFn = void (*)(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k,
                               const float* a, int64_t lda, const float* b_packed, float* c, int64_t ldc,
                               const SgemmEpilogue& ep);

size_t sgemm_packed_b_floats(int64_t k, int64_t n);
// Packs B (row-major k x n with stride ldb, or, with trans_b, stored n x k) into dst.
void sgemm_pack_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, float* dst);

// --- bfloat16 GEMM (EP option precision=bf16): float32 A and B rounded to bf16, float32 sums ------------
// B is packed in panels of kSgemmNR columns of bf16 pairs: panel p holds, for each K pair q < kp = ceil(k / 2),
// the pairs (b[2q][j], b[2q+1][j]) of its 16 columns (b[2q] in the low half), then zero pairs up to
// sgemm_bf16_panel_pairs(k) (a multiple of 16: whole AMX tiles), so panel p starts at p * 32 * that.
// A is bf16 already (convert_bf16: rows of lda = sgemm_bf16_row(k) values, zero past k; rows up to the
// next multiple of 32 past the last are readable and zero). The reference sums, per column, pair by pair, the
// odd product and then the even one (AVX512-BF16's vdpbf16ps order; a product of two bf16 values is exact in
// float32), with subnormal inputs and results flushed to zero as that instruction does; AMX tiles sum in their
// own order. Same epilogue as the float GEMM.
using SgemmBf16Fn = void (*)(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k, const uint16_t* a,
                             int64_t lda, const uint16_t* b_packed, float* c, int64_t ldc, const SgemmEpilogue& ep);
inline int64_t sgemm_bf16_row(int64_t k) { return (k + 31) / 32 * 32; }
// Rows [r0, r1) of a float32 A (k values each, stride lda) rounded to bf16 (nearest even, as bf16_from_f32) rows
// of sgemm_bf16_row(k) values at dst + r * sgemm_bf16_row(k), zero padded.
using ConvertBf16Fn = void (*)(const float* a, int64_t lda, int64_t k, int64_t r0, int64_t r1, uint16_t* dst);
inline int64_t sgemm_bf16_panel_pairs(int64_t k) { return (k + 31) / 32 * 16; }
size_t sgemm_bf16_packed_b_elems(int64_t k, int64_t n);
// Repacks B's float32 panels (sgemm_pack_b, k x n) into bf16 pair panels.
void sgemm_bf16_pack_from_f32(const float* packed, int64_t k, int64_t n, uint16_t* dst);
// x rounded to bfloat16, nearest even (NaN stays NaN), as its 16 bits; and a bf16 value as float32.
uint16_t bf16_from_f32(float x);
float f32_from_bf16(uint16_t v);

// --- int8 GEMM with exact int32 accumulation --------------------------------------------------
// Operands are int16 values of quantized tensors with their zero points already subtracted (so
// uint8 and int8 both fit, and padding is a plain 0). Products are summed in int32 pairwise
// (AVX2 vpmaddwd: |a*b + a'*b'| <= 2 * 255 * 128 never saturates), so the sum equals the exact
// integer dot product. K is padded to even; kp = K/2 pairs.
// A: rows of 2*kp int16 with stride lda. B packed in panels of kQgemmNR columns: panel p holds, for
// each pair q, NR (b[2q][j], b[2q+1][j]) int16 pairs for columns p*NR..p*NR+NR-1, zero padded.
constexpr int64_t kQgemmNR = 16;
constexpr int64_t kQgemmMR = 4;

enum class QuantOut { kUint8 = 0, kInt8, kFloat32 };

// real = acc * scale (+ bias), with scale and bias per column or per row (one of each may be set);
// for integer outputs scale and bias count output steps (the op divided them by the output scale, as
// ONNX Runtime's requantization multiplier x_scale * w_scale / y_scale does), and
// q = saturate(round_half_even(real) + out_zero, qmin, qmax).
struct QgemmEpilogue {
  const float* scale_col = nullptr;
  const float* scale_row = nullptr;
  float scale = 1.f;  // used when neither per-column nor per-row scale is set
  const float* bias_col = nullptr;
  const float* bias_row = nullptr;
  QuantOut out = QuantOut::kFloat32;
  int32_t out_zero = 0, qmin = 0, qmax = 255;  // qmin/qmax also carry a fused Relu/Clip
  // u8 x s8 kernels only: an int32 per row added to the sums with the columns' compensation, before any float
  // operation (QMatMul's B zero point, whose correction is per row when both operands are activations).
  const int32_t* acc_row = nullptr;
  // Integer outputs stored as float32 q - out_zero (C's elements floats): the quantized tensor as the float
  // depthwise band of a MobileNet block reads it. Only the int16-pair conv kernels (conv_gemm_s16) take it.
  bool centered_float = false;
  // C's elements int32: the exact sums as they are (plus comp_col), no float step; the rest of the epilogue
  // unused. Winograd's products (winograd_output_q8 requantizes them). Only conv_gemm_s16 takes it.
  bool raw_sums = false;
};

// Computes rows [m0, m1) and panels [p0, p1) of C (uint8, int8 or float32 by ep.out; ldc in elements).
using QgemmS16Fn = void (*)(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kp,
                               const int16_t* a, int64_t lda, const int16_t* b_packed, void* c, int64_t ldc,
                               const QgemmEpilogue& ep);

size_t qgemm_s16_packed_b_elems(int64_t kp, int64_t n);
// Packs B given as int16 values (row-major k x n with stride ldb, or, with trans_b, stored n x k).
void qgemm_s16_pack_b(const int16_t* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, int16_t* dst);

// --- Direct int8 convolution (no im2col) --------------------------------------------------------------
// The input of one image and group is prepared once so that for every kernel tap k the values a run of
// kConvSeg consecutive output pixels of one output row read are consecutive: pixel t of segment s
// reads x[seg_in(s) + tap_off[k] + t]. Segment s covers output row s / per_row, columns
// (s % per_row) * kConvSeg onwards (up to out_w), starts at seg_in = row * row_step + column,
// and lands at C column row * out_w + column. Kernels may read up to kConvSeg - 1 values past a
// segment's last pixel (the caller leaves that much slack); those only feed lanes that are discarded.
// Two forms, both exact integer sums followed by the QgemmEpilogue:
// - s16 pairs (QconvS16Fn): x is int16 (x minus its zero point, padding 0); A rows hold 2*kg int16 weights
//   (minus their zero points, K padded to even with 0); tap_off has 2*kg entries.
// - u8 x s8 quads (QconvU8S8Fn, AVX-512 VNNI): x is uint8 (int8 inputs flipped by xor 0x80), padding
//   is the zero point; A rows hold 4*kg int8 weights (K padded with 0); tap_off has 4*kg entries and
//   comp_row[i] = -zero_point(x) * sum of row i's weights is added to each sum.
// A padding tap of K's last group may point anywhere inside x (its weight is 0).
constexpr int64_t kConvSeg = 8;
constexpr int64_t kQconvS16MR = 8;
constexpr int64_t kQconvU8S8MR = 16;
// The segment geometry above, shared by the integer and float direct convolutions.
struct ConvSegments {
  int64_t per_row = 1, out_w = 1, row_step = 0;
};
struct QconvArgs {
  const void* a = nullptr;
  int64_t lda = 0, kg = 0;  // A's row stride in elements; K in pairs or quads
  const void* x = nullptr;
  const int64_t* tap_off = nullptr;
  ConvSegments segs;
  const int32_t* comp_row = nullptr;
  void* c = nullptr;
  int64_t ldc = 0;
  const QgemmEpilogue* ep = nullptr;
};
// Computes C rows [m0, m1) for segments [s0, s1).
using QconvS16Fn = void (*)(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const QconvArgs& args);

// --- Direct float convolution: QconvArgs' segments over a float32 prepared input (padding 0) ---------
// C[i][pixel t of segment s] = epilogue(sum over k of w[i][k] * x[seg_in(s) + tap_off[k] + t]), with the
// SgemmEpilogue (alpha, bias_row, relu; accumulate and bias_col unused). W: rows of k floats, stride ldw.
struct ConvF32Args {
  const float* w = nullptr;
  int64_t ldw = 0, k = 0;
  const float* x = nullptr;
  const int64_t* tap_off = nullptr;
  ConvSegments segs;
  float* c = nullptr;
  int64_t ldc = 0;
  const SgemmEpilogue* ep = nullptr;
};
using ConvF32Fn = void (*)(int64_t m0, int64_t m1, int64_t s0, int64_t s1, const ConvF32Args& args);

// --- int8 GEMM on uint8 x int8 quads (AVX-512 VNNI vpdpbusd: four u8*s8 products summed into int32,
// no intermediate saturation, so exact) ----------------------------------------------------------------
// A: rows of uint8 (activations as stored; int8 ones flipped by xor 0x80, i.e. +128), K padded to a
// multiple of 4 with zeros, stride lda bytes. B: int8 packed in panels of kQuadNR columns, per K quad q
// the 4 values b[4q..4q+3][j] of each column j in turn (64 bytes), zero padded. comp_col[j] is added to
// each sum before the epilogue: -zero_point(A) * sum_k b[k][j], which turns sum a*b into sum (a-za)*b.
constexpr int64_t kQuadNR = 16;
constexpr int64_t kQuadMR = 8;
using QgemmU8S8Fn = void (*)(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t kq, const uint8_t* a,
                             int64_t lda, const int8_t* b_packed, const int32_t* comp_col, void* c, int64_t ldc,
                             const QgemmEpilogue& ep);
size_t qgemm_u8s8_packed_b_bytes(int64_t kq, int64_t n);
// Packs B given as int8 values (row-major k x n with stride ldb) into kq >= ceil(k / 4) quads (zeros past k).
void qgemm_u8s8_pack_b(const int8_t* b, int64_t ldb, int64_t k, int64_t n, int64_t kq, int8_t* dst);
// The same from bytes each xor flip first (0x80: uint8 b as the int8 b - 128), for B that changes every run.
void qgemm_u8s8_pack_b_bytes(const uint8_t* b, int64_t ldb, uint8_t flip, int64_t k, int64_t n, int64_t kq, int8_t* dst);
// Whether a kernel that sums each pair of u8 x s8 products in int16 (vpmaddubsw, KernelTraits::int16_pairs) is
// exact for B (row-major k x n, stride ldb; rows 2r and 2r + 1 form a pair, as in the quads): with a in
// [0, 255], a0 w0 + a1 w1 stays within int16 for every a exactly when each pair's positive weights sum to at
// most 128 and its negative ones to at least -128 (255 * 128 = 32640; 129 would reach 32895). 7-bit weights
// ([-64, 64], `optim quantize --weight-bits 7`) always pass; 8-bit ones almost never do.
bool u8s8_pairs_exact(const int8_t* b, int64_t ldb, int64_t k, int64_t n);

// --- QuantizeLinear / DequantizeLinear, per tensor (ops call them per channel block for per axis) --
// q = saturate(round_half_even(x / scale) + zero_point) to uint8 (to_u8) or int8; NaN gives the
// type's minimum. x = (q - zero_point) * scale.
using QuantizeFn = void (*)(const float* x, float scale, int32_t zero_point, bool to_u8, void* q, int64_t n);
using DequantizeFn = void (*)(const void* q, bool from_u8, int32_t zero_point, float scale, float* x, int64_t n);
// A stem convolution's float32 channels-first pixels quantized as it reads them (its input's QuantizeLinear folded
// in, rewrites/nchw_stem.cc): for pixels p < n, channel c < channels is x[c * plane + p], quantized as QuantizeFn
// does, and pixel p fills kt >= channels slots of `out`: wide, q - zero as int16 with 0 in the slots past
// `channels` (the int16-pair kernels' input); else the byte the u8 x s8 kernels read (q; int8 q flipped by +128)
// with `pad` there.
struct QuantizePixelsArgs {
  float scale = 1.f;
  int32_t zero = 0;
  bool to_u8 = true;
  bool wide = true;
  int64_t kt = 1;
  uint8_t pad = 0;
};
using QuantizePixelsFn = void (*)(const float* x, int64_t plane, int64_t channels, int64_t n, const QuantizePixelsArgs& a,
                                  void* out);

// --- Add or Mul of two quantized tensors, requantized (a QDQ Add / Mul unit) ---------------------------
// y = saturate(round_half_even(((a - za) * sa OP (b - zb) * sb) / sy) + zy, qmin, qmax), OP + or *: the
// float operations of DequantizeLinear, Add/Mul and QuantizeLinear in their order, so results equal ONNX's.
struct QBinaryParams {
  bool mul = false;  // * instead of +
  bool a_u8 = true, b_u8 = true, y_u8 = true;
  float sa = 1.f, sb = 1.f, sy = 1.f;
  int32_t za = 0, zb = 0, zy = 0, qmin = 0, qmax = 255;  // qmin is raised to zy by a fused Relu
};
using QBinaryFn = void (*)(const void* a, const void* b, const QBinaryParams& p, void* y, int64_t n);

// --- element-wise float32 -----------------------------------------------------------------------
enum class BinaryOp { kAdd = 0, kSub, kMul, kDiv };
enum class UnaryOp { kRelu = 0, kSigmoid, kTanh, kErf, kSqrt, kExp, kNeg, kAbs, kGelu, kGeluTanh };

// Activations with parameters (ONNX's definitions; NaN propagates):
//   kHardSigmoid: min(max(alpha * x + beta, 0), 1)      kHardSwish: x * HardSigmoid(x)
//   kLeakyRelu:   x >= 0 ? x : alpha * x                  kSilu:      x * sigmoid(x) (no parameters)
enum class ActivationOp { kHardSigmoid = 0, kHardSwish, kLeakyRelu, kSilu };
struct ActivationParams {
  float alpha = 0.f, beta = 0.f;
};
using ActivationFn = void (*)(ActivationOp op, const ActivationParams& p, const float* x, float* y, int64_t n);

// out[i] = a[i] op b[i] (both vectors), or with a scalar operand on the side that is a scalar.
using BinaryVVFn = void (*)(BinaryOp op, const float* a, const float* b, float* out, int64_t n);
using BinaryVSFn = void (*)(BinaryOp op, const float* a, float b, float* out, int64_t n);
using BinarySVFn = void (*)(BinaryOp op, float a, const float* b, float* out, int64_t n);
using UnaryFn = void (*)(UnaryOp op, const float* x, float* y, int64_t n);
float unary_one(UnaryOp op, float x);  // one element of the scalar reference (eltwise_f32_scalar.cc)
using ClipFn = void (*)(const float* x, float* y, int64_t n, float lo, float hi);
// Softmax of one contiguous row of n values: y = exp(x - max(x)) / sum (y may be x).
using SoftmaxFn = void (*)(const float* x, float* y, int64_t n);
// Attention over a cache of n rows of d floats, ld apart (ops/group_attention.cc): the scores
// y[t] = scale * <x, rows[t]> (DotRowsFn), and the weighted sum y = sum_t w[t] rows[t] (SumRowsFn, y of d floats).
using DotRowsFn = void (*)(const float* x, const float* rows, int64_t ld, int64_t n, int64_t d, float scale, float* y);
using SumRowsFn = void (*)(const float* w, const float* rows, int64_t ld, int64_t n, int64_t d, float* y);

// --- more element-wise float32: rounding, Softplus/Elu, trigonometry, powers, Max/Min (ops/math_ops.cc) ---
// y[i] = f(x[i]) by ONNX's definitions, NaN propagating:
//   kReciprocal 1 / x     kFloor, kCeil     kRound (halves to even)     kSin, kCos
//   kSoftplus ln(1 + e^x)     kElu x >= 0 ? x : p * (e^x - 1)
//   kPow x^p (powf)     kSquare x * x     kCube x * x * x     kSqrt x^0.5 with pow's edges (-0 -> +0, -inf -> +inf)
// The last three are Pow's scalar-exponent fast paths, computed as ONNX Runtime's CPU EP computes them.
enum class MathOp { kReciprocal = 0, kFloor, kCeil, kRound, kSoftplus, kElu, kSin, kCos, kPow, kSquare, kCube, kSqrt };
using MathUnaryFn = void (*)(MathOp op, float p, const float* x, float* y, int64_t n);
// y[i] = a[i * sa] op b[i * sb] with sa, sb each 0 (a repeated scalar) or 1: kPow powf(a, b); kMax, kMin with
// NaN winning (ONNX Runtime's Max/Min propagate NaN).
enum class MathBinaryOp { kPow = 0, kMax, kMin };
using MathBinaryFn = void (*)(MathBinaryOp op, const float* a, int64_t sa, const float* b, int64_t sb, float* y, int64_t n);

// --- col2im's inner loop (ConvTranspose): y[i * stride] += x[i] for i < n, the strided positions only ----------
using Col2imRowFn = void (*)(const float* x, float* y, int64_t stride, int64_t n);

// --- recurrent cells: one LSTM / GRU step's gate math for a run of hidden units (ops/rnn.cc) -------------
// Gate pre-activations lie in chunks of kRnnChunk hidden units with every gate of a chunk side by side: gate g
// of unit u at p[(u / kRnnChunk) * stride + g * kRnnChunk + u % kRnnChunk] (stride = gates * kRnnChunk), so the
// GEMM panels of a run of chunks hold all the gates of its units. Plain vectors (h_prev, c, h, hh, peepholes)
// hold unit u at [u]. Per unit, with s = sigmoid and clip(v) = min(max(v, -clip), clip):
//   kLstm (x, hr: i o f c): i = s(clip(x_i + hr_i + p_i c)); f = 1 - i with input_forget, else
//     s(clip(x_f + hr_f + p_f c)); c' = f c + i tanh(clip(x_c + hr_c)); o = s(clip(x_o + hr_o + p_o c'));
//     h = o tanh(c'); c is updated in place, peepholes (p_*) are optional.
//   kGruLinear (x, hr: z r h; linear_before_reset): z = s(clip(x_z + hr_z)), r = s(clip(x_r + hr_r)),
//     n = tanh(clip(x_h + r hr_h)), h = n + z (h_prev - n).
//   kGruReset (x: z r h, hr: z r): h = s(clip(x_r + hr_r)) h_prev, the reset state that R_h multiplies next.
//   kGruUpdate (x: z r h, hr: z r, hh = (reset state) R_h^T): z = s(clip(x_z + hr_z)), n = tanh(clip(x_h + hh)),
//     h = n + z (h_prev - n).
constexpr int64_t kRnnChunk = kSgemmNR;
enum class RnnCell { kLstm = 0, kGruLinear, kGruReset, kGruUpdate };
struct RnnCellArgs {
  int64_t n = 0;  // units [0, n) from a chunk's start; every pointer is at unit 0
  const float* x = nullptr;  // input projection (biases included)
  int64_t x_stride = 0;
  const float* hr = nullptr;  // recurrent projection
  int64_t hr_stride = 0;
  const float* hh = nullptr;
  const float* p_i = nullptr;
  const float* p_o = nullptr;
  const float* p_f = nullptr;
  const float* h_prev = nullptr;
  float* c = nullptr;
  float* h = nullptr;
  float clip = __builtin_inff();
  bool input_forget = false;
};
using RnnCellFn = void (*)(RnnCell cell, const RnnCellArgs& a);

// --- NHWC convolution as a GEMM: rows are output pixels, columns output channels --------------------
// Row m of A is output pixel m, images one after another (m = (img * oh + oy) * ow + ox). At kernel tap t
// it reads k_tap consecutive values at x + base(m) + tap_off[t] (in elements), where
// base(m) = img * image_stride + (oy * sh * wp + ox * sw) * cs. K is taps * k_tap values in tap order,
// and B (the weights) is packed over that K like a GEMM's B (sgemm_pack_b, qgemm_s16_pack_b,
// qgemm_u8s8_pack_b: panels of 16 columns). A plain GEMM is one tap with ow >= M, sw = 1 and cs = lda.
// C row m starts at c + m * ldc; columns [0, n) are computed.
struct ConvRows {
  const void* x = nullptr;
  int64_t pixels = 1, ow = 1;  // output pixels per image (oh * ow) and per output row
  int64_t image_stride = 0, sh = 1, sw = 1, wp = 1, cs = 1;
  int64_t taps = 1, k_tap = 1;  // k_tap: padded to the kernel's K multiple (pairs, quads) with zero weights
  const int64_t* tap_off = nullptr;
};

// float32: C = act(min(max(A x B + bias[j] + residual[m][j], lo), hi)), each term only when set; NaN
// propagates. `act` is an ActivationFn's operation (HardSwish, SiLU...) when has_act.
struct ConvF32Epilogue {
  const float* bias = nullptr;
  const float* residual = nullptr;
  int64_t ld_residual = 0;
  float lo = -__builtin_inff(), hi = __builtin_inff();
  bool has_act = false;
  ActivationOp act = ActivationOp::kSilu;
  ActivationParams act_params;
};
struct ConvGemmF32Args {
  ConvRows a;
  const float* w = nullptr;  // packed B panels
  int64_t n = 0;
  float* c = nullptr;
  int64_t ldc = 0;
  ConvF32Epilogue ep;
};
// int8: exact int32 sums (plus comp_col[j] for u8 x s8 A) through the QgemmEpilogue (per-column scales).
// A holds int16 values minus their zero point for the s16-pair kernels, uint8 for the u8 x s8 ones.
// A QAdd folded into the epilogue (ops/qadd_after.h): each quantized value of C (operand a, whose zero point
// p.za is the epilogue's out_zero) is added to the other operand's value at the same row and column
// (other + m * ldo + j; ldo 0: one row for all) by QBinaryParams' operations, and C holds the Add's result.
// Only conv_gemm_u8s8 takes one (AVX-512 VNNI in its epilogue, the 256-bit kernels on each stored tile); the
// callers of the s16 kernels run the Add on C after them.
struct ConvQAdd {
  const void* other = nullptr;
  int64_t ldo = 0;
  QBinaryParams p;
};
struct ConvGemmQ8Args {
  ConvRows a;
  const void* w = nullptr;  // packed B panels: int16 pairs or int8 quads
  int64_t n = 0;
  void* c = nullptr;
  int64_t ldc = 0;
  const int32_t* comp_col = nullptr;
  const QgemmEpilogue* ep = nullptr;
  const ConvQAdd* add = nullptr;  // u8 x s8 only
};
// Rows [m0, m1) by 16-column panels [p0, p1) of C.
using ConvGemmF32Fn = void (*)(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmF32Args& args);
using ConvGemmQ8Fn = void (*)(int64_t m0, int64_t m1, int64_t p0, int64_t p1, const ConvGemmQ8Args& args);

// --- depthwise NHWC convolution (one input channel per output channel) -------------------------------
// Output pixel m (images one after another, as above) of channel j sums, over taps (ky, kx) inside the
// input, x[img][oy*sh - ph + ky*dh][ox*sw - pw + kx*dw][j] * w[(ky * kw + kx) * channels + j]; taps in the
// padding add nothing (the kernels check bounds: no padded copy). Input pixels are cs elements apart.
struct DwconvGeometry {
  int64_t h = 1, w = 1, oh = 1, ow = 1, kh = 1, kw = 1, sh = 1, sw = 1, dh = 1, dw = 1, ph = 0, pw = 0;
  int64_t cs = 1, channels = 1;
};
struct DwconvF32Args {
  DwconvGeometry g;
  const float* x = nullptr;
  const float* w = nullptr;  // taps x channels
  float* c = nullptr;        // output pixel m's row: c + (m - c_row0) * ldc (a tile of pixels from c_row0 on)
  int64_t ldc = 0;
  int64_t c_row0 = 0;
  ConvF32Epilogue ep;
};
// int8: x is the quantized input minus its zero point, as float32 (exact; the op converts it once per
// image), w the weights minus theirs; the sums are exact in float32 while every |partial sum| stays below
// 2^24 (the op checks that bound on its weights), then the QgemmEpilogue per channel (column).
struct DwconvQ8Args {
  DwconvGeometry g;
  const float* x = nullptr;  // x - x_zero as float32, or null with xq:
  // the stored bytes (uint8, or int8 when x_signed) converted as they are read: a strided convolution reads
  // each input value about once, so a converted copy costs more than it saves.
  const uint8_t* xq = nullptr;
  bool x_signed = false;
  int32_t x_zero = 0;
  const float* w = nullptr;  // taps x channels
  void* c = nullptr;
  int64_t ldc = 0;
  const QgemmEpilogue* ep = nullptr;
  // c holds int16 q - out_zero (ep.out uint8 or int8), the input an int16-pair GEMM reads, instead of q's bytes.
  bool centered16 = false;
};
// Output pixels [m0, m1).
using DwconvF32Fn = void (*)(int64_t m0, int64_t m1, const DwconvF32Args& args);
using DwconvQ8Fn = void (*)(int64_t m0, int64_t m1, const DwconvQ8Args& args);

// --- Winograd F(2x2, 3x3) tile transforms (ops/conv_winograd.cc) ----------------------------------------
// A 3x3 stride-1 convolution as 16 GEMMs: each 4x4 input tile d becomes V = Bt d B (every channel), GEMM
// position pos multiplies V[pos] (tiles x Cin) by the transformed weights U[pos] = (G g Gt)[pos] (Cin x
// Cout), and each tile's M = (V U) gives its 2x2 output pixels Y = At M A through the convolution epilogue.
// Input: tile t's 16 pixels (row i, column j of the tile) start at px[t * 16 + i * 4 + j] (a zero row for
// padding), `channels` floats each; writes v[pos * ld_pos + t * ld_tile + c], pos = i * 4 + j.
using WinogradInputF32Fn = void (*)(const float* const* px, int64_t tiles, int64_t channels, float* v, int64_t ld_pos,
                                    int64_t ld_tile);
// Output: m[pos * ld_pos + t * ld_tile + j], j < cols, is output channel j0 + j of tile t; its 2x2 pixels
// are rows pixel[t * 4 + i * 2 + k] of C (-1: past the image's edge, not written), each getting
// C[row * ldc + j0 + j] = epilogue(Y) (bias[j0 + j], residual[row * ld_residual + j0 + j], clamp, activation).
using WinogradOutputF32Fn = void (*)(const float* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols,
                                     const int64_t* pixel, float* c, int64_t ldc, int64_t j0, const ConvF32Epilogue& ep);

// The same for the integer convolution on int16 pairs, exact (ops/qconv_winograd.cc): the tile's bytes (uint8,
// or int8 with x_signed; padding pixels point at a row of the zero point) minus x_zero, V = Bt d B in int16
// (|V| <= 4 * 255), channels [channels, kt) zero (K padded to pairs). The GEMMs (conv_gemm_s16, raw_sums) multiply V
// by U' = G' g G't with G' = 2G (integers, 4x U) into int32 M; the output Y' = At M A is 4x the convolution's
// exact sum, so Y = Y' / 4 goes through the QgemmEpilogue (qgemm_store's operations) into C's bytes. The ops
// choose it only where no int32 value on the way can overflow (QWinogradForm::sums_fit_int32).
using WinogradInputQ8Fn = void (*)(const uint8_t* const* px, int64_t tiles, int64_t channels, int64_t kt, bool x_signed,
                                   int32_t x_zero, int16_t* v, int64_t ld_pos, int64_t ld_tile);
using WinogradOutputQ8Fn = void (*)(const int32_t* m, int64_t ld_pos, int64_t ld_tile, int64_t tiles, int64_t cols,
                                    const int64_t* pixel, uint8_t* c, int64_t ldc, int64_t j0, const QgemmEpilogue& ep);

// --- transposes of 4-byte elements (layout changes: NCHW <-> NHWC) --------------------------------------
// dst[c * ld_dst + r] = src[r * ld_src + c] for r < rows, c < cols (any 32-bit values, moved as bits).
using Transpose32Fn = void (*)(const uint32_t* src, int64_t ld_src, uint32_t* dst, int64_t ld_dst, int64_t rows, int64_t cols);
// The same for bytes (quantized tensors).
using Transpose8Fn = void (*)(const uint8_t* src, int64_t ld_src, uint8_t* dst, int64_t ld_dst, int64_t rows, int64_t cols);

// --- pooling windows over a run of channels (channels-last pooling) ------------------------------------
// For i in [0, n): y[i] = the max over the window's taps t of x[tap[t] + i] (float32 with NaN winning, as
// ONNX's MaxPool; uint8; int8; taps >= 1), or their float32 sum from 0 in tap order (kSumF32; taps >= 0).
// Offsets count elements. A whole window per call: each block of channels is summed in registers.
enum class PoolOp { kMaxF32 = 0, kMaxU8, kMaxS8, kSumF32 };
using PoolWindowFn = void (*)(PoolOp op, const void* x, const int64_t* tap, int64_t taps, void* y, int64_t n);

// --- 256-entry byte tables (quantized element-wise regions, ops/qlut.cc) ---------------------------------
// y[i] = table[x[i] ^ flip] (flip 0x80 for int8 x, else 0).
using Lut8Fn = void (*)(const uint8_t* x, uint8_t flip, const uint8_t* table, uint8_t* y, int64_t n);

// --- weight-only quantized GEMM (com.microsoft MatMulNBits, ops/matmul_nbits.cc) --------------------------
// C[m, n] = sum over K's blocks b of scale[n, b] * (sum_k A[m, k] q[n, k] - zero[n, b] asum[m, b]) (+ bias[n]) for
// rows [m0, m1) and columns [n0, n1): q the `bits`-wide codes of B, [N, blocks, block * bits / 8] bytes packed low
// bits first along K (bits 4 or 8), dequantized as (q - zero) * scale; asum[m, b] the sum of A's row m over block
// b (its k < K). block is a multiple of 16. The codes are unpacked in registers: no dequantized copy of B.
struct MatMulNBitsArgs {
  const float* a = nullptr;
  int64_t lda = 0;
  const float* asum = nullptr;  // [M, blocks]
  int64_t k = 0, blocks = 0, block = 0;
  int bits = 4;
  const uint8_t* b = nullptr;
  const float* scales = nullptr;  // [N, blocks]
  const float* zeros = nullptr;   // [N, blocks]
  const float* bias = nullptr;    // [N] or null
  float* c = nullptr;
  int64_t ldc = 0;
};
using MatMulNBitsFn = void (*)(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsArgs& args);
// With int8 activations (MatMulNBits accuracy_level 4, as MLAS and llama.cpp run it): the op quantizes A per row
// and block (aq = round(a / a_scale), a_scale = max|a| / 127, a_sum = sum of aq), stored per 32 values as the 16 at
// even k then the 16 at odd k (the order of a byte's low and high nibbles), zero past K; then
// C[m, n] = sum_b scale[n, b] (a_scale[m, b] sum_k aq[m, k] q[n, k] - zero[n, b] a_zero[m, b]) (+ bias[n]) with
// a_zero = a_scale x a_sum; the inner sums exact in int32 (u8 x s8 products summed in pairs: 2 x 15 x 127 fits
// int16). 4-bit codes, integer zero points, blocks a multiple of 32; the float sums in any order.
// B is packed for it (matmul_nbits_q8_pack) in groups of kQ8Columns columns: per group, block and 32 k, the four
// columns' 16 code bytes side by side (one 64-byte load feeds four columns' dot products); per group and block,
// kQ8ParamBytes: the 4 float scales, then the 4 zero points as bytes (21 bytes per 32 weights in all, where float
// zero points would take 24: decode reads every byte once per token). Columns past N are zero; column ranges start
// at a multiple of 4.
constexpr int64_t kQ8Columns = 4;
constexpr int64_t kQ8ParamBytes = 4 * sizeof(float) + 4;
struct MatMulNBitsQ8Args {
  const int8_t* aq = nullptr;      // [M, ldq]
  int64_t ldq = 0;                 // blocks * block
  const float* a_scale = nullptr;  // [M, blocks]
  const float* a_zero = nullptr;   // [M, blocks]: a_scale x a_sum
  int64_t blocks = 0, block = 0;
  const uint8_t* b = nullptr;      // [ceil(N / 4), blocks, block / 32, 4, 16]
  const uint8_t* params = nullptr; // [ceil(N / 4), blocks, kQ8ParamBytes]: 4 float scales, 4 byte zero points
  const float* bias = nullptr;     // [N] or null
  float* c = nullptr;
  int64_t ldc = 0;
};
// B's codes [N, blocks, block / 2] with float scales and zero points [N, blocks] (whole numbers 0 to 255) in that
// layout: packed holds ceil(N / 4) * blocks * block * 2 bytes, params ceil(N / 4) * blocks * kQ8ParamBytes
// (matmul_nbits_q8_scalar.cc).
void matmul_nbits_q8_pack(const uint8_t* codes, const float* scales, const float* zeros, int64_t n, int64_t blocks,
                          int64_t block, uint8_t* packed, uint8_t* params);
using MatMulNBitsQ8Fn = void (*)(int64_t m0, int64_t m1, int64_t n0, int64_t n1, const MatMulNBitsQ8Args& args);

// --- the table ------------------------------------------------------------------------------------
// What a kernel asks of its operands beyond its signature (most need nothing): rows x columns of its
// tile, K in a multiple of k_multiple (operands padded that far), and row_pad readable rows past A's last.
// int16_pairs: a u8 x s8 kernel that sums each pair of products in int16 (vpmaddubsw) before widening, exact
// only for weights that pass u8s8_pairs_exact; ops check that and keep the int16-pair kernels otherwise.
struct KernelTraits {
  int64_t mr = 1, nr = 1, k_multiple = 1, row_pad = 0;
  bool int16_pairs = false;
};

// One family's chosen kernel: callable like the function it holds, false when the table has none.
template <typename FnPtr>
struct Kernel {
  using Fn = std::remove_pointer_t<FnPtr>;
  FnPtr fn = nullptr;
  const char* name = nullptr;
  Isa isa = Isa::kScalar;
  KernelTraits traits;
  explicit operator bool() const { return fn != nullptr; }
  template <typename... Args>
  auto operator()(Args&&... args) const { return fn(std::forward<Args>(args)...); }
};

// One member per kernel family. kernel_table(isa) fills each with the family's best row in
// kernel_list.inc whose ISA is at most `isa`; a family without such a row (the u8 x s8 ones below
// AVX-512 VNNI) stays empty.
struct KernelTable {
  Isa isa = Isa::kScalar;
  Kernel<SgemmFn> sgemm;
  Kernel<SgemmBf16Fn> sgemm_bf16;  // these two only in the bf16 tables (kernel_table(isa, true)); empty otherwise
  Kernel<ConvertBf16Fn> convert_bf16;
  Kernel<BinaryVVFn> binary_vv;
  Kernel<BinaryVSFn> binary_vs;
  Kernel<BinarySVFn> binary_sv;
  Kernel<UnaryFn> unary;
  Kernel<ClipFn> clip;
  Kernel<ActivationFn> activation;
  Kernel<MathUnaryFn> math_unary;
  Kernel<MathBinaryFn> math_binary;
  Kernel<SoftmaxFn> softmax;
  Kernel<DotRowsFn> dot_rows;
  Kernel<SumRowsFn> sum_rows;
  Kernel<Col2imRowFn> col2im_row;
  Kernel<RnnCellFn> rnn_cell;
  Kernel<QuantizeFn> quantize;
  Kernel<DequantizeFn> dequantize;
  Kernel<QuantizePixelsFn> quantize_pixels;
  Kernel<QBinaryFn> qbinary;
  Kernel<QgemmS16Fn> qgemm_s16;
  Kernel<QgemmU8S8Fn> qgemm_u8s8;
  Kernel<ConvF32Fn> conv_f32;
  Kernel<QconvS16Fn> qconv_s16;
  Kernel<QconvS16Fn> qconv_u8s8;
  Kernel<ConvGemmF32Fn> conv_gemm_f32;
  Kernel<ConvGemmQ8Fn> conv_gemm_s16;
  Kernel<ConvGemmQ8Fn> conv_gemm_u8s8;
  Kernel<DwconvF32Fn> dwconv_f32;
  Kernel<DwconvQ8Fn> dwconv_q8;
  Kernel<WinogradInputF32Fn> winograd_input_f32;
  Kernel<WinogradOutputF32Fn> winograd_output_f32;
  Kernel<WinogradInputQ8Fn> winograd_input_q8;
  Kernel<WinogradOutputQ8Fn> winograd_output_q8;
  Kernel<Transpose32Fn> transpose32;
  Kernel<Transpose8Fn> transpose8;
  Kernel<PoolWindowFn> pool_window;
  Kernel<Lut8Fn> lut8;
  Kernel<MatMulNBitsFn> matmul_nbits;
  Kernel<MatMulNBitsQ8Fn> matmul_nbits_q8;
  // The chosen kernels' names in kernel_list.inc's order, for `optim doctor`.
  std::vector<std::string> names() const;
};

// The table for `isa`; with bf16 (EP option precision=bf16) it also holds the bf16 GEMM (sgemm_bf16), which
// the float GEMM ops then run on. bf16_supported: whether `isa`'s table has a hardware bf16 GEMM (the scalar
// table's reference counts, for tests).
const KernelTable& kernel_table(Isa isa, bool bf16 = false);
bool bf16_supported(Isa isa);

// Every row of kernel_list.inc, whatever this CPU runs: what the EP reports for doctor and tests.
struct KernelRow {
  const char* family;
  Isa isa;
  const char* name;
  const char* feature = "";  // a CpuFeatures flag the row also needs, or ""
  bool feature_present = true;  // whether this CPU has it
  bool bf16_only = false;  // a family only the bf16 tables hold (precision=bf16)
};
const std::vector<KernelRow>& kernel_rows();

// The kernels themselves, declared from the list: each has its family's signature.
#define OPTIM_KERNEL(family, isa, symbol, ...) decltype(KernelTable::family)::Fn symbol;
#define OPTIM_KERNEL_IF(feature, family, isa, symbol, ...) decltype(KernelTable::family)::Fn symbol;
#define OPTIM_KERNEL_PAIRS(family, isa, symbol, ...) decltype(KernelTable::family)::Fn symbol;
#include "kernel_list.inc"
#undef OPTIM_KERNEL
#undef OPTIM_KERNEL_IF
#undef OPTIM_KERNEL_PAIRS

}  // namespace optim::kernels
