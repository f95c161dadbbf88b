#include "plan.h"

#include <algorithm>
#include <cstring>
#include <new>

#include <unistd.h>

namespace optim {
namespace {

constexpr size_t kAlign = 64;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// Bytes of a tensor, refusing shapes whose size does not fit (fuzzed or corrupt models).
size_t tensor_bytes(const Shape& shape, DType dtype) {
  constexpr uint64_t kMax = uint64_t{1} << 62;
  uint64_t n = dtype_size(dtype) ? dtype_size(dtype) : 1;
  for (int64_t d : shape) {
    if (d < 0) throw Error("shape " + shape_str(shape) + " has a negative dimension");
    if (d != 0 && n > kMax / static_cast<uint64_t>(d)) throw Error("shape " + shape_str(shape) + " is too large to address");
    n *= static_cast<uint64_t>(d);
  }
  return static_cast<size_t>(n);
}

// The most intermediate memory one run of a partition may take: half of the machine's memory.
// Larger plans fail with an error instead of an allocation that could exhaust the host.
size_t arena_limit() {
  static const size_t limit = [] {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) / 2 : size_t{8} << 30;
  }();
  return limit;
}

// The values of a constant that decides shapes (ShapeValues): int64, or float32 as bit patterns.
std::vector<int64_t> shape_values_of(const Tensor& t) {
  if (t.dtype != DType::kFloat32) return t.as_int64();
  std::vector<int64_t> out(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    uint32_t bits;
    std::memcpy(&bits, t.bytes.data() + i * 4, 4);
    out[i] = bits;
  }
  return out;
}

// First-fit placement of live buffers in one arena.
class ArenaPlanner {
 public:
  size_t allocate(size_t bytes) {
    bytes = align_up(std::max<size_t>(bytes, 1));
    size_t at = 0;
    for (const auto& [off, size] : live_) {
      if (off >= at + bytes) break;
      at = std::max(at, off + size);
    }
    live_.emplace(at, bytes);
    peak_ = std::max(peak_, at + bytes);
    return at;
  }
  void release(size_t offset) {
    for (auto it = live_.begin(); it != live_.end(); ++it)
      if (it->first == offset) { live_.erase(it); return; }
  }
  size_t peak() const { return peak_; }

 private:
  std::multimap<size_t, size_t> live_;  // offset -> size, ordered by offset
  size_t peak_ = 0;
};

}  // namespace

Plan::Plan(std::string name, const Graph& graph, const std::vector<std::string>& input_names,
           const std::vector<std::string>& output_names, const kernels::KernelTable& kernels)
    : name_(std::move(name)), kernels_(kernels), constants_(graph.constants) {
  std::map<std::string, int> slot_of;
  auto add_slot = [&](const std::string& n, SlotKind kind, int io) {
    Slot s;
    s.name = n;
    s.kind = kind;
    s.io_index = io;
    if (const ValueInfo* v = graph.value(n)) s.dtype = v->dtype;
    slots_.push_back(s);
    slot_of[n] = static_cast<int>(slots_.size() - 1);
    return slot_of[n];
  };
  for (size_t i = 0; i < input_names.size(); ++i) input_slots_.push_back(add_slot(input_names[i], SlotKind::kInput, static_cast<int>(i)));
  for (auto& [n, t] : constants_) {
    if (slot_of.count(n)) continue;
    const int s = add_slot(n, SlotKind::kConstant, -1);
    slots_[s].constant = &t;
    slots_[s].dtype = t.dtype;
  }
  std::map<std::string, int> output_index;
  for (size_t i = 0; i < output_names.size(); ++i) output_index[output_names[i]] = static_cast<int>(i);

  for (size_t ni : topo_order(graph)) {
    const Node& node = graph.nodes[ni];
    Step step;
    step.label = node.label();
    if (node.has_attr("fused")) step.label += " + " + node.attr_s("fused", "");  // nodes a rewrite folded in
    step.op_type = node.op;
    step.shape_inputs = shape_value_inputs(node);  // the partitioner's list too: one source for both
    try {
      step.op = create_op(node, graph);
      step.op->prepare(kernels);
    } catch (const std::exception& e) {
      throw Error("compiling node " + step.label + ": " + e.what());
    }
    for (const auto& in : node.inputs) {
      if (in.empty()) { step.in.push_back(-1); continue; }
      auto it = slot_of.find(in);
      if (it == slot_of.end()) throw Error("node " + step.label + " reads '" + in + "', which nothing in the partition provides");
      step.in.push_back(it->second);
    }
    for (const auto& out : node.outputs) {
      if (out.empty()) { step.out.push_back(-1); continue; }
      auto oi = output_index.find(out);
      step.out.push_back(add_slot(out, oi == output_index.end() ? SlotKind::kTemp : SlotKind::kOutput,
                                  oi == output_index.end() ? -1 : oi->second));
    }
    steps_.push_back(std::move(step));
  }
  output_slots_.assign(output_names.size(), -1);
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].kind == SlotKind::kOutput) output_slots_[static_cast<size_t>(slots_[i].io_index)] = static_cast<int>(i);
  for (size_t i = 0; i < output_slots_.size(); ++i)
    if (output_slots_[i] < 0) throw Error("fused output '" + output_names[i] + "' is not produced by the partition");

  // Fuse Relu into the op before it when that op's output feeds only the Relu and leaves no partition.
  std::vector<int> readers(slots_.size(), 0);
  for (const auto& s : steps_)
    for (int in : s.in)
      if (in >= 0) ++readers[static_cast<size_t>(in)];
  for (size_t i = 0; i + 1 < steps_.size(); ++i) {
    Step& a = steps_[i];
    for (size_t j = i + 1; j < steps_.size(); ++j) {
      Step& b = steps_[j];
      if (!b.op || b.op_type != "Relu" || b.in.size() != 1 || a.out.size() != 1) continue;
      const int mid = a.out[0];
      if (b.in[0] != mid || slots_[static_cast<size_t>(mid)].kind != SlotKind::kTemp || readers[static_cast<size_t>(mid)] != 1) continue;
      if (!a.op->try_fuse_relu()) break;
      a.out[0] = b.out[0];
      a.label += " + " + b.label;
      b.op.reset();
      break;
    }
  }
  steps_.erase(std::remove_if(steps_.begin(), steps_.end(), [](const Step& s) { return !s.op; }), steps_.end());

  // Slots whose values decide shapes: constants are read once here, fused inputs on every run.
  for (const Step& st : steps_) {
    for (size_t idx : st.shape_inputs) {
      if (idx >= st.in.size() || st.in[idx] < 0) continue;
      const int slot = st.in[idx];
      const Slot& sl = slots_[static_cast<size_t>(slot)];
      if (sl.kind == SlotKind::kConstant) {
        constant_values_[slot] = shape_values_of(*sl.constant);
      } else if (sl.kind == SlotKind::kInput) {
        if (sl.dtype != DType::kInt64 && sl.dtype != DType::kFloat32)
          throw Error("node " + st.label + ": shape input '" + sl.name + "' is neither int64 nor float32");
        if (std::find(value_inputs_.begin(), value_inputs_.end(), slot) == value_inputs_.end()) value_inputs_.push_back(slot);
      } else {
        throw Error("node " + st.label + ": shape input '" + sl.name + "' is computed inside the partition");
      }
    }
  }

  last_use_.assign(slots_.size(), -1);
  for (size_t i = 0; i < steps_.size(); ++i)
    for (int in : steps_[i].in)
      if (in >= 0) last_use_[static_cast<size_t>(in)] = static_cast<int>(i);
}

std::vector<std::string> Plan::step_labels() const {
  std::vector<std::string> out;
  for (const Step& s : steps_) out.push_back(s.label);
  return out;
}

std::string Plan::step_error(const Step& s, const std::vector<Shape>& shapes, const std::string& what) const {
  std::string msg = "node " + s.label + " (inputs";
  for (int in : s.in) {
    if (in < 0) { msg += " -"; continue; }
    const Slot& sl = slots_[static_cast<size_t>(in)];
    msg += " " + sl.name + ":" + dtype_name(sl.dtype) + (static_cast<size_t>(in) < shapes.size() ? shape_str(shapes[static_cast<size_t>(in)]) : "");
  }
  return msg + "): " + what;
}

std::shared_ptr<Plan::ShapePlan> Plan::make_shape_plan(const std::vector<Shape>& input_shapes,
                                                       const std::map<int, std::vector<int64_t>>& values) const {
  auto sp = std::make_shared<ShapePlan>();
  sp->shapes.resize(slots_.size());
  sp->offsets.assign(slots_.size(), 0);
  for (size_t i = 0; i < input_slots_.size(); ++i) sp->shapes[static_cast<size_t>(input_slots_[i])] = input_shapes[i];
  for (size_t i = 0; i < slots_.size(); ++i)
    if (slots_[i].kind == SlotKind::kConstant) sp->shapes[i] = slots_[i].constant->shape;
  ArenaPlanner arena;
  size_t max_scratch = 0;
  sp->step_scratch.resize(steps_.size());
  for (size_t si = 0; si < steps_.size(); ++si) {
    const Step& s = steps_[si];
    std::vector<const Shape*> ins;
    for (int in : s.in) ins.push_back(in < 0 ? nullptr : &sp->shapes[static_cast<size_t>(in)]);
    ShapeValues vals(s.in.size(), nullptr);
    for (size_t idx : s.shape_inputs) {
      if (idx >= s.in.size() || s.in[idx] < 0) continue;
      auto it = values.find(s.in[idx]);
      if (it != values.end()) {
        vals[idx] = &it->second;
      } else if (auto ct = constant_values_.find(s.in[idx]); ct != constant_values_.end()) {
        vals[idx] = &ct->second;
      }
    }
    std::vector<Shape> outs;
    try {
      outs = s.op->infer(ins, vals);
      sp->step_scratch[si] = s.op->scratch_bytes(ins);
    } catch (const std::exception& e) {
      throw Error(step_error(s, sp->shapes, e.what()), ORT_INVALID_ARGUMENT);
    }
    max_scratch = std::max(max_scratch, sp->step_scratch[si]);
    // A view (Reshape, Flatten, Squeeze...) of a temporary this step reads last: the output takes over the
    // input's buffer, and the step copies nothing.
    int alias_of = -1;
    if (s.op->output_aliases_input() && !s.in.empty() && s.in[0] >= 0 && s.out.size() == 1 && s.out[0] >= 0) {
      const size_t in0 = static_cast<size_t>(s.in[0]), o0 = static_cast<size_t>(s.out[0]);
      if (slots_[in0].kind == SlotKind::kTemp && slots_[o0].kind == SlotKind::kTemp && last_use_[in0] == static_cast<int>(si) &&
          slots_[in0].dtype == slots_[o0].dtype)
        alias_of = s.in[0];
    }
    for (size_t o = 0; o < s.out.size() && o < outs.size(); ++o) {
      if (s.out[o] < 0) continue;
      const size_t slot = static_cast<size_t>(s.out[o]);
      sp->shapes[slot] = outs[o];
      if (slots_[slot].kind == SlotKind::kTemp) {
        size_t bytes = 0;
        try {
          bytes = tensor_bytes(outs[o], slots_[slot].dtype);
        } catch (const std::exception& e) {
          throw Error(step_error(s, sp->shapes, e.what()), ORT_INVALID_ARGUMENT);
        }
        sp->offsets[slot] = alias_of >= 0 ? sp->offsets[static_cast<size_t>(alias_of)] : arena.allocate(bytes);
        if (last_use_[slot] < 0) arena.release(sp->offsets[slot]);
      }
    }
    for (int in : s.in)
      if (in >= 0 && in != alias_of && slots_[static_cast<size_t>(in)].kind == SlotKind::kTemp &&
          last_use_[static_cast<size_t>(in)] == static_cast<int>(si))
        arena.release(sp->offsets[static_cast<size_t>(in)]);
  }
  sp->scratch_offset = align_up(arena.peak());
  sp->arena_bytes = sp->scratch_offset + align_up(max_scratch);
  if (sp->arena_bytes > arena_limit())
    throw Error("the partition's intermediate tensors need " + std::to_string(sp->arena_bytes >> 20) + " MiB for these input shapes, "
                "more than the limit of " + std::to_string(arena_limit() >> 20) + " MiB (half of this machine's memory)",
                ORT_INVALID_ARGUMENT);
  return sp;
}

std::shared_ptr<const Plan::ShapePlan> Plan::shape_plan(const std::vector<Shape>& input_shapes,
                                                        const std::map<int, std::vector<int64_t>>& values) const {
  std::vector<int64_t> key;
  for (const Shape& s : input_shapes) {
    key.push_back(static_cast<int64_t>(s.size()));
    key.insert(key.end(), s.begin(), s.end());
  }
  for (const auto& [slot, v] : values) {
    key.push_back(static_cast<int64_t>(v.size()));
    key.insert(key.end(), v.begin(), v.end());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cache_.find(key);
    if (it != cache_.end()) return it->second;
  }
  std::shared_ptr<const ShapePlan> sp = make_shape_plan(input_shapes, values);
  std::lock_guard<std::mutex> lock(mu_);
  // Unbounded shape variety would grow the cache forever: keep the most recent few hundred.
  if (cache_.size() >= 256) cache_.erase(cache_.begin());
  cache_.emplace(key, sp);
  return sp;
}

void Plan::run(OrtKernelContext* ctx) const {
  const size_t n_in = input_slots_.size();
  std::vector<Shape> in_shapes(n_in);
  std::vector<const void*> in_data(n_in);
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
      in_shapes[i].resize(rank);
      if (rank) st = ort().GetDimensions(info, in_shapes[i].data(), rank);
    }
    if (!st) st = ort().GetTensorElementType(info, &et);
    ort().ReleaseTensorTypeAndShapeInfo(info);
    OPTIM_CHECK(st);
    if (dtype_from_onnx(et) != sl.dtype)
      throw Error("input '" + sl.name + "' is " + dtype_name(dtype_from_onnx(et)) + ", the partition was compiled for " + dtype_name(sl.dtype), ORT_INVALID_ARGUMENT);
    OPTIM_CHECK(ort().GetTensorData(v, &in_data[i]));
  }
  std::map<int, std::vector<int64_t>> values;
  for (int slot : value_inputs_) {
    const int i = slots_[static_cast<size_t>(slot)].io_index;
    const int64_t n = shape_numel(in_shapes[static_cast<size_t>(i)]);
    std::vector<int64_t>& v = values[slot];
    if (slots_[static_cast<size_t>(slot)].dtype == DType::kFloat32) {  // as bit patterns (see ShapeValues)
      const uint32_t* p = static_cast<const uint32_t*>(in_data[static_cast<size_t>(i)]);
      v.assign(p, p + n);
    } else {
      const int64_t* p = static_cast<const int64_t*>(in_data[static_cast<size_t>(i)]);
      v.assign(p, p + n);
    }
  }
  std::shared_ptr<const ShapePlan> sp = shape_plan(in_shapes, values);

  std::unique_ptr<Arena> arena;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_arenas_.empty()) {
      arena = std::move(free_arenas_.back());
      free_arenas_.pop_back();
    }
  }
  if (!arena) arena = std::make_unique<Arena>();
  if (arena->size < sp->arena_bytes + kAlign) {
    // Left uninitialized: every byte is written by the step that produces it before it is read.
    arena->data.reset(new (std::nothrow) uint8_t[sp->arena_bytes + kAlign]);
    arena->size = arena->data ? sp->arena_bytes + kAlign : 0;
    if (!arena->data) throw Error("cannot allocate " + std::to_string(sp->arena_bytes >> 20) + " MiB for intermediate tensors");
  }
  uint8_t* base = arena->data.get();
  base += (kAlign - reinterpret_cast<uintptr_t>(base) % kAlign) % kAlign;

  std::vector<void*> data(slots_.size(), nullptr);
  for (size_t i = 0; i < n_in; ++i) data[static_cast<size_t>(input_slots_[i])] = const_cast<void*>(in_data[i]);
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].kind == SlotKind::kConstant) data[i] = const_cast<uint8_t*>(slots_[i].constant->bytes.data());
    if (slots_[i].kind == SlotKind::kTemp) data[i] = base + sp->offsets[i];
  }
  for (size_t j = 0; j < output_slots_.size(); ++j) {
    const size_t slot = static_cast<size_t>(output_slots_[j]);
    const Shape& s = sp->shapes[slot];
    OrtValue* ov = nullptr;
    OPTIM_CHECK(ort().KernelContext_GetOutput(ctx, j, s.data(), s.size(), &ov));
    void* p = nullptr;
    OPTIM_CHECK(ort().GetTensorMutableData(ov, &p));
    data[slot] = p;
  }

  struct ReturnArena {  // hands the arena back to the pool on every exit path
    const Plan* plan;
    std::unique_ptr<Arena>* arena;
    ~ReturnArena() {
      std::lock_guard<std::mutex> lock(plan->mu_);
      plan->free_arenas_.push_back(std::move(*arena));
    }
  } give_back{this, &arena};

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
        r.shape = &sp->shapes[static_cast<size_t>(in)];
        r.data = data[static_cast<size_t>(in)];
      }
      ins.push_back(r);
    }
    for (int o : s.out) {
      TensorOut r;
      if (o >= 0) {
        r.dtype = slots_[static_cast<size_t>(o)].dtype;
        r.shape = &sp->shapes[static_cast<size_t>(o)];
        r.data = data[static_cast<size_t>(o)];
      }
      outs.push_back(r);
    }
    RunContext rc(kernels_, ctx, base + sp->scratch_offset, sp->step_scratch[si]);
    try {
      s.op->run(rc, ins, outs);
    } catch (const std::exception& e) {
      throw Error(step_error(s, sp->shapes, e.what()));
    }
    timer.stop(si, ins.empty() ? nullptr : ins[0].shape);
  }
  timer.commit();
}

}  // namespace optim
