#include "options.h"

#include <cctype>
#include <string>

namespace optim {
namespace {

bool get_entry(const OrtSessionOptions* so, const std::string& key, std::string* value) {
  int has = 0;
  OPTIM_CHECK(ort().HasSessionConfigEntry(so, key.c_str(), &has));
  if (!has) return false;
  size_t size = 0;
  OPTIM_CHECK(ort().GetSessionConfigEntry(so, key.c_str(), nullptr, &size));
  std::string buf(size, '\0');
  OPTIM_CHECK(ort().GetSessionConfigEntry(so, key.c_str(), buf.data(), &size));
  while (!buf.empty() && buf.back() == '\0') buf.pop_back();
  *value = buf;
  return true;
}

std::string key(const char* k) { return std::string("ep.optimep.") + k; }

size_t non_negative(const char* name, const std::string& v) {
  bool ok = !v.empty();
  for (char c : v) ok = ok && std::isdigit(static_cast<unsigned char>(c));
  if (!ok || v.size() > 9) throw Error(std::string("option ") + name + "='" + v + "' is not a non-negative integer", ORT_INVALID_ARGUMENT);
  return static_cast<size_t>(std::stoul(v));
}

}  // namespace

EpOptions read_options(const OrtSessionOptions* so) {
  EpOptions o;
  std::string v;
  if (get_entry(so, key("isa"), &v)) {
    if (!kernels::parse_isa(v, &o.isa))
      throw Error("option isa='" + v + "' is not one of auto, " + kernels::isa_names(), ORT_INVALID_ARGUMENT);
    if (!kernels::isa_supported(o.isa))
      throw Error("option isa='" + v + "' is not supported by this CPU (avx2 needs AVX2 and FMA; avxvnni also "
                  "AVX-VNNI; avx512 AVX2 and AVX-512 F, BW and VL; avx512vnni also AVX-512 VNNI; amx also AMX-INT8 "
                  "with the OS's permission)", ORT_INVALID_ARGUMENT);
  }
  if (get_entry(so, key("min_partition_nodes"), &v)) o.min_partition_nodes = non_negative("min_partition_nodes", v);
  if (get_entry(so, key("placement_report"), &v)) o.placement_report = v;
  if (get_entry(so, key("profile"), &v)) o.profile = v;
  if (get_entry(so, key("profile_warmup"), &v)) o.profile_warmup = non_negative("profile_warmup", v);
  if (get_entry(so, key("log"), &v)) {
    if (v != "0" && v != "1") throw Error("option log='" + v + "' is not 0 or 1", ORT_INVALID_ARGUMENT);
    o.log = v == "1";
  }
  if (get_entry(so, key("channels_last"), &v)) {
    if (v != "0" && v != "1") throw Error("option channels_last='" + v + "' is not 0 or 1", ORT_INVALID_ARGUMENT);
    o.channels_last = v == "1";
  }
  if (get_entry(so, key("winograd"), &v)) {
    if (v != "0" && v != "1") throw Error("option winograd='" + v + "' is not 0 or 1", ORT_INVALID_ARGUMENT);
    o.winograd = v == "1";
  }
  if (get_entry(so, key("precision"), &v)) {
    if (v != "fp32" && v != "bf16") throw Error("option precision='" + v + "' is not fp32 or bf16", ORT_INVALID_ARGUMENT);
    o.bf16 = v == "bf16";
    if (o.bf16 && !kernels::bf16_supported(o.isa))
      throw Error(std::string("option precision=bf16 needs a CPU with AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4 "
                              "and later) and isa at least avx512; isa=") + kernels::isa_name(o.isa) + " has no bf16 "
                  "GEMM on this CPU (isa=scalar runs the reference, slowly)", ORT_INVALID_ARGUMENT);
  }
  return o;
}

}  // namespace optim
