#include "ort_api.h"

namespace optim {

Api g_api;

void check(OrtStatus* status, const char* what) {
  if (status == nullptr) return;
  std::string msg = ort().GetErrorMessage(status);
  OrtErrorCode code = ort().GetErrorCode(status);
  ort().ReleaseStatus(status);
  throw Error(std::string("ONNX Runtime call failed (") + what + "): " + msg, code);
}

OrtStatus* make_status(OrtErrorCode code, const std::string& msg) {
  return ort().CreateStatus(code, (std::string(kEpName) + ": " + msg).c_str());
}

}  // namespace optim
