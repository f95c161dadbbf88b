// Runs a Plan: the fused node's inputs read (shapes, values that decide shapes), the per-shape plan
// looked up, an arena leased from the pool, every slot bound to its bytes, then the steps in order.
#include <new>

#include "plan.h"

namespace optim {

Plan::Inputs Plan::read_inputs(OrtKernelContext* ctx) const {
  const size_t n_in = input_slots_.size();
  Inputs in;
  in.shapes.resize(n_in);
  in.data.resize(n_in);
  for (size_t i = 0; i < n_in; ++i) {
    const OrtValue* v = nullptr;
    OPTIM_CHECK(ort().KernelContext_GetInput(ctx, i, &v));
    const Slot& sl = slots_[static_cast<size_t>(input_slots_[i])];
    if (!v) throw Error("input '" + sl.name + "' is missing", ORT_INVALID_ARGUMENT);
    OrtTensorTypeAndShapeInfo* info = nullptr;
    OPTIM_CHECK(ort().GetTensorTypeAndShape(v, &info));
    size_t rank = 0;
    ONNXTensorElementDataType et;
    OrtStatus* st = ort().GetDimensionsCount(info, &rank);
    if (!st) {
      in.shapes[i].resize(rank);
      if (rank) st = ort().GetDimensions(info, in.shapes[i].data(), rank);
    }
    if (!st) st = ort().GetTensorElementType(info, &et);
    ort().ReleaseTensorTypeAndShapeInfo(info);
    OPTIM_CHECK(st);
    if (dtype_from_onnx(et) != sl.dtype)
      throw Error("input '" + sl.name + "' is " + dtype_name(dtype_from_onnx(et)) + ", the partition was compiled for " +
                  dtype_name(sl.dtype), ORT_INVALID_ARGUMENT);
    OPTIM_CHECK(ort().GetTensorData(v, &in.data[i]));
  }
  for (int slot : value_inputs_) {  // int64, or float32 as bit patterns (see ShapeValues)
    const size_t i = static_cast<size_t>(slots_[static_cast<size_t>(slot)].io_index);
    const int64_t n = shape_numel(in.shapes[i]);
    std::vector<int64_t>& v = in.values[slot];
    if (slots_[static_cast<size_t>(slot)].dtype == DType::kFloat32) {
      const uint32_t* p = static_cast<const uint32_t*>(in.data[i]);
      v.assign(p, p + n);
    } else {
      const int64_t* p = static_cast<const int64_t*>(in.data[i]);
      v.assign(p, p + n);
    }
  }
  return in;
}

Plan::ArenaLease::ArenaLease(const Plan& plan, size_t bytes) : plan_(plan) {
  {
    std::lock_guard<std::mutex> lock(plan.mu_);
    if (!plan.free_arenas_.empty()) {
      arena_ = std::move(plan.free_arenas_.back());
      plan.free_arenas_.pop_back();
    }
  }
  if (!arena_) arena_ = std::make_unique<Arena>();
  if (arena_->size < bytes + kAlign) {
    // Left uninitialized: every byte is written by the step that produces it before it is read.
    arena_->data.reset(new (std::nothrow) uint8_t[bytes + kAlign]);
    arena_->size = arena_->data ? bytes + kAlign : 0;
    if (!arena_->data) throw Error("cannot allocate " + std::to_string(bytes >> 20) + " MiB for intermediate tensors");
  }
  base_ = arena_->data.get();
  base_ += (kAlign - reinterpret_cast<uintptr_t>(base_) % kAlign) % kAlign;
}

Plan::ArenaLease::~ArenaLease() {  // back to the pool on every exit path
  std::lock_guard<std::mutex> lock(plan_.mu_);
  plan_.free_arenas_.push_back(std::move(arena_));
}

std::vector<void*> Plan::bind(OrtKernelContext* ctx, const Inputs& in, const ShapePlan& sp, uint8_t* base) const {
  std::vector<void*> data(slots_.size(), nullptr);
  for (size_t i = 0; i < input_slots_.size(); ++i) data[static_cast<size_t>(input_slots_[i])] = const_cast<void*>(in.data[i]);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].kind == SlotKind::kConstant) data[i] = const_cast<uint8_t*>(slots_[i].constant->bytes.data());
    if (slots_[i].kind == SlotKind::kTemp) data[i] = base + sp.offsets[i];
  }
  for (size_t j = 0; j < output_slots_.size(); ++j) {
    const size_t slot = static_cast<size_t>(output_slots_[j]);
    const Shape& s = sp.shapes[slot];
    OrtValue* ov = nullptr;
    OPTIM_CHECK(ort().KernelContext_GetOutput(ctx, j, s.data(), s.size(), &ov));
    void* p = nullptr;
    OPTIM_CHECK(ort().GetTensorMutableData(ov, &p));
    data[slot] = p;
  }
  return data;
}

void Plan::run_steps(OrtKernelContext* ctx, const ShapePlan& sp, const std::vector<void*>& data, uint8_t* base) const {
  std::vector<TensorRef> ins;
  std::vector<TensorOut> outs;
  StepTimer timer(profile_.get(), steps_.size());
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step& s = steps_[si];
    ins.clear();
    outs.clear();
    for (int in : s.in) {
      TensorRef r;
      if (in >= 0) {
        r.dtype = slots_[static_cast<size_t>(in)].dtype;
        r.shape = &sp.shapes[static_cast<size_t>(in)];
        r.data = data[static_cast<size_t>(in)];
      }
      ins.push_back(r);
    }
    for (int o : s.out) {
      TensorOut r;
      if (o >= 0) {
        r.dtype = slots_[static_cast<size_t>(o)].dtype;
        r.shape = &sp.shapes[static_cast<size_t>(o)];
        r.data = data[static_cast<size_t>(o)];
      }
      outs.push_back(r);
    }
    RunContext rc(kernels_, ctx, base + sp.scratch_offset, sp.step_scratch[si]);
    try {
      s.op->run(rc, ins, outs);
    } catch (const std::exception& e) {
      throw Error(step_error(s, sp.shapes, e.what()));
    }
    timer.stop(si, ins.empty() ? nullptr : ins[0].shape);
  }
  timer.commit();
}

void Plan::run(OrtKernelContext* ctx) const {
  const Inputs in = read_inputs(ctx);
  const std::shared_ptr<const ShapePlan> sp = shape_plan(in.shapes, in.values);
  ArenaLease arena(*this, sp->arena_bytes);
  const std::vector<void*> data = bind(ctx, in, *sp, arena.base());
  run_steps(ctx, *sp, data, arena.base());
}

}  // namespace optim
