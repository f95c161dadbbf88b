// The library's only two exported symbols (see exports.map): ORT calls them to load and unload OptimEP.
#include "factory.h"

extern "C" {

__attribute__((visibility("default"))) OrtStatus* CreateEpFactories(const char* /*registered_name*/,
                                                                     const OrtApiBase* ort_api_base,
                                                                     const OrtLogger* /*default_logger*/,
                                                                     OrtEpFactory** factories, size_t max_factories,
                                                                     size_t* num_factories) {
  *num_factories = 0;
  const OrtApi* api = ort_api_base->GetApi(optim::kOrtApiVersion);
  if (api == nullptr) return nullptr;  // an ONNX Runtime older than API 23: offer nothing rather than crash
  optim::g_api.ort = api;
  optim::g_api.ep = api->GetEpApi();
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
