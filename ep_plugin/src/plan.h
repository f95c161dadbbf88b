// A compiled partition: the ops of one fused node in execution order, their constants and weights
// (packed once), and per-input-shape memory plans (cached). Run is reentrant: ORT may call it from
// several threads at once on the same plan.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "../kernels/kernel_table.h"
#include "ir.h"
#include "ops/op.h"
#include "step_profile.h"

namespace optim {

class Plan {
 public:
  // `graph` holds the partition's nodes (topologically ordered by this call) with all constants copied.
  // input_names / output_names are the fused node's inputs and outputs, in ORT's order.
  Plan(std::string name, const Graph& graph, const std::vector<std::string>& input_names,
       const std::vector<std::string>& output_names, const kernels::KernelTable& kernels);

  // Runs on a kernel context (ORT's inputs/outputs and thread pool).
  void run(OrtKernelContext* ctx) const;

  const std::string& name() const { return name_; }
  static constexpr size_t kAlign = 64;  // arena buffers start at multiples of this
  size_t num_steps() const { return steps_.size(); }
  // "Conv 'c1' + Relu 'r1'", "QGemm 'fc'", ...: what runs, in order.
  std::vector<std::string> step_labels() const;
  std::vector<std::string> step_ops() const;  // each step's op type (a label may start with nodes folded in ahead)
  std::vector<std::string> step_kernels() const;  // each step's Op::kernel_name(), "" where it names none
  // Times every step of every later run into `profile` (EP option `profile`); set before the first run.
  void set_profile(std::shared_ptr<StepProfile> profile) { profile_ = std::move(profile); }

 private:
  enum class SlotKind { kInput, kConstant, kTemp, kOutput };
  struct Slot {
    std::string name;
    SlotKind kind = SlotKind::kTemp;
    DType dtype = DType::kUndefined;
    int io_index = -1;               // input or output index of the fused node
    const Tensor* constant = nullptr;  // points into constants_
  };
  struct Step {
    std::string label;  // "Conv 'name'" for errors
    std::string op_type;
    std::unique_ptr<Op> op;
    std::vector<int> in;  // slot per input, -1 for omitted
    std::vector<int> out;
    std::vector<size_t> shape_inputs;  // inputs read as shape values (OpDef::shape_inputs)
  };
  // Shapes and buffer offsets for one set of input shapes.
  struct ShapePlan {
    std::vector<Shape> shapes;      // per slot
    std::vector<size_t> offsets;    // per slot, for kTemp slots
    size_t scratch_offset = 0;
    size_t arena_bytes = 0;
    std::vector<size_t> step_scratch;  // bytes per step
  };

  // Building (plan.cc).
  int add_slot(const Graph& graph, const std::string& name, SlotKind kind, int io_index);
  void add_step(const Graph& graph, const Node& node, const std::map<std::string, int>& output_index);
  void find_shape_values();

  // Running (plan_run.cc): the fused node's inputs, an arena from the pool, every slot's bytes, the steps.
  struct Inputs {
    std::vector<Shape> shapes;
    std::vector<const void*> data;
    std::map<int, std::vector<int64_t>> values;  // slots whose values decide shapes (see ShapeValues)
  };
  struct Arena {
    std::unique_ptr<uint8_t[]> data;
    size_t size = 0;
  };
  class ArenaLease {  // an arena of at least `bytes`, aligned, handed back to the pool when it goes
   public:
    ArenaLease(const Plan& plan, size_t bytes);
    ~ArenaLease();
    uint8_t* base() const { return base_; }

   private:
    const Plan& plan_;
    std::unique_ptr<Arena> arena_;
    uint8_t* base_ = nullptr;
  };
  Inputs read_inputs(OrtKernelContext* ctx) const;
  std::vector<void*> bind(OrtKernelContext* ctx, const Inputs& in, const ShapePlan& sp, uint8_t* base) const;
  void run_steps(OrtKernelContext* ctx, const ShapePlan& sp, const std::vector<void*>& data, uint8_t* base) const;

  // Per-shape plans (plan_shapes.cc). values: per slot, the contents of shape-deciding slots.
  std::shared_ptr<const ShapePlan> shape_plan(const std::vector<Shape>& input_shapes,
                                              const std::map<int, std::vector<int64_t>>& values) const;
  std::shared_ptr<ShapePlan> make_shape_plan(const std::vector<Shape>& input_shapes,
                                             const std::map<int, std::vector<int64_t>>& values) const;
  std::string step_error(const Step& s, const std::vector<Shape>& shapes, const std::string& what) const;

  std::string name_;
  const kernels::KernelTable& kernels_;
  std::map<std::string, Tensor> constants_;
  std::vector<Slot> slots_;
  std::vector<Step> steps_;
  std::vector<int> input_slots_;   // per fused input
  std::vector<int> output_slots_;  // per fused output
  std::vector<int> last_use_;      // per slot: last step reading it
  std::vector<int> value_inputs_;  // fused inputs whose values decide shapes (read before planning)
  std::map<int, std::vector<int64_t>> constant_values_;  // constant slots whose values decide shapes
  std::shared_ptr<StepProfile> profile_;  // null unless profiling

  std::map<std::string, int> slot_of_;  // while building: value name -> slot

  mutable std::mutex mu_;
  mutable std::map<std::vector<int64_t>, std::shared_ptr<const ShapePlan>> cache_;
  mutable std::vector<std::unique_ptr<Arena>> free_arenas_;
};

}  // namespace optim
