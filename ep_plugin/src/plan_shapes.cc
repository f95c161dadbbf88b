// A Plan's per-shape plans: every slot's shape for one set of input shapes (and shape-deciding values),
// the intermediate buffers placed first-fit in one arena (a view takes over the buffer it reads last),
// and a cache of recent plans.
#include <algorithm>
#include <map>

#include <unistd.h>

#include "plan.h"

namespace optim {
namespace {

size_t align_up(size_t n) { return (n + Plan::kAlign - 1) / Plan::kAlign * Plan::kAlign; }

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
    // input's buffer, and the step copies nothing. An in-place input (a convolution's residual) likewise, when
    // it has the output's shape and the step reads it through no other input: the output overwrites it
    // element by element, which a convolution also reading it as its image (y = conv(x) + x) would see.
    int alias_of = -1;
    const bool view = s.op->output_aliases_input();
    const int k = view ? 0 : s.op->in_place_input();
    if (k >= 0 && static_cast<size_t>(k) < s.in.size() && s.in[static_cast<size_t>(k)] >= 0 && !s.out.empty() &&
        s.out[0] >= 0 && (view ? s.out.size() == 1 : !outs.empty())) {
      const size_t in0 = static_cast<size_t>(s.in[static_cast<size_t>(k)]), o0 = static_cast<size_t>(s.out[0]);
      const bool read_once = std::count(s.in.begin(), s.in.end(), static_cast<int>(in0)) == 1;
      if (slots_[in0].kind == SlotKind::kTemp && slots_[o0].kind == SlotKind::kTemp && last_use_[in0] == static_cast<int>(si) &&
          slots_[in0].dtype == slots_[o0].dtype && (view || (read_once && sp->shapes[in0] == outs[0])))
        alias_of = static_cast<int>(in0);
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
        sp->offsets[slot] = alias_of >= 0 && o == 0 ? sp->offsets[static_cast<size_t>(alias_of)] : arena.allocate(bytes);
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

}  // namespace optim
