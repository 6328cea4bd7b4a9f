#include "comms/gradient_synchronizer.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
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
                                           Communicator& group, core::Context& ctx, bool overlap)
    : buckets_(buckets),
      group_(group),
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
  }
  // Note [Communication buffers are allocated up front]
  if (group.size() > 1 && largest_half > 0) {
    staging_ = core::Tensor::empty(ctx, {std::min(largest_half, kStagingElements)},
                                   core::DType::f32, core::tags().communication);
  }
  begin_step();
  if (active_ && overlap) worker_ = std::thread([this] { work(); });
}

GradientSynchronizer::~GradientSynchronizer() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
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
    throw RuntimeError("injected failure of a collective (MEMTRAIN_TEST_FAIL_GRADIENT_SYNC, "
                       "Note [Injected gradient-sync failure])");
  }
  core::Tensor& buf = buckets_[static_cast<std::size_t>(b)].buffer;
  const std::int64_t n = buf.numel();
  const auto t0 = Clock::now();
  if (!is_half(buf.dtype())) {
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
