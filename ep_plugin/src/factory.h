// The EP factory ORT gets from CreateEpFactories: offers OptimEP on the CPU device, creates one
// OptimEp per session.
#pragma once

#include "ort_api.h"

namespace optim {

class OptimEpFactory : public OrtEpFactory {
 public:
  OptimEpFactory();

 private:
  static const char* ORT_API_CALL GetNameImpl(const OrtEpFactory*) noexcept;
  static const char* ORT_API_CALL GetVendorImpl(const OrtEpFactory*) noexcept;
  static uint32_t ORT_API_CALL GetVendorIdImpl(const OrtEpFactory*) noexcept;
  static const char* ORT_API_CALL GetVersionImpl(const OrtEpFactory*) noexcept;
  static OrtStatus* ORT_API_CALL GetSupportedDevicesImpl(OrtEpFactory* self, const OrtHardwareDevice* const* devices,
                                                         size_t num_devices, OrtEpDevice** ep_devices,
                                                         size_t max_ep_devices, size_t* num_ep_devices) noexcept;
  static OrtStatus* ORT_API_CALL CreateEpImpl(OrtEpFactory* self, const OrtHardwareDevice* const* devices,
                                              const OrtKeyValuePairs* const* metadata, size_t num_devices,
                                              const OrtSessionOptions* session_options, const OrtLogger* logger,
                                              OrtEp** ep) noexcept;
  static void ORT_API_CALL ReleaseEpImpl(OrtEpFactory* self, OrtEp* ep) noexcept;
  static OrtStatus* ORT_API_CALL ValidateCompatibilityImpl(OrtEpFactory* self, const OrtHardwareDevice* const* devices,
                                                           size_t num_devices, const char* info,
                                                           OrtCompiledModelCompatibility* out) noexcept;
  static OrtStatus* ORT_API_CALL CreateAllocatorImpl(OrtEpFactory* self, const OrtMemoryInfo* info,
                                                     const OrtKeyValuePairs* options, OrtAllocator** allocator) noexcept;
  static void ORT_API_CALL ReleaseAllocatorImpl(OrtEpFactory* self, OrtAllocator* allocator) noexcept;
  static OrtStatus* ORT_API_CALL CreateDataTransferImpl(OrtEpFactory* self, OrtDataTransferImpl** out) noexcept;
  static bool ORT_API_CALL IsStreamAwareImpl(const OrtEpFactory* self) noexcept;
  static OrtStatus* ORT_API_CALL CreateSyncStreamImpl(OrtEpFactory* self, const OrtMemoryDevice* device,
                                                      const OrtKeyValuePairs* options, OrtSyncStreamImpl** stream) noexcept;
};

}  // namespace optim
