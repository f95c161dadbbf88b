#include "step_profile.h"

#include <sstream>

#include "ort_api.h"
#include "report_file.h"

namespace optim {

StepProfile::StepProfile(std::string partition, std::vector<std::string> labels, std::vector<std::string> ops,
                         std::vector<std::string> kernels, size_t warmup)
    : partition_(std::move(partition)), labels_(std::move(labels)), ops_(std::move(ops)), kernels_(std::move(kernels)),
      warmup_(warmup), total_ns_(labels_.size(), 0), shapes_(labels_.size()), has_shape_(labels_.size(), 0) {}

void StepProfile::record(const std::vector<uint64_t>& ns, const std::vector<const Shape*>& first_inputs) {
  std::lock_guard<std::mutex> lock(mu_);
  if (++seen_ <= warmup_) return;
  ++runs_;
  for (size_t i = 0; i < total_ns_.size() && i < ns.size(); ++i) {
    total_ns_[i] += ns[i];
    if (i < first_inputs.size() && first_inputs[i]) {
      if (!has_shape_[i] || shapes_[i] != *first_inputs[i]) shapes_[i] = *first_inputs[i];
      has_shape_[i] = 1;
    }
  }
}

std::string StepProfile::json() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::ostringstream o;
  o << "{\"partition\": " << json_str(partition_) << ", \"runs\": " << runs_ << ", \"steps\": [";
  for (size_t i = 0; i < labels_.size(); ++i) {
    const std::string& label = labels_[i];
    o << (i ? ", " : "") << "{\"label\": " << json_str(label) << ", \"op\": " << json_str(ops_[i]) << ", \"kernel\": ";
    if (i < kernels_.size() && !kernels_[i].empty()) o << json_str(kernels_[i]);
    else o << "null";
    o << ", \"total_ns\": " << total_ns_[i] << ", \"input_shape\": ";
    if (!has_shape_[i]) {
      o << "null";
    } else {
      o << "[";
      for (size_t d = 0; d < shapes_[i].size(); ++d) o << (d ? ", " : "") << shapes_[i][d];
      o << "]";
    }
    o << "}";
  }
  o << "]}";
  return o.str();
}

ProfileFile::ProfileFile(std::string path, size_t warmup, std::string isa)
    : path_(std::move(path)), warmup_(warmup), isa_(std::move(isa)) {}

ProfileFile::~ProfileFile() {
  try {
    write();
  } catch (...) {
    // Nowhere to report from a destructor (ORT may be tearing the session down): the Python side
    // reports a missing file. The path was already written successfully at Compile time.
  }
}

std::shared_ptr<StepProfile> ProfileFile::add(const std::string& partition, std::vector<std::string> step_labels,
                                              std::vector<std::string> step_ops, std::vector<std::string> step_kernels) {
  std::lock_guard<std::mutex> lock(mu_);
  partitions_.push_back(std::make_unique<StepProfile>(partition, std::move(step_labels), std::move(step_ops),
                                                      std::move(step_kernels), warmup_));
  // Aliasing: the Plan points at its StepProfile and keeps the whole file alive.
  return std::shared_ptr<StepProfile>(shared_from_this(), partitions_.back().get());
}

void ProfileFile::write() const {
  std::ostringstream o;
  o << "{\"ep\": " << json_str(kEpName) << ", \"version\": " << json_str(kEpVersion) << ", \"isa\": " << json_str(isa_)
    << ", \"warmup\": " << warmup_ << ", \"partitions\": [";
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < partitions_.size(); ++i) o << (i ? ", " : "") << partitions_[i]->json();
  }
  o << "]}\n";
  write_file_atomically(path_, o.str(), "profile");
}

}  // namespace optim
