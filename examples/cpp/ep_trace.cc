#include "ep_trace.h"

#include <fstream>
#include <set>
#include <stdexcept>

namespace host {
namespace {

// The string value of "key" : "value" in one trace line ("" if absent). ORT writes one event per line.
std::string string_field(const std::string& line, const std::string& key) {
  size_t at = line.find("\"" + key + "\"");
  if (at == std::string::npos) return "";
  at = line.find('"', line.find(':', at) + 1);
  if (at == std::string::npos) return "";
  size_t end = line.find('"', at + 1);
  return line.substr(at + 1, end - at - 1);
}

}  // namespace

std::vector<NodeRun> nodes_run(const std::string& trace_path) {
  std::ifstream in(trace_path);
  if (!in) throw std::runtime_error("cannot read the profiler trace " + trace_path);
  const std::string suffix = "_kernel_time";
  std::vector<NodeRun> nodes;
  std::set<std::string> seen;
  for (std::string line; std::getline(in, line);) {
    if (string_field(line, "cat") != "Node") continue;
    std::string name = string_field(line, "name");
    if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) continue;
    name.resize(name.size() - suffix.size());
    if (!seen.insert(name).second) continue;  // a later run of the same node
    nodes.push_back({name, string_field(line, "op_name"), string_field(line, "provider")});
  }
  return nodes;
}

}  // namespace host
