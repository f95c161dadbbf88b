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

KernelTable build_table(Isa isa) {
  KernelTable t;
  t.isa = isa;
  // Per family, the row of the highest ISA not above `isa`.
#define OPTIM_KERNEL(family, row_isa, symbol, mr, nr, k_multiple, row_pad)   \
  if (Isa::row_isa <= isa && (!t.family || t.family.isa < Isa::row_isa)) \
    t.family = {symbol, #symbol, Isa::row_isa, {mr, nr, k_multiple, row_pad}};
#define OPTIM_KERNEL_IF(feature, family, row_isa, symbol, mr, nr, k_multiple, row_pad) \
  if (cpu_features().feature) OPTIM_KERNEL(family, row_isa, symbol, mr, nr, k_multiple, row_pad)
#include "kernel_list.inc"
#undef OPTIM_KERNEL
#undef OPTIM_KERNEL_IF
  return t;
}

}  // namespace

std::vector<std::string> KernelTable::names() const {
  std::vector<std::string> out;
#define OPTIM_KERNEL(family, row_isa, symbol, ...) \
  if (family.fn == symbol) out.push_back(#symbol);
#define OPTIM_KERNEL_IF(feature, family, row_isa, symbol, ...) OPTIM_KERNEL(family, row_isa, symbol)
#include "kernel_list.inc"
#undef OPTIM_KERNEL
#undef OPTIM_KERNEL_IF
  return out;
}

const std::vector<KernelRow>& kernel_rows() {
  static const std::vector<KernelRow> rows = {
#define OPTIM_KERNEL(family, row_isa, symbol, ...) {#family, Isa::row_isa, #symbol},
#define OPTIM_KERNEL_IF(feature, family, row_isa, symbol, ...) {#family, Isa::row_isa, #symbol, #feature, cpu_features().feature},
#include "kernel_list.inc"
#undef OPTIM_KERNEL
#undef OPTIM_KERNEL_IF
  };
  return rows;
}

const KernelTable& kernel_table(Isa isa) {
  static const KernelTable tables[] = {build_table(Isa::kScalar), build_table(Isa::kAvx2), build_table(Isa::kAvx512Vnni),
                                       build_table(Isa::kAmx)};
  return tables[static_cast<int>(isa)];
}

}  // namespace optim::kernels
