#include "kernel_table.h"

#include "cpu_features.h"

namespace optim::kernels {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAmx: return "amx";
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

bool isa_supported(Isa isa) {
  if (isa == Isa::kScalar) return true;
  const CpuFeatures& f = cpu_features();
  if (isa == Isa::kAmx) return isa_supported(Isa::kAvx512Vnni) && amx_usable();
  if (isa == Isa::kAvx512Vnni) return f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni;
  return f.avx2 && f.fma;
}

Isa best_isa() {
  if (isa_supported(Isa::kAmx)) return Isa::kAmx;
  if (isa_supported(Isa::kAvx512Vnni)) return Isa::kAvx512Vnni;
  return isa_supported(Isa::kAvx2) ? Isa::kAvx2 : Isa::kScalar;
}

bool parse_isa(const std::string& text, Isa* out) {
  if (text == "auto" || text.empty()) { *out = best_isa(); return true; }
  if (text == "scalar") { *out = Isa::kScalar; return true; }
  if (text == "avx2") { *out = Isa::kAvx2; return true; }
  if (text == "avx512vnni") { *out = Isa::kAvx512Vnni; return true; }
  if (text == "amx") { *out = Isa::kAmx; return true; }
  return false;
}

namespace {

// A table built on another's names the kernel it swapped in.
void rename_kernel(KernelTable& t, const std::string& from, const std::string& to) {
  for (auto& name : t.names)
    if (name == from) name = to;
}

}  // namespace

const KernelTable& kernel_table(Isa isa) {
  static const KernelTable scalar{Isa::kScalar, sgemm_packed_scalar, binary_vv_scalar, binary_vs_scalar,
                                  binary_sv_scalar, unary_scalar, clip_scalar, igemm_packed_scalar,
                                  quantize_scalar, dequantize_scalar, qadd_scalar, iconv_scalar, fconv_scalar,
                                  {"sgemm_f32_scalar", "binary_f32_scalar", "unary_f32_scalar", "clip_f32_scalar",
                                   "igemm_s16pairs_scalar", "quantize_scalar", "dequantize_scalar", "qadd_scalar", "iconv_s16pairs_scalar", "fconv_f32_scalar"}};
  static const KernelTable avx2{Isa::kAvx2, sgemm_packed_avx2_6x16, binary_vv_avx2, binary_vs_avx2,
                                binary_sv_avx2, unary_avx2, clip_avx2, igemm_packed_avx2_4x16,
                                quantize_avx2, dequantize_avx2, qadd_avx2, iconv_avx2_8x8, fconv_avx2_6x16,
                                {"sgemm_f32_avx2_6x16", "binary_f32_avx2", "unary_f32_avx2", "clip_f32_avx2",
                                 "igemm_s16pairs_avx2_4x16", "quantize_avx2", "dequantize_avx2", "qadd_avx2", "iconv_s16pairs_avx2_8x8", "fconv_f32_avx2_6x16"}};
  static const KernelTable vnni = [] {
    KernelTable t = avx2;
    t.isa = Isa::kAvx512Vnni;
    t.sgemm_packed = sgemm_packed_avx512_8x32;
    t.fconv = fconv_avx512_8x32;
    rename_kernel(t, "sgemm_f32_avx2_6x16", "sgemm_f32_avx512_8x32");
    rename_kernel(t, "fconv_f32_avx2_6x16", "fconv_f32_avx512_8x32");
    t.igemm_u8s8 = igemm_u8s8_avx512vnni;
    t.names.push_back("igemm_u8s8_avx512vnni_8x32");
    t.iconv_u8s8 = iconv_u8s8_avx512vnni;
    t.names.push_back("iconv_u8s8_avx512vnni_16x8");
    return t;
  }();
  static const KernelTable amx = [] {
    KernelTable t = vnni;
    t.isa = Isa::kAmx;
    t.igemm_u8s8 = igemm_u8s8_amx;
    t.igemm_u8s8_kq_multiple = kAmxKq;
    t.igemm_u8s8_row_pad = kAmxRows - 1;
    rename_kernel(t, "igemm_u8s8_avx512vnni_8x32", "igemm_u8s8_amx_32x32");
    return t;
  }();
  if (isa == Isa::kAmx) return amx;
  if (isa == Isa::kAvx512Vnni) return vnni;
  return isa == Isa::kAvx2 ? avx2 : scalar;
}

}  // namespace optim::kernels
