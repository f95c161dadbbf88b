// Which execution provider ran each node, read from ONNX Runtime's profiler trace: the 1.23 C API has no
// call that lists the assignment (Python's get_provider_graph_assignment_info is not in it), but the
// profiler writes one "Node" event per node run, with its "provider". Nodes OptimEP fused appear as
// its fused nodes (OptimEP_<hash>_<n>); the EP option placement_report=FILE lists the nodes inside them.
#pragma once

#include <string>
#include <vector>

namespace host {

struct NodeRun {
  std::string node;      // ORT's node name (a fused node's name for OptimEP's partitions)
  std::string op;        // op type, or the fused node's name
  std::string provider;  // e.g. OptimEP, CPUExecutionProvider
};

// The nodes of the first run in the trace, in the order they ran. Throws std::runtime_error if unreadable.
std::vector<NodeRun> nodes_run(const std::string& trace_path);

}  // namespace host
