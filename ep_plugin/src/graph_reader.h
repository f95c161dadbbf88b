// Reads an OrtGraph (valid only during an ORT callback) into the EP's own plain structs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ir.h"
#include "ort_api.h"

namespace optim {

struct ReadGraph {
  Graph graph;
  std::vector<const OrtNode*> ort_nodes;  // parallel to graph.nodes; valid during the callback only
};

// Copies nodes, attributes, value types/shapes and the constant initializers the nodes use, up to
// max_constant_bytes each (larger ones are only marked constant: GetCapability needs no weights).
ReadGraph read_graph(const OrtGraph* g, size_t max_constant_bytes);

// Copies an ORT tensor value into an EP-owned Tensor; one of more than max_bytes keeps only its dtype and shape.
Tensor copy_tensor(const OrtValue* v, size_t max_bytes = SIZE_MAX);

}  // namespace optim
