#include "rnn_weights.h"

#include <algorithm>

#include "../../kernels/kernel_table.h"

namespace optim {
namespace {

constexpr int64_t kChunk = kernels::kRnnChunk;
static_assert(kernels::kRnnChunk == kernels::kSgemmNR, "a chunk's gate must be one SGEMM panel");

int64_t chunks_of(int64_t hidden) { return (hidden + kChunk - 1) / kChunk; }

}  // namespace

int64_t rnn_gate_columns(int64_t hidden, size_t gates) {
  return chunks_of(hidden) * static_cast<int64_t>(gates) * kChunk;
}

size_t rnn_packed_floats(int64_t k, int64_t hidden, size_t gates) {
  return kernels::sgemm_packed_b_floats(k, rnn_gate_columns(hidden, gates));
}

void rnn_pack_gates(const float* w, int64_t k, int64_t hidden, const std::vector<int>& gates, float* dst) {
  // Panel (chunk c, gate q) holds W's rows of gate gates[q], units c*16 .. c*16+15: consecutive rows of w,
  // which sgemm_pack_b takes as a transposed B of at most 16 columns (zero-padding the rest).
  const int64_t panel_floats = k * kernels::kSgemmNR;
  int64_t panel = 0;
  for (int64_t c = 0; c < chunks_of(hidden); ++c) {
    const int64_t units = std::min(kChunk, hidden - c * kChunk);
    for (int g : gates) {
      kernels::sgemm_pack_b(w + (g * hidden + c * kChunk) * k, k, true, k, units, dst + panel * panel_floats);
      ++panel;
    }
  }
}

void rnn_gate_bias(const float* b, int64_t hidden, size_t total_gates, const std::vector<int>& gates, bool add_w,
                   const std::vector<bool>& add_r, float* dst) {
  const int64_t rb = static_cast<int64_t>(total_gates) * hidden;  // where Rb starts
  for (int64_t c = 0; c < chunks_of(hidden); ++c) {
    for (int g : gates) {
      for (int64_t l = 0; l < kChunk; ++l, ++dst) {
        const int64_t u = c * kChunk + l;
        float v = 0.f;
        if (u < hidden && add_w) v += b[g * hidden + u];
        if (u < hidden && add_r[static_cast<size_t>(g)]) v += b[rb + g * hidden + u];
        *dst = v;
      }
    }
  }
}

}  // namespace optim
