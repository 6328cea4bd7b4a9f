#include "comms/gradient_synchronizer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>

#include "kernels/cpu/half_convert.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/tags.hpp"

namespace memtrain::comms {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

bool is_half(core::DType d) { return d == core::DType::f16 || d == core::DType::bf16; }

// Note [Injected gradient-sync failure]
// A failed MPI call on the communication thread is rare and cannot be provoked from outside,
// yet its path (the error crosses threads, ends the job, no rank hangs) must be tested. The
// environment variable MEMTRAIN_TEST_FAIL_GRADIENT_SYNC=<rank> makes the communication work of
// that launcher rank throw, as a failed collective would, before its first sum.
bool failure_injected_here() {
  const char* v = std::getenv("MEMTRAIN_TEST_FAIL_GRADIENT_SYNC");
  return v != nullptr && *v != '\0' && std::string(v) == std::to_string(launcher_rank());
}

}  // namespace

GradientSynchronizer::GradientSynchronizer(std::vector<GradientBucket>& buckets,
                                           Communicator& group, core::Context& ctx, bool overlap,
                                           GradientReduction reduction)
    : buckets_(buckets),
      group_(group),
      reduction_(reduction),
      rank_(static_cast<std::size_t>(group.rank())),
      active_(group.size() > 1 && !ctx.dry_run()),
      fail_injected_(failure_injected_here()),
      missing_(buckets.size(), 0),
      queued_(buckets.size(), false) {
  std::int64_t largest_half = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (const auto& e : buckets_[b].entries) {
      if (!where_.emplace(e.key, std::make_pair(static_cast<int>(b), false)).second) {
        throw RuntimeError("GradientSynchronizer: gradient key " + std::to_string(e.key) + " (" +
                           e.name + ") is in two bucket entries");
      }
    }
    if (is_half(buckets_[b].buffer.dtype())) {
      largest_half = std::max(largest_half, buckets_[b].buffer.numel());
    }
    const std::int64_t n = buckets_[b].buffer.numel();
    Shards sh;
    if (reduction_ == GradientReduction::reduce_scatter) {
      sh.counts = shard_counts(n, group.size());
      sh.begin = shard_offset(sh.counts, group.rank());
    } else {
      sh.counts.assign(static_cast<std::size_t>(group.size()), n);
    }
    shards_.push_back(std::move(sh));
  }
  // Note [Communication buffers are allocated up front]
  // A reduce-scatter stages one strip of every rank's shard at a time: at least one element
  // per rank.
  if (group.size() > 1 && largest_half > 0) {
    std::int64_t elements = std::min(largest_half, kStagingElements);
    if (reduction_ == GradientReduction::reduce_scatter) elements = std::max<std::int64_t>(elements, group.size());
    staging_ = core::Tensor::empty(ctx, {elements}, core::DType::f32, core::tags().communication);
  }
  begin_step();
  if (active_ && overlap) worker_ = std::thread([this] { work(); });
}

GradientSynchronizer::~GradientSynchronizer() {
  if (!worker_.joinable()) return;
  {
    // Only when a step failed between begin_step and finish are buckets still queued: they are
    // dropped, not started (the other ranks may never join them); a sum in flight completes.
    std::lock_guard<std::mutex> lock(mutex_);
    in_flight_ -= static_cast<int>(queue_.size());
    queue_.clear();
    stopping_ = true;
  }
  work_ready_.notify_all();
  worker_.join();
}

void GradientSynchronizer::begin_step() {
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    missing_[b] = static_cast<std::int64_t>(buckets_[b].entries.size());
    queued_[b] = false;
  }
  for (auto& [key, w] : where_) w.second = false;
  queue_order_.clear();
  stats_ = {};
}

void GradientSynchronizer::mark_ready(std::size_t key) {
  auto it = where_.find(key);
  if (it == where_.end()) {
    throw RuntimeError("GradientSynchronizer::mark_ready: no bucket holds gradient key " +
                       std::to_string(key));
  }
  auto& [bucket, announced] = it->second;
  if (announced) {
    throw RuntimeError("GradientSynchronizer::mark_ready: gradient key " + std::to_string(key) +
                       " was announced twice in one step");
  }
  announced = true;
  if (--missing_[static_cast<std::size_t>(bucket)] == 0) enqueue(bucket);
}

void GradientSynchronizer::enqueue(int bucket) {
  queued_[static_cast<std::size_t>(bucket)] = true;
  queue_order_.push_back(bucket);
  if (!worker_.joinable()) return;  // finish() sums on this thread
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(bucket);
    ++in_flight_;
  }
  work_ready_.notify_one();
}

void GradientSynchronizer::sum_bucket(int b, GradientSyncStats& into) {
  if (fail_injected_) {
    throw RuntimeError("injected failure of a collective (MEMTRAIN_TEST_FAIL_GRADIENT_SYNC)");
  }
  core::Tensor& buf = buckets_[static_cast<std::size_t>(b)].buffer;
  const std::int64_t n = buf.numel();
  const auto t0 = Clock::now();
  if (reduction_ == GradientReduction::reduce_scatter) {
    if (is_half(buf.dtype())) {
      reduce_scatter_half(b, into);
    } else {
      const Shards& sh = shards_[static_cast<std::size_t>(b)];
      float* g = buf.data<float>();
      group_.reduce_scatter_sum_in_place(g, sh.counts);
      // The result lands at the start; the shard's place is sh.begin.
      if (sh.begin > 0) std::memmove(g + sh.begin, g, sizeof(float) * sh.counts[rank_]);
      into.bytes += n * 4;
      ++into.calls;
    }
  } else if (!is_half(buf.dtype())) {
    group_.allreduce_sum(buf.data<float>(), n);
    into.bytes += n * 4;
    ++into.calls;
  } else {
    // Note [16-bit gradients are summed in f32]
    const auto format =
        buf.dtype() == core::DType::f16 ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16;
    std::uint16_t* g = buf.data<std::uint16_t>();
    float* stage = staging_.data<float>();
    for (std::int64_t lo = 0; lo < n; lo += staging_.numel()) {
      const std::int64_t len = std::min(staging_.numel(), n - lo);
      kernels::convert_half_to_float(stage, g + lo, len, format);
      group_.allreduce_sum(stage, len);
      kernels::convert_float_to_half(g + lo, stage, len, format);
      into.bytes += len * 4;
      ++into.calls;
    }
  }
  into.comm_s += seconds_since(t0);
}

// Note [16-bit gradients are summed in f32], for shards: the staging buffer holds one strip of
// k elements of every rank's shard side by side (k = staging / ranks); the strips are
// reduce-scattered and this rank's strip is rounded back into its shard, strip after strip.
void GradientSynchronizer::reduce_scatter_half(int b, GradientSyncStats& into) {
  core::Tensor& buf = buckets_[static_cast<std::size_t>(b)].buffer;
  const Shards& sh = shards_[static_cast<std::size_t>(b)];
  const auto format =
      buf.dtype() == core::DType::f16 ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16;
  std::uint16_t* g = buf.data<std::uint16_t>();
  float* stage = staging_.data<float>();
  const std::size_t P = sh.counts.size();
  const std::int64_t k = staging_.numel() / static_cast<std::int64_t>(P);
  std::vector<std::int64_t> strip(P), begin(P);
  for (std::size_t r = 0; r < P; ++r) begin[r] = shard_offset(sh.counts, static_cast<int>(r));
  for (std::int64_t lo = 0; lo < sh.counts[0]; lo += k) {
    std::int64_t at = 0;
    for (std::size_t r = 0; r < P; ++r) {
      strip[r] = std::clamp<std::int64_t>(sh.counts[r] - lo, 0, k);
      kernels::convert_half_to_float(stage + at, g + begin[r] + lo, strip[r], format);
      at += strip[r];
    }
    group_.reduce_scatter_sum_in_place(stage, strip);
    kernels::convert_float_to_half(g + sh.begin + lo, stage, strip[rank_], format);
    into.bytes += at * 4;
    ++into.calls;
  }
}

void GradientSynchronizer::all_gather_shards(core::DType value_dtype) {
  if (!active_) return;
  const auto t0 = Clock::now();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    core::Tensor& buf = buckets_[b].buffer;
    if (core::dtype_size(value_dtype) > core::dtype_size(buf.dtype())) {
      throw RuntimeError("GradientSynchronizer::all_gather_shards: " + core::dtype_name(value_dtype) +
                         " values do not fit in a bucket of " + core::dtype_name(buf.dtype()) +
                         " gradients");
    }
    const auto& counts = shards_[b].counts;
    try {
      if (is_half(value_dtype)) {
        // The bucket's first numel 16-bit words, whatever the gradients' type.
        auto* words = is_half(buf.dtype()) ? buf.data<std::uint16_t>()
                                           : reinterpret_cast<std::uint16_t*>(buf.data<float>());
        group_.allgather_in_place(words, counts);
        stats_.bytes += counts[rank_] * 2;
      } else {
        group_.allgather_in_place(buf.data<float>(), counts);
        stats_.bytes += counts[rank_] * 4;
      }
      ++stats_.calls;
    } catch (const std::exception& e) {
      throw RuntimeError(std::string("data-parallel parameter all-gather (ZeRO-1) failed: ") + e.what());
    }
  }
  stats_.comm_s += seconds_since(t0);
}

void GradientSynchronizer::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    work_ready_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    const int b = queue_.front();
    queue_.pop_front();
    const bool skip = error_ != nullptr;  // after a failure the sums stop; finish() reports it
    lock.unlock();
    GradientSyncStats done;
    std::exception_ptr failure;
    if (!skip) {
      try {
        sum_bucket(b, done);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    lock.lock();
    if (failure && !error_) error_ = failure;
    thread_stats_.bytes += done.bytes;
    thread_stats_.calls += done.calls;
    thread_stats_.comm_s += done.comm_s;
    if (--in_flight_ == 0) work_done_.notify_all();
  }
}

void GradientSynchronizer::finish() {
  const auto t0 = Clock::now();
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    if (!queued_[b]) enqueue(static_cast<int>(b));
  }
  if (!active_) return;
  std::exception_ptr failure;
  if (worker_.joinable()) {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [this] { return in_flight_ == 0; });
    stats_.bytes = thread_stats_.bytes;
    stats_.calls = thread_stats_.calls;
    stats_.comm_s = thread_stats_.comm_s;
    thread_stats_ = {};
    failure = error_;
    error_ = nullptr;
  } else {
    try {
      for (int b : queue_order_) sum_bucket(b, stats_);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  stats_.exposed_s = seconds_since(t0);
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      throw RuntimeError(std::string("data-parallel gradient synchronisation failed: ") +
                         e.what());
    }
  }
}

}  // namespace memtrain::comms
