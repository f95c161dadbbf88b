#include "ep.h"

#include <memory>
#include <sstream>

#include "graph_reader.h"
#include "ops/op.h"
#include "plan.h"
#include "rewrites/rewrite.h"
#include "report_file.h"

namespace optim {
namespace {

// GetCapability needs constants only for claim checks (Reshape targets, Clip bounds): small ones.
constexpr size_t kClaimConstantBytes = 4096;

// One fused node's compute functions; the Plan is the state ORT hands back to Compute.
struct ComputeInfo : OrtNodeComputeInfo {
  std::unique_ptr<Plan> plan;

  explicit ComputeInfo(std::unique_ptr<Plan> p) : OrtNodeComputeInfo{}, plan(std::move(p)) {
    ort_version_supported = kOrtApiVersion;
    CreateState = CreateStateImpl;
    Compute = ComputeImpl;
    ReleaseState = ReleaseStateImpl;
  }

  static OrtStatus* ORT_API_CALL CreateStateImpl(OrtNodeComputeInfo* self, OrtNodeComputeContext*, void** state) noexcept {
    *state = static_cast<ComputeInfo*>(self)->plan.get();
    return nullptr;
  }
  static OrtStatus* ORT_API_CALL ComputeImpl(OrtNodeComputeInfo*, void* state, OrtKernelContext* ctx) noexcept {
    const Plan* plan = static_cast<const Plan*>(state);
    return guard("Compute", [&] {
      try {
        plan->run(ctx);
      } catch (const Error& e) {
        throw Error("fused node '" + plan->name() + "': " + e.what(), e.code());
      }
    });
  }
  static void ORT_API_CALL ReleaseStateImpl(OrtNodeComputeInfo*, void*) noexcept {}
};

std::vector<std::string> value_names(const OrtNode* node, bool inputs) {
  size_t n = 0;
  OPTIM_CHECK(inputs ? ort().Node_GetNumInputs(node, &n) : ort().Node_GetNumOutputs(node, &n));
  std::vector<const OrtValueInfo*> vis(n);
  if (n) OPTIM_CHECK(inputs ? ort().Node_GetInputs(node, vis.data(), n) : ort().Node_GetOutputs(node, vis.data(), n));
  std::vector<std::string> names;
  for (auto* vi : vis) {
    const char* name = "";
    if (vi) OPTIM_CHECK(ort().GetValueInfoName(vi, &name));
    names.emplace_back(name ? name : "");
  }
  return names;
}

}  // namespace

OptimEp::OptimEp(EpOptions options, const OrtLogger* logger) : OrtEp{}, options_(std::move(options)), logger_(logger) {
  ort_version_supported = kOrtApiVersion;
  GetName = GetNameImpl;
  GetCapability = GetCapabilityImpl;
  Compile = CompileImpl;
  ReleaseNodeComputeInfos = ReleaseNodeComputeInfosImpl;
  if (!options_.profile.empty())
    profile_ = std::make_shared<ProfileFile>(options_.profile, options_.profile_warmup, kernels::isa_name(options_.isa));
}

const char* ORT_API_CALL OptimEp::GetNameImpl(const OrtEp*) noexcept { return kEpName; }

OrtStatus* ORT_API_CALL OptimEp::GetCapabilityImpl(OrtEp* self, const OrtGraph* graph, OrtEpGraphSupportInfo* info) noexcept {
  return guard("GetCapability", [&] { static_cast<OptimEp*>(self)->get_capability(graph, info); });
}

void OptimEp::get_capability(const OrtGraph* graph, OrtEpGraphSupportInfo* info) {
  ReadGraph rg = read_graph(graph, kClaimConstantBytes);
  Partition p = partition_graph(rg.graph, std::max<size_t>(options_.min_partition_nodes, 1));
  OrtNodeFusionOptions fusion{};
  fusion.ort_version_supported = kOrtApiVersion;
  fusion.drop_constant_initializers = true;  // the plan keeps its own (packed) copy of the weights
  for (const auto& group : p.groups) {
    std::vector<const OrtNode*> nodes;
    for (size_t i : group) nodes.push_back(rg.ort_nodes[i]);
    OPTIM_CHECK(ep_api().EpGraphSupportInfo_AddNodesToFuse(info, nodes.data(), nodes.size(), &fusion));
  }
  if (options_.log) {
    for (const Refusal& r : p.refused) log(ORT_LOGGING_LEVEL_WARNING, "left to another EP: " + r.op + " '" + r.node + "': " + r.reason);
  }
  if (!options_.placement_report.empty()) {
    const char* gname = "";
    OPTIM_CHECK(ort().Graph_GetName(graph, &gname));
    std::string key = std::string(gname ? gname : "") + "#" + std::to_string(rg.graph.nodes.size()) + "#" +
                      (rg.graph.nodes.empty() ? "" : rg.graph.nodes.front().name);
    write_report(key, rg, p);
  }
}

void OptimEp::write_report(const std::string& graph_key, const ReadGraph& rg, const Partition& p) {
  std::ostringstream o;
  o << "{\"graph\": " << json_str(graph_key) << ", \"groups\": [";
  for (size_t gi = 0; gi < p.groups.size(); ++gi) {
    o << (gi ? ", " : "") << "[";
    for (size_t j = 0; j < p.groups[gi].size(); ++j) {
      const Node& n = rg.graph.nodes[p.groups[gi][j]];
      o << (j ? ", " : "") << "{\"node\": " << json_str(n.name) << ", \"op\": " << json_str(n.op) << "}";
    }
    o << "]";
  }
  o << "], \"refused\": [";
  for (size_t i = 0; i < p.refused.size(); ++i) {
    const Refusal& r = p.refused[i];
    o << (i ? ", " : "") << "{\"node\": " << json_str(r.node) << ", \"op\": " << json_str(r.op)
      << ", \"reason\": " << json_str(r.reason) << "}";
  }
  o << "]}";
  std::lock_guard<std::mutex> lock(report_mu_);
  report_entries_[graph_key] = o.str();
  flush_report();
}

void OptimEp::record_compiled(const Plan& plan, const RewriteContext& rewrites) {
  std::ostringstream o;
  o << "{\"partition\": " << json_str(plan.name()) << ", \"steps\": [";
  const std::vector<std::string> steps = plan.step_labels();
  for (size_t i = 0; i < steps.size(); ++i) o << (i ? ", " : "") << json_str(steps[i]);
  // QDQ units left in float ("Op 'name': reason"), as before; then every rewrite's count and refusals.
  o << "], \"float_units\": [";
  const std::string units = "qdq_units: ";
  size_t k = 0;
  for (const std::string& r : rewrites.refusals)
    if (r.compare(0, units.size(), units) == 0) o << (k++ ? ", " : "") << json_str(r.substr(units.size()));
  o << "], \"rewrites\": {";
  k = 0;
  for (const auto& [name, count] : rewrites.applied) o << (k++ ? ", " : "") << json_str(name) << ": " << count;
  o << "}, \"rewrite_refusals\": [";
  for (size_t i = 0; i < rewrites.refusals.size(); ++i) o << (i ? ", " : "") << json_str(rewrites.refusals[i]);
  o << "]}";
  std::lock_guard<std::mutex> lock(report_mu_);
  compiled_entries_[plan.name()] = o.str();
  flush_report();
}

void OptimEp::flush_report() {
  std::ostringstream doc;
  doc << "{\"ep\": " << json_str(kEpName) << ", \"version\": " << json_str(kEpVersion) << ", \"isa\": "
      << json_str(kernels::isa_name(options_.isa)) << ", \"precision\": " << json_str(options_.bf16 ? "bf16" : "fp32")
      << ", \"kernels\": [";
  const std::vector<std::string> names = kernel_table(options_).names();
  for (size_t k = 0; k < names.size(); ++k) doc << (k ? ", " : "") << json_str(names[k]);
  // Every kernel the library holds, chosen or not, with the ISA it needs (doctor and tests read these).
  doc << "], \"kernel_rows\": [";
  const auto& rows = kernels::kernel_rows();
  for (size_t k = 0; k < rows.size(); ++k)
    doc << (k ? ", " : "") << "{\"family\": " << json_str(rows[k].family) << ", \"isa\": "
        << json_str(kernels::isa_name(rows[k].isa)) << ", \"name\": " << json_str(rows[k].name) << ", \"feature\": "
        << json_str(rows[k].feature) << ", \"feature_present\": " << (rows[k].feature_present ? "true" : "false")
        << ", \"bf16_only\": " << (rows[k].bf16_only ? "true" : "false") << "}";
  doc << "], \"ops\": [";
  const auto& defs = op_registry();
  for (size_t k = 0; k < defs.size(); ++k)  // a contrib op with its domain: "com.microsoft::MatMulNBits"
    doc << (k ? ", " : "") << json_str(*defs[k].domain ? std::string(defs[k].domain) + "::" + defs[k].op_type : defs[k].op_type);
  doc << "], \"graphs\": [";
  size_t i = 0;
  for (const auto& [k, v] : report_entries_) doc << (i++ ? ", " : "") << v;
  // What each fused node became once compiled: its steps, after fusions (e.g. integer QDQ units).
  doc << "], \"compiled\": [";
  i = 0;
  for (const auto& [k, v] : compiled_entries_) doc << (i++ ? ", " : "") << v;
  doc << "]}\n";
  write_file_atomically(options_.placement_report, doc.str(), "placement_report");
}

OrtStatus* ORT_API_CALL OptimEp::CompileImpl(OrtEp* self, const OrtGraph** graphs, const OrtNode** fused_nodes,
                                             size_t count, OrtNodeComputeInfo** infos, OrtNode** ep_context_nodes) noexcept {
  auto* ep = static_cast<OptimEp*>(self);
  for (size_t i = 0; i < count; ++i) infos[i] = nullptr;
  OrtStatus* st = guard("Compile", [&] {
    for (size_t i = 0; i < count; ++i) {
      if (ep_context_nodes) ep_context_nodes[i] = nullptr;
      const char* fused_name = "";
      OPTIM_CHECK(ort().Node_GetName(fused_nodes[i], &fused_name));
      ReadGraph rg = read_graph(graphs[i], SIZE_MAX);
      const std::vector<std::string> outputs = value_names(fused_nodes[i], false);
      RewriteContext rewrites;
      rewrites.outputs = outputs;
      rewrites.kernels = &kernel_table(ep->options_);
      rewrites.channels_last = ep->options_.channels_last;
      // Winograd trades multiply-adds for float32 transforms; with a bf16 GEMM the direct convolution is faster.
      rewrites.winograd = ep->options_.winograd && !ep->options_.bf16;
      run_rewrites(rg.graph, rewrites);
      auto plan = std::make_unique<Plan>(fused_name ? fused_name : "", rg.graph, value_names(fused_nodes[i], true),
                                         outputs, kernel_table(ep->options_));
      if (!ep->options_.placement_report.empty()) ep->record_compiled(*plan, rewrites);
      if (ep->profile_) plan->set_profile(ep->profile_->add(plan->name(), plan->step_labels(), plan->step_ops(),
                                                               plan->step_kernels()));
      infos[i] = new ComputeInfo(std::move(plan));
    }
    if (ep->profile_) ep->profile_->write();  // the partitions, no runs yet; a bad path fails here, with its name
  });
  if (st) {  // free what was built; nulls keep a later ReleaseNodeComputeInfos from freeing twice
    for (size_t i = 0; i < count; ++i) {
      delete static_cast<ComputeInfo*>(infos[i]);
      infos[i] = nullptr;
    }
  }
  return st;
}

void ORT_API_CALL OptimEp::ReleaseNodeComputeInfosImpl(OrtEp*, OrtNodeComputeInfo** infos, size_t count) noexcept {
  for (size_t i = 0; i < count; ++i) delete static_cast<ComputeInfo*>(infos[i]);
}

void OptimEp::log(OrtLoggingLevel level, const std::string& msg) const {
  if (!logger_) return;
  OrtStatus* st = ort().Logger_LogMessage(logger_, level, (std::string(kEpName) + ": " + msg).c_str(), ORT_TSTR(__FILE__),
                                          __LINE__, "OptimEP");
  if (st) ort().ReleaseStatus(st);
}

}  // namespace optim
