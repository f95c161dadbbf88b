// A C++ application that embeds ONNX Runtime and runs a model on OptimEP: it registers the plugin library
// by path, picks OptimEP's device(s), appends them to the session with EP options, runs the model once on
// the inputs given (.npy) or random ones, and prints each output (shape, first values, sum) and which
// execution provider ran each node. On any ONNX Runtime error (a bad model, a bad option) it prints ORT's
// message and exits 1; on a bad command line it exits 2.
//
//   optim_host MODEL --ep-library liboptim_ep.so [--ep-option isa=avx2] [--input x=x.npy] [--dim 8]
//              [--threads N] [--no-fallback] [--save-outputs DIR] [--seed N] [--no-trace]
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "ep_trace.h"
#include "npy.h"
#include "onnxruntime_cxx_api.h"

namespace {

constexpr const char* kEpName = "OptimEP";  // the name OptimEP's factory reports (and we register it under)

struct Args {
  std::string model;
  std::string ep_library;
  std::unordered_map<std::string, std::string> ep_options;
  std::map<std::string, std::string> input_files;  // input name -> .npy
  int64_t dim = 1;                                  // the size of every symbolic dimension of random inputs
  int threads = 0;                                  // 0: ONNX Runtime's default
  bool fallback = true;
  bool trace = true;
  std::string save_outputs;
  unsigned seed = 0;
};

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::pair<std::string, std::string> split_pair(const std::string& text, const char* flag) {
  size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw UsageError(std::string(flag) + " takes NAME=VALUE, got '" + text + "'");
  return {text.substr(0, eq), text.substr(eq + 1)};
}

Args parse_args(int argc, char** argv) {
  Args args;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw UsageError(a + " needs a value");
      return argv[++i];
    };
    if (a == "--ep-library") args.ep_library = value();
    else if (a == "--ep-option") args.ep_options.insert(split_pair(value(), "--ep-option"));
    else if (a == "--input") args.input_files.insert(split_pair(value(), "--input"));
    else if (a == "--dim") args.dim = std::stoll(value());
    else if (a == "--threads") args.threads = std::stoi(value());
    else if (a == "--seed") args.seed = static_cast<unsigned>(std::stoul(value()));
    else if (a == "--save-outputs") args.save_outputs = value();
    else if (a == "--no-fallback") args.fallback = false;
    else if (a == "--no-trace") args.trace = false;
    else if (!a.empty() && a[0] == '-') throw UsageError("unknown option " + a);
    else if (args.model.empty()) args.model = a;
    else throw UsageError("one model only, got '" + args.model + "' and '" + a + "'");
  }
  if (args.model.empty()) throw UsageError("no model given");
  if (args.ep_library.empty()) throw UsageError("--ep-library PATH is required (`optim doctor` prints the path)");
  return args;
}

// Random values of the input's type: floats in [-1, 1), integers in [0, 10), bools.
host::Array random_input(ONNXTensorElementDataType type, std::vector<int64_t> shape, int64_t dim, std::mt19937& rng) {
  host::Array array{type, std::move(shape), {}};
  size_t count = 1;
  for (int64_t& d : array.shape) {
    if (d < 0) d = dim;  // a symbolic dimension
    count *= static_cast<size_t>(d);
  }
  size_t size = host::element_size(type);
  if (size == 0) throw std::runtime_error(std::string("cannot make random inputs of type ") + host::type_name(type));
  array.bytes.resize(count * size);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  std::uniform_int_distribution<int> small(0, 9);
  for (size_t i = 0; i < count; ++i) {
    void* at = array.bytes.data() + i * size;
    switch (type) {
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: *static_cast<float*>(at) = real(rng); break;
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: *static_cast<double*>(at) = real(rng); break;
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: *static_cast<int64_t*>(at) = small(rng); break;
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: *static_cast<int32_t*>(at) = small(rng); break;
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: *static_cast<uint8_t*>(at) = small(rng) & 1; break;
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
      case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: *static_cast<uint8_t*>(at) = static_cast<uint8_t>(small(rng)); break;
      default: throw std::runtime_error(std::string("cannot make random inputs of type ") + host::type_name(type));
    }
  }
  return array;
}

double element_as_double(const host::Array& a, size_t i) {
  const void* at = a.bytes.data() + i * host::element_size(a.type);
  switch (a.type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return *static_cast<const float*>(at);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return *static_cast<const double*>(at);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return static_cast<double>(*static_cast<const int64_t*>(at));
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return *static_cast<const int32_t*>(at);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return *static_cast<const int16_t*>(at);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return *static_cast<const uint16_t*>(at);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return *static_cast<const uint32_t*>(at);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return static_cast<double>(*static_cast<const uint64_t*>(at));
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return *static_cast<const int8_t*>(at);
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return *static_cast<const uint8_t*>(at);
    default: return 0.0;  // float16: shown as 0 (the saved .npy has the real bits)
  }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) text += (i ? "," : "") + std::to_string(shape[i]);
  return text + "]";
}

void print_array(const char* kind, const std::string& name, const host::Array& a, const std::string& from = "") {
  size_t count = a.bytes.size() / std::max<size_t>(1, host::element_size(a.type));
  std::printf("%s %s: %s %s", kind, name.c_str(), host::type_name(a.type), shape_text(a.shape).c_str());
  if (!from.empty()) std::printf(" (%s)", from.c_str());
  if (std::strcmp(kind, "output") == 0) {
    double sum = 0;
    for (size_t i = 0; i < count; ++i) sum += element_as_double(a, i);
    std::printf(" first:");
    for (size_t i = 0; i < count && i < 6; ++i) std::printf(" %.6g", element_as_double(a, i));
    std::printf("%s sum: %.9g", count > 6 ? " ..." : "", sum);
  }
  std::printf("\n");
}

int run(const Args& args) {
  // Fatal only: every error reaches us as an exception, printed once by main().
  Ort::Env env(ORT_LOGGING_LEVEL_FATAL, "optim_host");
  std::printf("ONNX Runtime %s\n", Ort::GetVersionString().c_str());

  // Register the plugin once per process and keep it: unregistering while a session lives crashes ORT.
  // Absolute: ONNX Runtime resolves a relative library path against its own folder, not ours.
  env.RegisterExecutionProviderLibrary(kEpName, std::filesystem::absolute(args.ep_library).string());
  std::vector<Ort::ConstEpDevice> devices;
  for (const Ort::ConstEpDevice& device : env.GetEpDevices())
    if (std::strcmp(device.EpName(), kEpName) == 0) devices.push_back(device);
  if (devices.empty()) throw std::runtime_error(args.ep_library + " registered but offers no OptimEP device");
  for (const Ort::ConstEpDevice& device : devices)
    std::printf("%s device: vendor %s, hardware %s\n", device.EpName(), device.EpVendor(),
                device.Device().Type() == OrtHardwareDeviceType_CPU ? "CPU" : "other");

  Ort::SessionOptions options;
  options.SetGraphOptimizationLevel(GraphOptimizationLevel::ORT_ENABLE_BASIC);  // what optim.session() uses
  if (args.threads > 0) options.SetIntraOpNumThreads(args.threads);
  if (!args.fallback) options.AddConfigEntry("session.disable_cpu_ep_fallback", "1");
  std::string trace_prefix = (std::filesystem::temp_directory_path() / ("optim_host_" + std::to_string(::getpid()))).string();
  if (args.trace) options.EnableProfiling(trace_prefix.c_str());
  // EP options reach OptimEP as session config entries ep.optimep.<key>.
  options.AppendExecutionProvider_V2(env, devices, args.ep_options);

  Ort::Session session(env, args.model.c_str(), options);
  Ort::AllocatorWithDefaultOptions allocator;

  std::mt19937 rng(args.seed);
  std::vector<std::string> input_names;
  std::vector<host::Array> inputs;
  std::vector<Ort::Value> input_values;
  Ort::MemoryInfo cpu = Ort::MemoryInfo::CreateCpu(OrtArenaAllocator, OrtMemTypeDefault);
  for (size_t i = 0; i < session.GetInputCount(); ++i) {
    input_names.push_back(session.GetInputNameAllocated(i, allocator).get());
    Ort::TypeInfo type = session.GetInputTypeInfo(i);  // owns what info points into
    auto info = type.GetTensorTypeAndShapeInfo();
    auto file = args.input_files.find(input_names.back());
    if (file != args.input_files.end()) {
      inputs.push_back(host::read_npy(file->second));
      if (inputs.back().type != info.GetElementType())
        throw std::runtime_error(file->second + " holds " + host::type_name(inputs.back().type) + ", input '" +
                                 input_names.back() + "' takes " + host::type_name(info.GetElementType()));
    } else {
      inputs.push_back(random_input(info.GetElementType(), info.GetShape(), args.dim, rng));
    }
    print_array("input", input_names.back(), inputs.back(), file != args.input_files.end() ? file->second : "random");
  }
  for (const auto& named : args.input_files)
    if (std::find(input_names.begin(), input_names.end(), named.first) == input_names.end())
      throw std::runtime_error("the model has no input '" + named.first + "'");
  for (host::Array& a : inputs)
    input_values.push_back(Ort::Value::CreateTensor(cpu, a.bytes.data(), a.bytes.size(), a.shape.data(), a.shape.size(), a.type));

  std::vector<std::string> output_names;
  for (size_t i = 0; i < session.GetOutputCount(); ++i) output_names.push_back(session.GetOutputNameAllocated(i, allocator).get());
  std::vector<const char*> in_ptrs, out_ptrs;
  for (auto& n : input_names) in_ptrs.push_back(n.c_str());
  for (auto& n : output_names) out_ptrs.push_back(n.c_str());

  std::vector<Ort::Value> outputs = session.Run(Ort::RunOptions{nullptr}, in_ptrs.data(), input_values.data(),
                                                input_values.size(), out_ptrs.data(), out_ptrs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].IsTensor()) {
      std::printf("output %s: not a tensor (sequence or map), not shown\n", output_names[i].c_str());
      continue;
    }
    auto info = outputs[i].GetTensorTypeAndShapeInfo();
    host::Array a{info.GetElementType(), info.GetShape(), {}};
    size_t size = host::element_size(a.type);
    if (size == 0) {
      std::printf("output %s: %s, not shown\n", output_names[i].c_str(), host::type_name(a.type));
      continue;
    }
    const auto* data = static_cast<const uint8_t*>(outputs[i].GetTensorRawData());
    a.bytes.assign(data, data + info.GetElementCount() * size);
    print_array("output", output_names[i], a);
    if (!args.save_outputs.empty()) host::write_npy(args.save_outputs + "/" + output_names[i] + ".npy", a);
  }

  if (args.trace) {
    std::string trace = session.EndProfilingAllocated(allocator).get();
    for (const host::NodeRun& n : host::nodes_run(trace))
      std::printf("node %s (%s) ran on %s\n", n.node.c_str(), n.op.c_str(), n.provider.c_str());
    std::filesystem::remove(trace);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  try {
    args = parse_args(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optim_host: %s\nusage: optim_host MODEL --ep-library PATH [--ep-option K=V]... [--input NAME=FILE.npy]... "
                         "[--dim N] [--threads N] [--no-fallback] [--save-outputs DIR] [--seed N] [--no-trace]\n", e.what());
    return 2;
  }
  try {
    return run(args);
  } catch (const Ort::Exception& e) {
    std::fprintf(stderr, "optim_host: ONNX Runtime error: %s\n", e.what());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "optim_host: %s\n", e.what());
  }
  return 1;
}
