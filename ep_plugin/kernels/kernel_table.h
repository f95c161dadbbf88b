// The one table of compute kernels, per instruction set. Ops call kernels only through a KernelTable
// chosen once (best available ISA, or forced by the `isa` EP option), so every optimized kernel has a
// scalar reference twin that tests run side by side.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace optim::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1 };

const char* isa_name(Isa isa);
// Best ISA this CPU runs, best first: AVX2+FMA, then scalar.
Isa best_isa();
bool isa_supported(Isa isa);
// Parses "scalar" / "avx2" / "auto"; returns false for anything else.
bool parse_isa(const std::string& text, Isa* out);

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
using SgemmPackedFn = void (*)(int64_t m0, int64_t m1, int64_t p0, int64_t p1, int64_t n, int64_t k,
                               const float* a, int64_t lda, const float* b_packed, float* c, int64_t ldc,
                               const SgemmEpilogue& ep);

size_t sgemm_packed_b_floats(int64_t k, int64_t n);
// Packs B (row-major k x n with stride ldb, or, with trans_b, stored n x k) into dst.
void sgemm_pack_b(const float* b, int64_t ldb, bool trans_b, int64_t k, int64_t n, float* dst);

// --- element-wise float32 -----------------------------------------------------------------------
enum class BinaryOp { kAdd = 0, kSub, kMul, kDiv };
enum class UnaryOp { kRelu = 0, kSigmoid, kTanh, kErf, kSqrt, kExp, kNeg, kAbs, kGelu, kGeluTanh };

// out[i] = a[i] op b[i] (both vectors), or with a scalar operand on the side that is a scalar.
using BinaryVVFn = void (*)(BinaryOp op, const float* a, const float* b, float* out, int64_t n);
using BinaryVSFn = void (*)(BinaryOp op, const float* a, float b, float* out, int64_t n);
using BinarySVFn = void (*)(BinaryOp op, float a, const float* b, float* out, int64_t n);
using UnaryFn = void (*)(UnaryOp op, const float* x, float* y, int64_t n);
using ClipFn = void (*)(const float* x, float* y, int64_t n, float lo, float hi);

struct KernelTable {
  Isa isa;
  SgemmPackedFn sgemm_packed;
  BinaryVVFn binary_vv;
  BinaryVSFn binary_vs;
  BinarySVFn binary_sv;
  UnaryFn unary;
  ClipFn clip;
  // Names of the kernels in this table, for `optim doctor`.
  std::vector<std::string> names;
};

const KernelTable& kernel_table(Isa isa);

// Per-ISA implementations (defined in *_scalar.cc / *_avx2.cc).
void sgemm_packed_scalar(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float*, int64_t,
                         const float*, float*, int64_t, const SgemmEpilogue&);
void sgemm_packed_avx2_6x16(int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, const float*, int64_t,
                            const float*, float*, int64_t, const SgemmEpilogue&);
void binary_vv_scalar(BinaryOp, const float*, const float*, float*, int64_t);
void binary_vs_scalar(BinaryOp, const float*, float, float*, int64_t);
void binary_sv_scalar(BinaryOp, float, const float*, float*, int64_t);
void unary_scalar(UnaryOp, const float*, float*, int64_t);
void clip_scalar(const float*, float*, int64_t, float, float);
void binary_vv_avx2(BinaryOp, const float*, const float*, float*, int64_t);
void binary_vs_avx2(BinaryOp, const float*, float, float*, int64_t);
void binary_sv_avx2(BinaryOp, float, const float*, float*, int64_t);
void unary_avx2(UnaryOp, const float*, float*, int64_t);
void clip_avx2(const float*, float*, int64_t, float, float);

}  // namespace optim::kernels
