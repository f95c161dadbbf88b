// How a folding rewrite records what it folded, for the step label plan.cc builds (rewrite.h).
#include "rewrite.h"

namespace optim {

std::string label_with_fused(const Node& n) { return n.label() + (n.has_attr("fused") ? " + " + n.attr_s("fused", "") : ""); }

void note_fused_after(Node& host, const std::string& label) {
  host.set_attr_s("fused", host.has_attr("fused") ? host.attr_s("fused", "") + " + " + label : label);
}

void note_fused_before(Node& host, const std::string& label) {
  const std::string before = host.attr_s("fused_before", "");
  host.set_attr_s("fused_before", before.empty() ? label : label + " + " + before);
}

}  // namespace optim
