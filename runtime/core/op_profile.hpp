#pragma once
// Seconds, FLOPs and bytes per op class and shape of the training step (`memtrain train
// --profile-ops`): the step breakdown that issue 15's speed work is measured by.
#include <chrono>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace memtrain::core {

// Note [Profiling ops in the step]
// The step's phase times (forward, backward, optimizer, comm) say where a step goes but not
// which op to make faster. The layers therefore time each kernel call they make, keyed by op
// class ("gemm.forward", "layernorm.backward", "convert.to_f32") and a shape text such as
// "[1024, 768] x [3072, 768]^T", with the FLOPs (2 M N K per GEMM, the model-FLOP count) and the
// bytes the op must read and write at least (its minimal traffic, for GB/s), as PyTorch's
// profiler groups by op name and input shapes. An op's time is its self time: what ops timed
// inside its scope took is subtracted, so the conversions of its 16-bit operands (timed as
// their own "convert.*" ops by the float views) are counted once, and the ops' seconds add up
// to the time spent in ops. Off (a null profile in the Context) it costs one pointer test per op; on,
// two steady_clock reads (tens of nanoseconds against ops of microseconds and more). The
// profile belongs to one Context, so concurrent runs in a process never share one.

// One op class at one shape, summed over its calls.
struct OpStat {
  std::int64_t calls = 0;
  double seconds = 0;  // wall time of the calls
  double flops = 0;    // model FLOPs of the calls (0 for ops measured in bytes)
  double bytes = 0;    // minimal bytes read + written by the calls (0 for GEMMs)
};

// The ops of a run, by (op class, shape). Not thread-safe: one per Context, used by the
// thread that drives it.
class OpProfile {
 public:
  void add(const std::string& op, const std::string& shape, double seconds, double flops, double bytes);
  const std::map<std::pair<std::string, std::string>, OpStat>& stats() const { return stats_; }
  // Seconds of every call added so far.
  double total_seconds() const { return total_seconds_; }
  // [{"op", "shape", "calls", "seconds", "flops", "bytes"}, ...], slowest first.
  nlohmann::json to_json() const;

 private:
  std::map<std::pair<std::string, std::string>, OpStat> stats_;
  double total_seconds_ = 0;
};

// Times the scope into `profile` when it is not null, less the ops timed inside it (self time,
// Note [Profiling ops in the step]): `describe()` returns {shape text, flops, bytes} and runs
// only then, so a run without a profile builds no strings.
class ScopedOp {
 public:
  struct Description {
    std::string shape;
    double flops = 0, bytes = 0;
  };
  template <typename Describe>
  ScopedOp(OpProfile* profile, const char* op, Describe&& describe) : profile_(profile), op_(op) {
    if (!profile_) return;
    description_ = describe();
    nested0_ = profile_->total_seconds();
    t0_ = std::chrono::steady_clock::now();
  }
  ~ScopedOp() {
    if (!profile_) return;
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
    const double s = elapsed - (profile_->total_seconds() - nested0_);
    profile_->add(op_, description_.shape, s, description_.flops, description_.bytes);
  }
  ScopedOp(const ScopedOp&) = delete;
  ScopedOp& operator=(const ScopedOp&) = delete;

 private:
  OpProfile* profile_;
  const char* op_;
  Description description_;
  double nested0_ = 0;
  std::chrono::steady_clock::time_point t0_;
};

// "[a, b, c]" of a shape.
std::string shape_text(const std::vector<std::int64_t>& shape);

}  // namespace memtrain::core
