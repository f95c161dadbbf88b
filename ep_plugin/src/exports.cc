// The library's only two exported symbols (see exports.map): ORT calls them to load and unload OptimEP.
#include <string>

#include "factory.h"

namespace {

// The host's ONNX Runtime cannot hand OptimEP the API it was written for (kOrtApiVersion): an ORT older
// than 1.23, or one that dropped that version. The error is built with API version 1's CreateStatus,
// which every ONNX Runtime offers (the OrtApi table only grows); without even that, nothing is offered.
OrtStatus* api_version_error(const OrtApiBase* base, const OrtApi* api) {
  const char* version = base->GetVersionString ? base->GetVersionString() : nullptr;
  std::string message = std::string(optim::kEpName) + ": needs the ONNX Runtime C API version " +
                        std::to_string(optim::kOrtApiVersion) + " (ONNX Runtime 1.23 or newer, with the plugin EP API); " +
                        "this ONNX Runtime (" + (version ? version : "version unknown") + ") " +
                        (api ? "offers no plugin EP API." : "does not offer that version.") +
                        " Install onnxruntime==1.31.1 (the version OptimEP is tested with).";
  const OrtApi* v1 = base->GetApi(1);
  return v1 && v1->CreateStatus ? v1->CreateStatus(ORT_NOT_IMPLEMENTED, message.c_str()) : nullptr;
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) OrtStatus* CreateEpFactories(const char* /*registered_name*/,
                                                                     const OrtApiBase* ort_api_base,
                                                                     const OrtLogger* /*default_logger*/,
                                                                     OrtEpFactory** factories, size_t max_factories,
                                                                     size_t* num_factories) {
  *num_factories = 0;
  if (ort_api_base == nullptr || ort_api_base->GetApi == nullptr) return nullptr;  // nothing to report through
  // Ask for the version the structs below were written for, never the header's ORT_API_VERSION: a newer
  // ONNX Runtime still serves 23, and asking for more than the host has is what an old host refuses here.
  const OrtApi* api = ort_api_base->GetApi(optim::kOrtApiVersion);
  const OrtEpApi* ep = api && api->GetEpApi ? api->GetEpApi() : nullptr;
  if (api == nullptr || ep == nullptr) return api_version_error(ort_api_base, api);
  optim::g_api.ort = api;
  optim::g_api.ep = ep;
  return optim::guard("CreateEpFactories", [&] {
    if (max_factories < 1) throw optim::Error("ONNX Runtime offered no room for a factory", ORT_INVALID_ARGUMENT);
    factories[0] = new optim::OptimEpFactory();
    *num_factories = 1;
  });
}

__attribute__((visibility("default"))) OrtStatus* ReleaseEpFactory(OrtEpFactory* factory) {
  delete static_cast<optim::OptimEpFactory*>(factory);
  return nullptr;
}

}  // extern "C"
