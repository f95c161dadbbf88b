// Loads liboptim_ep.so as an ONNX Runtime host would and calls CreateEpFactories with a fake OrtApiBase
// whose GetApi serves only versions <= MAX (argv[2]): a host too old for OptimEP's API version. Prints
// what came back (status message, factory count); OptimEP must return an error status, not crash.
//   version_harness LIB MAX
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "onnxruntime_c_api.h"

namespace {

uint32_t g_max_version = 0;
OrtApi g_api{};  // every entry NULL except the two the EP may use to report an error

struct FakeStatus {
  OrtErrorCode code;
  std::string message;
};

OrtStatus* ORT_API_CALL create_status(OrtErrorCode code, const char* msg) NO_EXCEPTION {
  return reinterpret_cast<OrtStatus*>(new FakeStatus{code, msg});
}

const OrtApi* ORT_API_CALL get_api(uint32_t version) NO_EXCEPTION { return version <= g_max_version ? &g_api : nullptr; }
const char* ORT_API_CALL version_string() NO_EXCEPTION { return "0.0.0-fake"; }

using CreateFn = OrtStatus* (*)(const char*, const OrtApiBase*, const OrtLogger*, OrtEpFactory**, size_t, size_t*);

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: version_harness LIB MAX_API_VERSION\n");
    return 2;
  }
  g_max_version = static_cast<uint32_t>(std::atoi(argv[2]));
  g_api.CreateStatus = create_status;
  void* lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  auto create = reinterpret_cast<CreateFn>(dlsym(lib, "CreateEpFactories"));
  if (!create) {
    std::fprintf(stderr, "no CreateEpFactories\n");
    return 2;
  }
  OrtApiBase base{get_api, version_string};
  OrtEpFactory* factories[4] = {};
  size_t count = 99;
  OrtStatus* status = create("OptimEP", &base, nullptr, factories, 4, &count);
  auto* fake = reinterpret_cast<FakeStatus*>(status);
  std::printf("factories: %zu\n", count);
  std::printf("status: %s\n", fake ? fake->message.c_str() : "none");
  if (fake) std::printf("code: %d\n", static_cast<int>(fake->code));
  delete fake;
  return 0;
}
