// The interface every op implementation satisfies, and the registry that decides what OptimEP claims.
// An op is checked (claim time), created (compile time: attributes parsed, weights pre-packed once),
// shape-inferred and run (run time, possibly from several threads at once: run must not mutate the op).
#pragma once

#include <cstddef>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../../kernels/kernel_table.h"
#include "../ir.h"
#include "../ort_api.h"

namespace optim {

// Domain of the ops OptimEP creates itself (integer units, channels-last forms): never claimable from a user's
// model.
constexpr const char* kInternalDomain = "optim.internal";

// The attribute of a unit that a Gelu alone read, folded into it (rewrites/dequantize_fold.cc for QGemm,
// rewrites/matmul_bias.cc for float MatMul): ONNX Gelu's approximate, "none" or "tanh". The unit runs the Gelu
// kernel on each block of its output while in cache (the same values, so the same bits as the Gelu step).
constexpr const char* kThenGelu = "then_gelu";
inline kernels::UnaryOp gelu_op(const std::string& approximate) {
  return approximate == "tanh" ? kernels::UnaryOp::kGeluTanh : kernels::UnaryOp::kGelu;
}

struct TensorRef {
  DType dtype = DType::kUndefined;
  const Shape* shape = nullptr;  // nullptr for an omitted optional input
  const void* data = nullptr;
  bool present() const { return shape != nullptr; }
  int64_t numel() const { return shape_numel(*shape); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(data); }
};

struct TensorOut {
  DType dtype = DType::kUndefined;
  const Shape* shape = nullptr;
  void* data = nullptr;
  int64_t numel() const { return shape_numel(*shape); }
  template <typename T>
  T* as() const { return static_cast<T*>(data); }
};

// What a running op may use: the kernel table, ORT's intra-op thread pool, and per-call scratch.
class RunContext {
 public:
  RunContext(const kernels::KernelTable& k, OrtKernelContext* ctx, void* scratch, size_t scratch_bytes)
      : kernels(k), ctx_(ctx), scratch_(scratch), scratch_bytes_(scratch_bytes) {}
  const kernels::KernelTable& kernels;
  // Runs fn(i) for i in [0, n) on ORT's intra-op pool (inline when there is no pool or n == 1).
  // Exceptions thrown by fn are caught on the worker and rethrown here.
  void parallel_for(size_t n, const std::function<void(size_t)>& fn) const;
  // Scratch of at least Op::scratch_bytes() for the current step; valid until the step returns.
  void* scratch() const { return scratch_; }
  size_t scratch_bytes() const { return scratch_bytes_; }

 private:
  OrtKernelContext* ctx_;
  void* scratch_;
  size_t scratch_bytes_;
};

// Elements per task below which threads cost more than they save.
constexpr int64_t kParallelChunk = 1 << 15;
// Waking a pool thread costs about as much as a million multiply-adds.
constexpr int64_t kMacsPerTask = 1 << 20;
// Splits [0, n) into chunks of at least kParallelChunk elements and runs fn(begin, end) on the pool.
void parallel_chunks(const RunContext& rc, int64_t n, const std::function<void(int64_t, int64_t)>& fn);
// Splits `rows` rows of row_len elements each into tasks of at least kParallelChunk elements (64 at most) and
// runs fn(first_row, end_row) on the pool.
void parallel_rows(const RunContext& rc, int64_t rows, int64_t row_len, const std::function<void(int64_t, int64_t)>& fn);

// Per input: its values when its OpDef lists it in shape_inputs, else nullptr: int64 tensors as they are,
// float32 ones (Resize's scales) as each float's bit pattern (read them back with float_from_bits).
using ShapeValues = std::vector<const std::vector<int64_t>*>;
inline float float_from_bits(int64_t v) {
  const uint32_t bits = static_cast<uint32_t>(v);
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

class Op {
 public:
  virtual ~Op() = default;
  // Output shapes from input shapes (nullptr entries for omitted optional inputs).
  // Throws Error with a message naming the offending input when the shapes do not fit the op.
  virtual std::vector<Shape> infer(const std::vector<const Shape*>& in) const = 0;
  // With the int64 values of the inputs that decide the output shapes (OpDef::shape_inputs: Reshape's
  // target, Squeeze's axes), which the plan reads before shape inference and keys its shape cache on.
  virtual std::vector<Shape> infer(const std::vector<const Shape*>& in, const ShapeValues& values) const {
    (void)values;
    return infer(in);
  }
  virtual void run(const RunContext& rc, const std::vector<TensorRef>& in, const std::vector<TensorOut>& out) const = 0;
  // Scratch the op needs for these input shapes.
  virtual size_t scratch_bytes(const std::vector<const Shape*>& in) const { (void)in; return 0; }
  // Whether output 0 is input 0's bytes unchanged (a view: Reshape, Flatten, Squeeze, Unsqueeze,
  // Identity): the plan may then give the output the input's buffer, and run() must copy only when the
  // two differ.
  virtual bool output_aliases_input() const { return false; }
  // An input whose buffer output 0 may take over when this step reads it last and the two have one shape and
  // dtype, or -1: run() reads each element of that input before writing the same element of the output
  // (a convolution's residual, summed in its epilogue), so the step needs no second buffer of that size.
  virtual int in_place_input() const { return -1; }
  // Called once at compile time with the kernel table the plan will run with (e.g. to pack weights
  // in the layout of the kernel that will read them).
  virtual void prepare(const kernels::KernelTable& kernels) { (void)kernels; }
  // After prepare: the kernel(s) doing this step's arithmetic where prepare chose among several forms (an integer
  // convolution's u8 x s8 or int16-pair GEMM...), as kernel_list.inc names them, for the step profile; else "".
  virtual std::string kernel_name() const { return {}; }
};

struct OpDef {
  const char* op_type;
  int min_opset;  // since_version range the implementation follows
  int max_opset;
  // "" when the node can run on OptimEP, else the reason it is refused (shown in the placement report).
  std::string (*check)(const Node& node, const Graph& graph);
  std::unique_ptr<Op> (*create)(const Node& node, const Graph& graph);
  // Inputs whose int64 values decide the output shape: the plan reads them before shape inference
  // (Op::infer's values) and the partitioner keeps their producers out of the partition.
  std::vector<size_t> (*shape_inputs)(const Node& node) = nullptr;
  // The op's domain: "" for ONNX's own, else e.g. "com.microsoft" (a contrib op ONNX Runtime's CPU EP also runs).
  const char* domain = "";
};

// Every op OptimEP implements. One entry per op type; ops/*.cc each contribute theirs.
const std::vector<OpDef>& op_registry();

// The reason a node is refused, or "" when OptimEP runs it.
std::string why_unsupported(const Node& node, const Graph& graph);

// The inputs of a node that the plan reads as shape values (OpDef::shape_inputs; none for internal ops).
std::vector<size_t> shape_value_inputs(const Node& node);

// Builds the op for a supported node (throws Error if it is not supported after all).
std::unique_ptr<Op> create_op(const Node& node, const Graph& graph);

// --- helpers shared by op files -------------------------------------------------------------------
// "" when value `name` is float32 (or unknown type), else a reason naming it.
std::string require_float(const Graph& g, const Node& n, size_t input_index);
// The first require_float refusal among all present inputs, or "".
std::string require_float_inputs(const Graph& g, const Node& n);
// "" when input `input_index` is absent or a tensor of fixed-size elements (data movement is
// type-blind), else the reason.
std::string require_fixed_size(const Graph& g, const Node& n, size_t input_index);
// The Gather family's check: "" when input 1 (indices) is int64 or int32 and input 0 moves fixed-size
// elements, else the reason.
std::string require_indices_and_data(const Graph& g, const Node& n);
// Normalizes a possibly negative axis against a rank; throws Error when out of range.
int64_t normalize_axis(int64_t axis, int64_t rank, const char* what);
// Multi-directional (numpy) broadcast of two shapes; throws Error naming both when incompatible.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace optim
