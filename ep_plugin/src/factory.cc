#include "factory.h"

#include "ep.h"

namespace optim {

OptimEpFactory::OptimEpFactory() : OrtEpFactory{} {
  // Every field is filled: ORT 1.31 calls GetVersion and CreateDataTransfer unconditionally.
  ort_version_supported = kOrtApiVersion;
  GetName = GetNameImpl;
  GetVendor = GetVendorImpl;
  GetSupportedDevices = GetSupportedDevicesImpl;
  CreateEp = CreateEpImpl;
  ReleaseEp = ReleaseEpImpl;
  GetVendorId = GetVendorIdImpl;
  GetVersion = GetVersionImpl;
  ValidateCompiledModelCompatibilityInfo = ValidateCompatibilityImpl;
  CreateAllocator = CreateAllocatorImpl;
  ReleaseAllocator = ReleaseAllocatorImpl;
  CreateDataTransfer = CreateDataTransferImpl;
  IsStreamAware = IsStreamAwareImpl;
  CreateSyncStreamForDevice = CreateSyncStreamImpl;
}

const char* ORT_API_CALL OptimEpFactory::GetNameImpl(const OrtEpFactory*) noexcept { return kEpName; }
const char* ORT_API_CALL OptimEpFactory::GetVendorImpl(const OrtEpFactory*) noexcept { return kVendor; }
uint32_t ORT_API_CALL OptimEpFactory::GetVendorIdImpl(const OrtEpFactory*) noexcept { return 0; }
const char* ORT_API_CALL OptimEpFactory::GetVersionImpl(const OrtEpFactory*) noexcept { return kEpVersion; }

OrtStatus* ORT_API_CALL OptimEpFactory::GetSupportedDevicesImpl(OrtEpFactory* self, const OrtHardwareDevice* const* devices,
                                                                size_t num_devices, OrtEpDevice** ep_devices,
                                                                size_t max_ep_devices, size_t* num_ep_devices) noexcept {
  return guard("GetSupportedDevices", [&] {
    *num_ep_devices = 0;
    for (size_t i = 0; i < num_devices && *num_ep_devices < max_ep_devices; ++i) {
      if (ort().HardwareDevice_Type(devices[i]) != OrtHardwareDeviceType_CPU) continue;
      OrtEpDevice* d = nullptr;
      OPTIM_CHECK(ep_api().CreateEpDevice(self, devices[i], nullptr, nullptr, &d));
      ep_devices[(*num_ep_devices)++] = d;
      break;  // one CPU device is enough: OptimEP uses ORT's intra-op pool, not per-device threads
    }
  });
}

OrtStatus* ORT_API_CALL OptimEpFactory::CreateEpImpl(OrtEpFactory*, const OrtHardwareDevice* const*,
                                                     const OrtKeyValuePairs* const*, size_t,
                                                     const OrtSessionOptions* session_options, const OrtLogger* logger,
                                                     OrtEp** ep) noexcept {
  *ep = nullptr;
  return guard("CreateEp", [&] { *ep = new OptimEp(read_options(session_options), logger); });
}

void ORT_API_CALL OptimEpFactory::ReleaseEpImpl(OrtEpFactory*, OrtEp* ep) noexcept { delete static_cast<OptimEp*>(ep); }

OrtStatus* ORT_API_CALL OptimEpFactory::ValidateCompatibilityImpl(OrtEpFactory*, const OrtHardwareDevice* const*, size_t,
                                                                  const char*, OrtCompiledModelCompatibility* out) noexcept {
  *out = OrtCompiledModelCompatibility_EP_NOT_APPLICABLE;  // OptimEP writes no precompiled (EPContext) models
  return nullptr;
}

OrtStatus* ORT_API_CALL OptimEpFactory::CreateAllocatorImpl(OrtEpFactory*, const OrtMemoryInfo*, const OrtKeyValuePairs*,
                                                            OrtAllocator** allocator) noexcept {
  *allocator = nullptr;  // CPU memory: ORT's default allocator serves
  return nullptr;
}

void ORT_API_CALL OptimEpFactory::ReleaseAllocatorImpl(OrtEpFactory*, OrtAllocator*) noexcept {}

OrtStatus* ORT_API_CALL OptimEpFactory::CreateDataTransferImpl(OrtEpFactory*, OrtDataTransferImpl** out) noexcept {
  *out = nullptr;  // host memory only: nothing to copy between devices
  return nullptr;
}

bool ORT_API_CALL OptimEpFactory::IsStreamAwareImpl(const OrtEpFactory*) noexcept { return false; }

OrtStatus* ORT_API_CALL OptimEpFactory::CreateSyncStreamImpl(OrtEpFactory*, const OrtMemoryDevice*, const OrtKeyValuePairs*,
                                                             OrtSyncStreamImpl** stream) noexcept {
  *stream = nullptr;
  return nullptr;
}

}  // namespace optim
