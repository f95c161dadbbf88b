// com.microsoft MatMulNBits: Y = A x dequantize(B)^T (+ bias), B's weights quantized to 4 or 8 bits in blocks of
// `block_size` along K, each block with its scale and zero point (default 2^(bits-1)): what `optim quantize
// --weights int4|int8` writes (onnxruntime's MatMulNBitsQuantizer), so that the CPU EP runs the same file.
// Inputs: A [..., K] float32; B uint8 [N, blocks, block_size * bits / 8] constant; scales float32 [N, blocks] (or
// flat) constant; zero_points (optional, constant) uint8 packed like B's codes [N, ceil(blocks * bits / 8)] or
// float32 [N, blocks]; g_idx (deprecated) must be absent; bias (optional) float32 [N] constant.
// Few rows (decode): the kernel (kernel_table.h, MatMulNBitsFn) reads B's codes where they lie; the op keeps scales
// and zero points as float32 and sums A over each block once per run, so the zero point costs one multiply-add per
// block. Many rows (prefill): groups of columns dequantized to float32 in cache and run on the float GEMM.
// With accuracy_level 4 (4-bit codes, whole-number zero points, blocks of 32k) every row runs with A quantized to
// int8 per block, as ONNX Runtime's CPU EP runs that level, on exact u8 x s8 dot products (kernel_table.h,
// MatMulNBitsQ8Fn) over B repacked at compile time in groups of four columns (B's own layout freed): a prefill too
// (twice the float GEMM's multiply-adds per instruction, from codes that stay in L1 across each group's rows).
#include <algorithm>
#include <functional>

#include "matmul_nbits.h"

#include "../aligned_vector.h"

namespace optim {
namespace {

enum MatMulNBitsInput : size_t { kA = 0, kB, kScales, kZeros, kGIdx, kBias };

struct NBitsShape {
  int64_t k = 0, n = 0, bits = 4, block = 0, blocks = 0;
  int64_t blob() const { return block * bits / 8; }
};

NBitsShape read_shape(const Node& n) {
  NBitsShape s;
  s.k = n.attr_i("K", 0);
  s.n = n.attr_i("N", 0);
  s.bits = n.attr_i("bits", 4);
  s.block = n.attr_i("block_size", 0);
  s.blocks = s.block > 0 ? (s.k + s.block - 1) / s.block : 0;
  return s;
}

std::string check_matmul_nbits(const Node& n, const Graph& g) {
  const NBitsShape s = read_shape(n);
  if (s.bits != 4 && s.bits != 8) return "bits=" + std::to_string(s.bits) + " (OptimEP runs 4 and 8)";
  if (s.block < 16 || (s.block & (s.block - 1)) != 0) return "block_size " + std::to_string(s.block) + " is not a power of 2 >= 16";
  if (s.k <= 0 || s.n <= 0) return "K and N must be positive";
  if (n.has_input(kGIdx)) return "g_idx (deprecated) is not implemented by OptimEP";
  if (std::string r = require_float(g, n, kA); !r.empty()) return r;
  for (size_t i : {kB, kScales, kZeros, kBias}) {
    if (!n.has_input(i)) continue;
    const ValueInfo* v = g.value(n.inputs[i]);
    if (!v || !v->is_constant) return "input '" + n.inputs[i] + "' is not a constant initializer";
  }
  const ValueInfo* b = g.value(n.inputs[kB]);
  if (b->dtype != DType::kUint8) return "B is not uint8";
  for (size_t i : {kScales, kBias})
    if (n.has_input(i) && g.value(n.inputs[i])->dtype != DType::kFloat32) return "scales and bias must be float32";
  if (n.has_input(kZeros)) {
    const DType z = g.value(n.inputs[kZeros])->dtype;
    if (z != DType::kUint8 && z != DType::kFloat32) return "zero_points are neither uint8 nor float32";
  }
  return "";
}

class MatMulNBits : public MatMulNBitsPart {
 public:
  MatMulNBits(const Node& n, const Graph& g)
      : s_(read_shape(n)), label_(n.label()), accuracy_level_(n.attr_i("accuracy_level", 0)) {
    const Tensor* b = g.constant(n.inputs[kB]);
    const Tensor* scales = g.constant(n.inputs[kScales]);
    if (!b || !scales) throw Error(label_ + ": B and scales must be constants");
    const int64_t per_n = s_.n * s_.blocks;
    if (b->numel() != per_n * s_.blob())
      throw Error(label_ + ": B has " + std::to_string(b->numel()) + " bytes, not N x blocks x blob = " +
                  std::to_string(per_n * s_.blob()) + " (K=" + std::to_string(s_.k) + ", N=" + std::to_string(s_.n) +
                  ", bits=" + std::to_string(s_.bits) + ", block_size=" + std::to_string(s_.block) + ")");
    if (scales->numel() != per_n) throw Error(label_ + ": scales hold " + std::to_string(scales->numel()) + " values, not N x blocks = " + std::to_string(per_n));
    b_.assign(b->data<uint8_t>(), b->data<uint8_t>() + b->numel());
    scales_.assign(scales->data<float>(), scales->data<float>() + per_n);
    zeros_.assign(static_cast<size_t>(per_n), static_cast<float>(1 << (s_.bits - 1)));
    if (n.has_input(kZeros)) read_zeros(*g.constant(n.inputs[kZeros]));
    if (n.has_input(kBias)) {
      const Tensor* bias = g.constant(n.inputs[kBias]);
      if (!bias || bias->numel() != s_.n) throw Error(label_ + ": bias does not hold N = " + std::to_string(s_.n) + " values");
      bias_.assign(bias->data<float>(), bias->data<float>() + s_.n);
    }
  }

  void prepare(const kernels::KernelTable& kt) override {
    // int8 activations need whole-number zero points (bytes in the q8 layout); float ones with fractions keep A float.
    const bool whole_zeros = std::all_of(zeros_.begin(), zeros_.end(), [](float z) {
      return z >= 0.f && z <= 255.f && z == static_cast<float>(static_cast<int>(z));
    });
    q8_ = accuracy_level_ == 4 && s_.bits == 4 && s_.block % 32 == 0 && whole_zeros && kt.matmul_nbits_q8;
    kernel_ = q8_ ? kt.matmul_nbits_q8.name : kt.matmul_nbits.name;
    if (!q8_) return;
    // The q8 kernels' layout (kernel_table.h) replaces B's.
    const int64_t groups = (s_.n + kernels::kQ8Columns - 1) / kernels::kQ8Columns;
    packed_.resize(static_cast<size_t>(groups * s_.blocks * s_.block * 2));
    params_.resize(static_cast<size_t>(groups * s_.blocks * kernels::kQ8ParamBytes));
    kernels::matmul_nbits_q8_pack(b_.data(), scales_.data(), zeros_.data(), s_.n, s_.blocks, s_.block, packed_.data(),
                                  params_.data());
    std::vector<uint8_t>().swap(b_);
    std::vector<float>().swap(scales_);
    std::vector<float>().swap(zeros_);
  }
  std::string kernel_name() const override { return kernel_ ? kernel_ : ""; }

  bool q8() const override { return q8_; }
  int64_t n() const override { return s_.n; }
  Q8Rows quantize_rows(const RunContext& rc, const float* a, int64_t m) const override {
    const int64_t kp = s_.blocks * s_.block;
    auto* aq = static_cast<int8_t*>(rc.scratch());
    auto* a_scale = reinterpret_cast<float*>(aq + m * kp);
    float* a_zero = a_scale + m * s_.blocks;
    auto quantize = [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r)
        for (int64_t b = 0; b < s_.blocks; ++b) {
          const int64_t k0 = b * s_.block, i = r * s_.blocks + b;
          quantize_block(a + r * s_.k + k0, std::min(s_.block, s_.k - k0), aq + r * kp + k0, a_scale[i], a_zero[i]);
        }
    };
    if (m < kPrefillRows) quantize(0, m);
    else parallel_rows(rc, m, s_.k, quantize);
    return {aq, a_scale, a_zero};
  }
  kernels::MatMulNBitsQ8Args q8_args(const Q8Rows& rows, float* c) const override {
    kernels::MatMulNBitsQ8Args args;
    args.aq = rows.aq;
    args.ldq = s_.blocks * s_.block;
    args.a_scale = rows.a_scale;
    args.a_zero = rows.a_zero;
    args.blocks = s_.blocks;
    args.block = s_.block;
    args.b = packed_.data();
    args.params = params_.data();
    args.bias = bias_.empty() ? nullptr : bias_.data();
    args.c = c;
    args.ldc = s_.n;
    return args;
  }
  // About kMacsPerTask / 16 multiply-adds (a decode step's GEMV is short: enough tasks for every thread), a
  // multiple of 8 (the q8 kernels' groups start at one of 4).
  int64_t columns_per_task(int64_t m) const override {
    return std::min(s_.n, (std::max<int64_t>(8, kMacsPerTask / 16 / std::max<int64_t>(1, m * s_.k)) + 7) / 8 * 8);
  }

  std::vector<Shape> infer(const std::vector<const Shape*>& in) const override {
    const Shape& a = *in[0];
    if (a.empty() || a.back() != s_.k)
      throw Error(label_ + ": A " + shape_str(a) + " does not end in K = " + std::to_string(s_.k));
    Shape y = a;
    y.back() = s_.n;
    return {y};
  }

  size_t scratch_bytes(const std::vector<const Shape*>& in) const override {
    const int64_t m = rows(*in[0]);
    if (q8_) return static_cast<size_t>(m * (s_.blocks * s_.block + 2 * s_.blocks * sizeof(float)));
    if (m >= kPrefillRows) return 0;
    return static_cast<size_t>(m * s_.blocks) * sizeof(float);
  }

  void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const override {
    const int64_t m = rows(*in[0].shape);
    if (m == 0) return;
    const float* a = in[0].as<float>();
    if (q8_) {
      run_q8(rc, a, m, out[0].as<float>());
      return;
    }
    if (m >= kPrefillRows) {
      run_dequantized(rc, a, m, out[0].as<float>());
      return;
    }
    float* asum = static_cast<float*>(rc.scratch());
    for (int64_t r = 0; r < m; ++r)
      for (int64_t b = 0; b < s_.blocks; ++b) {
        const int64_t k0 = b * s_.block, k1 = std::min(s_.k, k0 + s_.block);
        float sum = 0.f;
        for (int64_t k = k0; k < k1; ++k) sum += a[r * s_.k + k];
        asum[r * s_.blocks + b] = sum;
      }
    kernels::MatMulNBitsArgs args;
    args.a = a;
    args.lda = s_.k;
    args.asum = asum;
    args.k = s_.k;
    args.blocks = s_.blocks;
    args.block = s_.block;
    args.bits = static_cast<int>(s_.bits);
    args.b = b_.data();
    args.scales = scales_.data();
    args.zeros = zeros_.data();
    args.bias = bias_.empty() ? nullptr : bias_.data();
    args.c = out[0].as<float>();
    args.ldc = s_.n;
    for_column_tasks(rc, m, [&](int64_t n0, int64_t n1) { rc.kernels.matmul_nbits(0, m, n0, n1, args); });
  }

 private:
  int64_t rows(const Shape& a) const { return a.empty() ? 0 : shape_numel(a) / s_.k; }

  // Columns shared out over the pool (columns_per_task).
  void for_column_tasks(const RunContext& rc, int64_t m, const std::function<void(int64_t, int64_t)>& fn) const {
    const int64_t per_task = columns_per_task(m);
    const int64_t tasks = (s_.n + per_task - 1) / per_task;
    rc.parallel_for(static_cast<size_t>(tasks), [&](size_t t) {
      const int64_t n0 = static_cast<int64_t>(t) * per_task;
      fn(n0, std::min(s_.n, n0 + per_task));
    });
  }

  // accuracy_level 4 (int8 activations, as the CPU EP runs it): A quantized per row and block, then the kernel's
  // exact u8 x s8 sums.
  void run_q8(const RunContext& rc, const float* a, int64_t m, float* c) const {
    const kernels::MatMulNBitsQ8Args args = q8_args(quantize_rows(rc, a, m), c);
    for_column_tasks(rc, m, [&](int64_t n0, int64_t n1) { rc.kernels.matmul_nbits_q8(0, m, n0, n1, args); });
  }

  // One block of A as int8 (scale max|a| / 127, rounded to nearest even) into dst, per 32 values the 16 at even k
  // then the 16 at odd k, zero past count; its scale and scale x (sum of the int8 values).
  void quantize_block(const float* x, int64_t count, int8_t* dst, float& scale, float& zero) const {
    float amax = 0.f;
    for (int64_t k = 0; k < count; ++k) {
      const float v = x[k] < 0.f ? -x[k] : x[k];
      amax = amax > v ? amax : v;
    }
    scale = amax / 127.f;
    const float inv = scale > 0.f ? 1.f / scale : 0.f;
    // Adding then subtracting 1.5 x 2^23 rounds to nearest even (|v| <= 127): no call to nearbyint per value.
    constexpr float kRound = 12582912.f;
    int32_t sum = 0;
    for (int64_t c = 0; c < s_.block; c += 32)
      for (int64_t i = 0; i < 32; ++i) {
        const int64_t k = c + i;
        const float v = k < count ? std::min(std::max(x[k] * inv, -127.f), 127.f) : 0.f;
        const auto q = static_cast<int8_t>(static_cast<int32_t>((v + kRound) - kRound));
        dst[c + i / 2 + (i % 2) * 16] = q;
        sum += q;
      }
    zero = scale * static_cast<float>(sum);
  }

  // Many rows (a prefill): the GEMM is compute-bound, so each task dequantizes a group of kGroupColumns columns
  // of B to float32 (once for all rows), packs them as the float GEMM's panels in its thread's buffers and runs
  // the sgemm kernels on every row of A against them.
  static constexpr int64_t kPrefillRows = 16;
  static constexpr int64_t kGroupColumns = 64;  // four sgemm panels

  void run_dequantized(const RunContext& rc, const float* a, int64_t m, float* c) const {
    const int64_t groups = (s_.n + kGroupColumns - 1) / kGroupColumns;
    rc.parallel_for(static_cast<size_t>(groups), [&](size_t g) {
      thread_local AlignedVector<float> columns, packed;
      const int64_t n0 = static_cast<int64_t>(g) * kGroupColumns, cols = std::min(kGroupColumns, s_.n - n0);
      columns.resize(static_cast<size_t>(cols * s_.k));
      packed.resize(kernels::sgemm_packed_b_floats(s_.k, cols));
      for (int64_t j = 0; j < cols; ++j) dequantize_column(n0 + j, columns.data() + j * s_.k);
      kernels::sgemm_pack_b(columns.data(), s_.k, true, s_.k, cols, packed.data());
      kernels::SgemmEpilogue ep;
      ep.bias_col = bias_.empty() ? nullptr : bias_.data() + n0;
      rc.kernels.sgemm(0, m, 0, (cols + kernels::kSgemmNR - 1) / kernels::kSgemmNR, cols, s_.k, a, s_.k,
                       packed.data(), c + n0, s_.n, ep);
    });
  }

  // Column n of dequantize(B)^T: its K weights (q - zero) * scale into w.
  void dequantize_column(int64_t n, float* w) const {
    const int64_t blob = s_.blob();
    for (int64_t b = 0; b < s_.blocks; ++b) {
      const uint8_t* q = b_.data() + (n * s_.blocks + b) * blob;
      const float scale = scales_[static_cast<size_t>(n * s_.blocks + b)];
      const float zero = zeros_[static_cast<size_t>(n * s_.blocks + b)];
      const int64_t k0 = b * s_.block, count = std::min(s_.block, s_.k - k0);
      if (s_.bits == 4) {
        for (int64_t i = 0; i + 1 < count; i += 2) {
          w[k0 + i] = (static_cast<float>(q[i / 2] & 15) - zero) * scale;
          w[k0 + i + 1] = (static_cast<float>(q[i / 2] >> 4) - zero) * scale;
        }
        if (count % 2) w[k0 + count - 1] = (static_cast<float>(q[count / 2] & 15) - zero) * scale;
      } else {
        for (int64_t i = 0; i < count; ++i) w[k0 + i] = (static_cast<float>(q[i]) - zero) * scale;
      }
    }
  }

  void read_zeros(const Tensor& z) {
    const int64_t per_n = s_.n * s_.blocks;
    if (z.dtype == DType::kFloat32) {
      if (z.numel() != per_n) throw Error(label_ + ": float zero_points do not hold N x blocks values");
      zeros_.assign(z.data<float>(), z.data<float>() + per_n);
      return;
    }
    // uint8: codes packed like B's, a row of ceil(blocks * bits / 8) bytes per column.
    const int64_t row = (s_.blocks * s_.bits + 7) / 8;
    if (z.numel() != s_.n * row) throw Error(label_ + ": uint8 zero_points do not hold N x ceil(blocks * bits / 8) bytes");
    const uint8_t* p = z.data<uint8_t>();
    for (int64_t c = 0; c < s_.n; ++c)
      for (int64_t b = 0; b < s_.blocks; ++b) {
        const int code = s_.bits == 4 ? (p[c * row + b / 2] >> (b % 2 * 4)) & 15 : p[c * row + b];
        zeros_[static_cast<size_t>(c * s_.blocks + b)] = static_cast<float>(code);
      }
  }

  NBitsShape s_;
  std::string label_;
  std::vector<uint8_t> b_;
  std::vector<float> scales_, zeros_, bias_;
  AlignedVector<uint8_t> packed_;  // with q8_: B, scales and zero points in the q8 kernels' layout (B's own freed)
  AlignedVector<uint8_t> params_;
  const char* kernel_ = nullptr;
  int64_t accuracy_level_ = 0;
  bool q8_ = false;  // int8 activations (accuracy_level 4)
};

std::unique_ptr<Op> create_matmul_nbits(const Node& n, const Graph& g) { return std::make_unique<MatMulNBits>(n, g); }

}  // namespace

std::unique_ptr<MatMulNBitsPart> create_matmul_nbits_part(const Node& n, const Graph& g) {
  return std::make_unique<MatMulNBits>(n, g);
}

std::vector<OpDef> matmul_nbits_op_defs() {
  OpDef d{"MatMulNBits", 1, 1, check_matmul_nbits, create_matmul_nbits};
  d.domain = kMicrosoftDomain;
  return {d};
}

}  // namespace optim
