// Per-step times inside OptimEP's fused nodes (EP option `profile`). ORT's own profiler times each fused
// node as a whole; this records what runs inside it: per step, the time summed over runs and the shape of
// its first input on the last run. When profiling is off a Plan holds no StepProfile and StepTimer costs
// one predictable branch per step.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ir.h"

namespace optim {

// One partition (Plan): its step labels and what its runs took.
class StepProfile {
 public:
  // kernels: per step, the kernel it runs (Plan::step_kernels; "" for none named).
  StepProfile(std::string partition, std::vector<std::string> labels, std::vector<std::string> ops,
              std::vector<std::string> kernels, size_t warmup);

  // One run that completed: nanoseconds and first-input shape (null when omitted) per step. Thread-safe
  // (a mutex around the accumulation only); the partition's first `warmup` runs are not counted.
  void record(const std::vector<uint64_t>& ns, const std::vector<const Shape*>& first_inputs);
  std::string json() const;

 private:
  std::string partition_;
  std::vector<std::string> labels_, ops_, kernels_;
  size_t warmup_;
  mutable std::mutex mu_;
  uint64_t seen_ = 0;  // runs recorded, warm-up included
  uint64_t runs_ = 0;  // runs counted
  std::vector<uint64_t> total_ns_;
  std::vector<Shape> shapes_;
  std::vector<char> has_shape_;
};

// Times the steps of one Plan::run. Each stop() closes the step that began at the previous one (or at
// construction), so the steps' times add up to the whole loop. Does nothing when profile is null.
class StepTimer {
 public:
  StepTimer(StepProfile* profile, size_t steps) : profile_(profile) {
    if (!profile_) return;
    ns_.resize(steps);
    first_inputs_.resize(steps);
    last_ = Clock::now();
  }
  void stop(size_t step, const Shape* first_input) {
    if (!profile_) return;
    const Clock::time_point now = Clock::now();
    ns_[step] = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(now - last_).count());
    first_inputs_[step] = first_input;
    last_ = now;
  }
  void commit() {  // after the last step: the run succeeded
    if (profile_) profile_->record(ns_, first_inputs_);
  }

 private:
  using Clock = std::chrono::steady_clock;
  StepProfile* profile_;
  Clock::time_point last_;
  std::vector<uint64_t> ns_;
  std::vector<const Shape*> first_inputs_;
};

// The profile file of one OptimEp instance (one session): every partition it compiled. Plans hold their
// StepProfile through a shared_ptr that also keeps this object alive, so the file is complete whatever
// ORT releases first (compute infos or the EP). write() runs after each Compile (a bad path then fails
// session creation with a message) and the destructor writes the final numbers, swallowing errors.
class ProfileFile : public std::enable_shared_from_this<ProfileFile> {
 public:
  ProfileFile(std::string path, size_t warmup, std::string isa);
  ~ProfileFile();

  std::shared_ptr<StepProfile> add(const std::string& partition, std::vector<std::string> step_labels,
                                   std::vector<std::string> step_ops, std::vector<std::string> step_kernels);
  void write() const;  // throws Error

 private:
  std::string path_;
  size_t warmup_;
  std::string isa_;
  mutable std::mutex mu_;
  std::vector<std::unique_ptr<StepProfile>> partitions_;
};

}  // namespace optim
