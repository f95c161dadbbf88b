// Access to the ONNX Runtime C API the plugin receives at load time, and the error plumbing that turns
// C++ exceptions into OrtStatus messages (nothing may unwind across the ABI).
#pragma once

#include <stdexcept>
#include <string>

#include "onnxruntime_c_api.h"

namespace optim {

// ORT 1.31.1 accepts 23; a value above the header's ORT_API_VERSION segfaults at registration.
// Keep it fixed: newer headers still compile code written for 23.
constexpr uint32_t kOrtApiVersion = 23;
constexpr const char* kEpName = "OptimEP";
constexpr const char* kEpVersion = "0.1.0";
constexpr const char* kVendor = "optim";

struct Api {
  const OrtApi* ort = nullptr;
  const OrtEpApi* ep = nullptr;
};

// Set once in CreateEpFactories before any other entry point runs.
extern Api g_api;

inline const OrtApi& ort() { return *g_api.ort; }
inline const OrtEpApi& ep_api() { return *g_api.ep; }

// Thrown by EP code; converted to an OrtStatus at the ABI boundary.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg, OrtErrorCode code = ORT_FAIL) : std::runtime_error(msg), code_(code) {}
  OrtErrorCode code() const { return code_; }

 private:
  OrtErrorCode code_;
};

// Throws Error carrying ORT's message when an ORT call fails; releases the status.
void check(OrtStatus* status, const char* what);

// Builds an OrtStatus with the EP name prefixed.
OrtStatus* make_status(OrtErrorCode code, const std::string& msg);

// Runs fn and converts any exception into an OrtStatus; the body of every ABI entry point.
template <typename Fn>
OrtStatus* guard(const char* where, Fn&& fn) noexcept {
  try {
    fn();
    return nullptr;
  } catch (const Error& e) {
    return make_status(e.code(), e.what());
  } catch (const std::bad_alloc&) {
    return make_status(ORT_FAIL, std::string(where) + ": out of memory");
  } catch (const std::exception& e) {
    return make_status(ORT_FAIL, std::string(where) + ": " + e.what());
  } catch (...) {
    return make_status(ORT_FAIL, std::string(where) + ": unknown error");
  }
}

}  // namespace optim

#define OPTIM_CHECK(expr) ::optim::check((expr), #expr)
