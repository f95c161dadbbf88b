#include "kernel_table.h"

#include "cpu_features.h"

namespace optim::kernels {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kAmx: return "amx";
    case Isa::kAvx512Vnni: return "avx512vnni";
    case Isa::kAvx512: return "avx512";
    case Isa::kAvxVnni: return "avxvnni";
    case Isa::kAvx2: return "avx2";
    default: return "scalar";
  }
}

bool isa_supported(Isa isa) {
  if (isa == Isa::kScalar) return true;
  const CpuFeatures& f = cpu_features();
  if (isa == Isa::kAmx) return isa_supported(Isa::kAvx512Vnni) && amx_usable();
  if (isa == Isa::kAvx512Vnni) return isa_supported(Isa::kAvx512) && f.avx512vnni;
  if (isa == Isa::kAvx512) return f.avx2 && f.fma && f.avx512f && f.avx512bw && f.avx512vl;
  if (isa == Isa::kAvxVnni) return f.avx2 && f.fma && f.avx_vnni;
  return f.avx2 && f.fma;
}

Isa best_isa() {
  for (Isa isa : {Isa::kAmx, Isa::kAvx512Vnni, Isa::kAvx512, Isa::kAvxVnni, Isa::kAvx2})
    if (isa_supported(isa)) return isa;
  return Isa::kScalar;
}

bool parse_isa(const std::string& text, Isa* out) {
  if (text == "auto" || text.empty()) {
    *out = best_isa();
    return true;
  }
  for (int i = 0; i < kIsaCount; ++i)
    if (text == isa_name(static_cast<Isa>(i))) {
      *out = static_cast<Isa>(i);
      return true;
    }
  return false;
}

const char* isa_names() { return "scalar, avx2, avxvnni, avx512, avx512vnni, amx"; }

namespace {

bool bf16_only(const std::string& family) { return family == "sgemm_bf16" || family == "convert_bf16"; }

KernelTable build_table(Isa isa) {
  KernelTable t;
  t.isa = isa;
  // Per family, the row of the highest ISA not above `isa`.
#define OPTIM_ROW(family, row_isa, symbol, mr, nr, k_multiple, row_pad, int16_pairs) \
  if (Isa::row_isa <= isa && (!t.family || t.family.isa < Isa::row_isa))         \
    t.family = {symbol, #symbol, Isa::row_isa, {mr, nr, k_multiple, row_pad, int16_pairs}};
#define OPTIM_KERNEL(family, row_isa, symbol, mr, nr, k_multiple, row_pad) \
  OPTIM_ROW(family, row_isa, symbol, mr, nr, k_multiple, row_pad, false)
#define OPTIM_KERNEL_IF(feature, family, row_isa, symbol, mr, nr, k_multiple, row_pad) \
  if (cpu_features().feature) OPTIM_KERNEL(family, row_isa, symbol, mr, nr, k_multiple, row_pad)
#define OPTIM_KERNEL_PAIRS(family, row_isa, symbol, mr, nr, k_multiple, row_pad) \
  OPTIM_ROW(family, row_isa, symbol, mr, nr, k_multiple, row_pad, true)
#include "kernel_list.inc"
#undef OPTIM_ROW
#undef OPTIM_KERNEL
#undef OPTIM_KERNEL_IF
#undef OPTIM_KERNEL_PAIRS
  return t;
}

}  // namespace

std::vector<std::string> KernelTable::names() const {
  std::vector<std::string> out;
#define OPTIM_KERNEL(family, row_isa, symbol, ...) \
  if (family.fn == symbol) out.push_back(#symbol);
#define OPTIM_KERNEL_IF(feature, family, row_isa, symbol, ...) OPTIM_KERNEL(family, row_isa, symbol)
#define OPTIM_KERNEL_PAIRS(family, row_isa, symbol, ...) OPTIM_KERNEL(family, row_isa, symbol)
#include "kernel_list.inc"
#undef OPTIM_KERNEL
#undef OPTIM_KERNEL_IF
#undef OPTIM_KERNEL_PAIRS
  return out;
}

const std::vector<KernelRow>& kernel_rows() {
  static const std::vector<KernelRow> rows = {
#define OPTIM_KERNEL(family, row_isa, symbol, ...) {#family, Isa::row_isa, #symbol, "", true, bf16_only(#family)},
#define OPTIM_KERNEL_IF(feature, family, row_isa, symbol, ...) \
  {#family, Isa::row_isa, #symbol, #feature, cpu_features().feature, bf16_only(#family)},
#define OPTIM_KERNEL_PAIRS(family, row_isa, symbol, ...) {#family, Isa::row_isa, #symbol, "", true, false},
#include "kernel_list.inc"
#undef OPTIM_KERNEL
#undef OPTIM_KERNEL_IF
#undef OPTIM_KERNEL_PAIRS
  };
  return rows;
}

const KernelTable& kernel_table(Isa isa, bool bf16) {
  static const KernelTable tables[kIsaCount] = {build_table(Isa::kScalar),     build_table(Isa::kAvx2),
                                                build_table(Isa::kAvxVnni),    build_table(Isa::kAvx512),
                                                build_table(Isa::kAvx512Vnni), build_table(Isa::kAmx)};
  static const std::vector<KernelTable> fp32 = [] {  // the same without the bf16-only families
    std::vector<KernelTable> t(std::begin(tables), std::end(tables));
    for (KernelTable& table : t) {
      table.sgemm_bf16 = {};
      table.convert_bf16 = {};
    }
    return t;
  }();
  return bf16 ? tables[static_cast<int>(isa)] : fp32[static_cast<size_t>(isa)];
}

bool bf16_supported(Isa isa) {
  const Kernel<SgemmBf16Fn>& k = kernel_table(isa, true).sgemm_bf16;
  return k && (k.isa != Isa::kScalar || isa == Isa::kScalar);
}

}  // namespace optim::kernels
