// ONNX's recurrent weights (W, R and B of one direction) as SGEMM B operands whose columns are the gates of
// each chunk of kernels::kRnnChunk hidden units side by side: the layout the rnn_cell kernels read, so one
// task's run of GEMM panels holds every gate of its units.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace optim {

// Columns of a gate-chunked matrix: `gates` gates of every chunk (the last chunk padded with zero columns).
int64_t rnn_gate_columns(int64_t hidden, size_t gates);

// Floats of one direction's packed matrix with k rows (sgemm_pack_b panels).
size_t rnn_packed_floats(int64_t k, int64_t hidden, size_t gates);

// w: one direction's W or R, [total_gates * hidden, k] as ONNX stores it; the rows of the listed gates (indices
// into ONNX's gate order) become the packed columns, chunk by chunk.
void rnn_pack_gates(const float* w, int64_t k, int64_t hidden, const std::vector<int>& gates, float* dst);

// One direction's bias row in the same column order: per listed gate g, Wb[g] (when add_w) plus Rb[g] (when
// add_r[g]), from b = ONNX's B row [Wb of every gate, Rb of every gate]; zero in the padding.
void rnn_gate_bias(const float* b, int64_t hidden, size_t total_gates, const std::vector<int>& gates, bool add_w,
                   const std::vector<bool>& add_r, float* dst);

}  // namespace optim
