// OptimEP, one instance per session: claims partitions in GetCapability, compiles them into Plans.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "options.h"
#include "ort_api.h"
#include "graph_reader.h"
#include "partitioner.h"
#include "plan.h"
#include "rewrites/rewrite.h"
#include "step_profile.h"

namespace optim {

class OptimEp : public OrtEp {
 public:
  OptimEp(EpOptions options, const OrtLogger* logger);

 private:
  static const char* ORT_API_CALL GetNameImpl(const OrtEp* self) noexcept;
  static OrtStatus* ORT_API_CALL GetCapabilityImpl(OrtEp* self, const OrtGraph* graph,
                                                   OrtEpGraphSupportInfo* info) noexcept;
  static OrtStatus* ORT_API_CALL CompileImpl(OrtEp* self, const OrtGraph** graphs, const OrtNode** fused_nodes,
                                             size_t count, OrtNodeComputeInfo** infos,
                                             OrtNode** ep_context_nodes) noexcept;
  static void ORT_API_CALL ReleaseNodeComputeInfosImpl(OrtEp* self, OrtNodeComputeInfo** infos, size_t count) noexcept;

  void get_capability(const OrtGraph* graph, OrtEpGraphSupportInfo* info);
  void write_report(const std::string& graph_key, const ReadGraph& rg, const Partition& p);
  // unfused: each MatMul/Gemm kept in float, with the reason (see fuse_qdq_units).
  void record_compiled(const Plan& plan, const RewriteContext& rewrites);
  void flush_report();  // rewrites the placement report file; report_mu_ held
  void log(OrtLoggingLevel level, const std::string& msg) const;

  EpOptions options_;
  const OrtLogger* logger_;
  std::mutex report_mu_;
  std::map<std::string, std::string> report_entries_;    // graph key -> JSON object
  std::map<std::string, std::string> compiled_entries_;  // fused node name -> JSON object
  std::shared_ptr<ProfileFile> profile_;                 // option `profile`; null when off
};

}  // namespace optim
