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
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

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

GradientSynchronizer::GradientSynchronizer(std::vector<GradientBucket>& buckets, Communicator& group,
                                           core::Context& ctx, bool overlap, GradientReduction reduction,
                                           const Compression* compression)
    : buckets_(buckets),
      group_(group),
      reduction_(reduction),
      rank_(static_cast<std::size_t>(group.rank())),
      active_(group.size() > 1 && !ctx.dry_run()),
      fail_injected_(failure_injected_here()),
      missing_(buckets.size(), 0),
      queued_(buckets.size(), false) {
  std::int64_t largest_half = 0;  // or split entry: the staging buffer's need
  bool found_split = false;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    for (const auto& e : buckets_[b].entries) {
      if (!where_.emplace(e.key, std::make_pair(static_cast<int>(b), false)).second) {
        throw RuntimeError("GradientSynchronizer: gradient key " + std::to_string(e.key) + " (" + e.name +
                           ") is in two bucket entries");
      }
    }
    if (is_half(buckets_[b].buffer.dtype())) {
      largest_half = std::max(largest_half, buckets_[b].buffer.numel());
    }
    for (const auto& e : buckets_[b].entries) {
      if (!e.split_rows) continue;
      if (split_ || found_split) {
        throw RuntimeError("GradientSynchronizer: more than one gradient is marked split_rows (" + e.name + ")");
      }
      found_split = true;
      if (e.shape.empty() || e.shape[0] < 1) {
        throw RuntimeError("GradientSynchronizer: gradient " + e.name + " is marked split_rows but has no rows");
      }
      // Note [The tied embedding's rows are summed in two parts]
      if (group.size() > 1 && reduction_ == GradientReduction::all_reduce && compression == nullptr &&
          buckets_[b].buffer.dtype() == core::DType::f32) {
        split_.emplace();
        split_->bucket = static_cast<int>(b);
        split_->key = e.key;
        split_->offset = e.offset;
        split_->rows = e.shape[0];
        split_->cols = e.numel / e.shape[0];
        largest_half = std::max(largest_half, e.numel);
      }
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
  if (compression != nullptr) {
    if (reduction_ != GradientReduction::all_reduce) {
      throw RuntimeError("GradientSynchronizer: gradient compression needs ZeRO stage 0 (all-reduced buckets)");
    }
    // Note [16-bit gradients are compressed in f32]
    std::int64_t largest_half_bucket = 0;
    for (const auto& b : buckets_) {
      if (is_half(b.buffer.dtype())) largest_half_bucket = std::max(largest_half_bucket, b.buffer.numel());
    }
    if (group.size() > 1 && largest_half_bucket > 0) {
      compress_staging_ = core::Tensor::empty(ctx, {largest_half_bucket}, core::DType::f32, core::tags().communication);
    }
    if (group.size() > 1 && compression->make) compressor_ = compression->make(buckets_, group.size(), ctx);
    start_iter_ = compression->start_iter;
  }
  if (split_) {
    split_->mask = core::Tensor::empty(ctx, {split_->rows}, core::DType::f32, core::tags().communication);
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

void GradientSynchronizer::begin_step(std::int64_t iteration) {
  iteration_ = iteration;
  local_ = iteration >= local_from_;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    missing_[b] = static_cast<std::int64_t>(buckets_[b].entries.size());
    queued_[b] = false;
  }
  for (auto& [key, w] : where_) w.second = false;
  queue_order_.clear();
  stats_ = {};
  if (split_) split_->early_queued = false;
  early_rows_ = 0;
}

void GradientSynchronizer::mark_ready(std::size_t key) {
  auto it = where_.find(key);
  if (it == where_.end()) {
    throw RuntimeError("GradientSynchronizer::mark_ready: no bucket holds gradient key " + std::to_string(key));
  }
  auto& [bucket, announced] = it->second;
  if (announced) {
    throw RuntimeError("GradientSynchronizer::mark_ready: gradient key " + std::to_string(key) +
                       " was announced twice in one step");
  }
  announced = true;
  if (--missing_[static_cast<std::size_t>(bucket)] == 0) enqueue(bucket);
}

void GradientSynchronizer::mark_rows_ready(std::size_t key, const std::vector<std::int32_t>& late_rows) {
  auto it = where_.find(key);
  if (it == where_.end()) {
    throw RuntimeError("GradientSynchronizer::mark_rows_ready: no bucket holds gradient key " + std::to_string(key));
  }
  const auto& entries = buckets_[static_cast<std::size_t>(it->second.first)].entries;
  const auto entry =
      std::find_if(entries.begin(), entries.end(), [key](const GradientBucketEntry& e) { return e.key == key; });
  if (!entry->split_rows) {
    throw RuntimeError("GradientSynchronizer::mark_rows_ready: gradient " + entry->name + " is not marked split_rows");
  }
  if (it->second.second || (split_ && split_->early_queued)) {
    throw RuntimeError("GradientSynchronizer::mark_rows_ready: gradient " + entry->name +
                       " was already announced in this step");
  }
  const std::int64_t rows = entry->shape[0];
  for (std::int32_t r : late_rows) {
    if (r < 0 || r >= rows) {
      throw RuntimeError("GradientSynchronizer::mark_rows_ready: row " + std::to_string(r) + " of gradient " +
                         entry->name + " outside [0, " + std::to_string(rows) + ")");
    }
  }
  // Without a communication thread every bucket is summed whole in finish().
  if (!split_ || !worker_.joinable() || local_) return;
  float* mask = split_->mask.data<float>();
  std::fill(mask, mask + rows, 0.0f);
  for (std::int32_t r : late_rows) mask[r] = 1.0f;
  split_->early_queued = true;
  push(Item{split_->bucket, Part::early_rows});
}

void GradientSynchronizer::enqueue(int bucket) {
  queued_[static_cast<std::size_t>(bucket)] = true;
  queue_order_.push_back(bucket);
  if (!worker_.joinable() || local_) return;  // finish() sums on this thread, or nothing
  const bool rest = split_ && split_->bucket == bucket && split_->early_queued;
  push(Item{bucket, rest ? Part::rest : Part::whole});
}

void GradientSynchronizer::push(Item item) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(item);
    ++in_flight_;
  }
  work_ready_.notify_one();
}

void GradientSynchronizer::sum(Item item, GradientSyncStats& into) {
  if (fail_injected_) {
    throw RuntimeError("injected failure of a collective (MEMTRAIN_TEST_FAIL_GRADIENT_SYNC)");
  }
  const auto t0 = Clock::now();
  const std::int64_t before = into.bytes;
  switch (item.part) {
    case Part::whole:
      if (compressor_ && iteration_ >= start_iter_) {
        sum_compressed(item.bucket, into);
        into.comm_s += seconds_since(t0);
        return;
      }
      sum_bucket(item.bucket, into);
      break;
    case Part::early_rows:
      sum_early_rows(into);
      break;
    case Part::rest:
      sum_rest(into);
      break;
  }
  into.uncompressed_bytes += into.bytes - before;
  into.comm_s += seconds_since(t0);
}

// Note [16-bit gradients are compressed in f32]
void GradientSynchronizer::sum_compressed(int bucket, GradientSyncStats& into) {
  core::Tensor& buf = buckets_[static_cast<std::size_t>(bucket)].buffer;
  const std::int64_t n = buf.numel();
  const auto b = static_cast<std::size_t>(bucket);
  if (!is_half(buf.dtype())) {
    compressor_->sum(b, buf.data<float>(), group_, iteration_, into);
  } else {
    const auto format = buf.dtype() == core::DType::f16 ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16;
    std::uint16_t* g = buf.data<std::uint16_t>();
    float* whole = compress_staging_.data<float>();
    kernels::convert_half_to_float(whole, g, n, format);
    compressor_->sum(b, whole, group_, iteration_, into);
    kernels::convert_float_to_half(g, whole, n, format);
  }
  into.uncompressed_bytes += n * 4;
}

// Note [The tied embedding's rows are summed in two parts]: the union of the ranks' late rows,
// then every row outside it, in row ranges.
void GradientSynchronizer::sum_early_rows(GradientSyncStats& into) {
  RowSplit& sp = *split_;
  float* mask = sp.mask.data<float>();
  group_.allreduce_sum(mask, sp.rows);
  into.bytes += sp.rows * 4;
  ++into.calls;
  sp.late.clear();
  std::vector<Range> early;
  std::int64_t from = 0;  // first row of the current run outside the union
  for (std::int64_t r = 0; r <= sp.rows; ++r) {
    if (r < sp.rows && mask[r] == 0.0f) continue;
    if (r > from) early.push_back(Range{sp.offset + from * sp.cols, (r - from) * sp.cols});
    if (r < sp.rows) sp.late.push_back(r);
    from = r + 1;
  }
  early_rows_ = sp.rows - static_cast<std::int64_t>(sp.late.size());
  sum_ranges(buckets_[static_cast<std::size_t>(sp.bucket)].buffer.data<float>(), std::move(early), into);
}

// The split entry's bucket without the early rows: the other entries and the union's rows.
void GradientSynchronizer::sum_rest(GradientSyncStats& into) {
  const RowSplit& sp = *split_;
  core::Tensor& buf = buckets_[static_cast<std::size_t>(sp.bucket)].buffer;
  std::vector<Range> rest;
  if (sp.offset > 0) rest.push_back(Range{0, sp.offset});
  for (std::int64_t r : sp.late) rest.push_back(Range{sp.offset + r * sp.cols, sp.cols});
  const std::int64_t end = sp.offset + sp.rows * sp.cols;
  if (end < buf.numel()) rest.push_back(Range{end, buf.numel() - end});
  sum_ranges(buf.data<float>(), std::move(rest), into);
}

// Ascending, disjoint ranges of an f32 buffer: adjacent ones merged, long ones summed in place,
// short ones packed into the staging buffer (one all-reduce per fill). The same ranges on every
// rank give the same collectives.
void GradientSynchronizer::sum_ranges(float* g, std::vector<Range> ranges, GradientSyncStats& into) {
  std::vector<Range> merged;
  for (const Range& r : ranges) {
    if (r.count <= 0) continue;
    if (!merged.empty() && merged.back().begin + merged.back().count == r.begin) {
      merged.back().count += r.count;
    } else {
      merged.push_back(r);
    }
  }
  float* stage = staging_.data<float>();
  const std::int64_t capacity = staging_.numel();
  std::vector<Range> packed;
  std::int64_t used = 0;
  auto flush = [&] {
    if (used == 0) return;
    group_.allreduce_sum(stage, used);
    into.bytes += used * 4;
    ++into.calls;
    std::int64_t at = 0;
    for (const Range& p : packed) {
      std::memcpy(g + p.begin, stage + at, sizeof(float) * static_cast<std::size_t>(p.count));
      at += p.count;
    }
    packed.clear();
    used = 0;
  };
  for (const Range& r : merged) {
    if (r.count >= kInPlaceElements || r.count > capacity) {
      group_.allreduce_sum(g + r.begin, r.count);
      into.bytes += r.count * 4;
      ++into.calls;
      continue;
    }
    if (used + r.count > capacity) flush();
    std::memcpy(stage + used, g + r.begin, sizeof(float) * static_cast<std::size_t>(r.count));
    packed.push_back(r);
    used += r.count;
  }
  flush();
}

void GradientSynchronizer::sum_bucket(int b, GradientSyncStats& into) {
  core::Tensor& buf = buckets_[static_cast<std::size_t>(b)].buffer;
  const std::int64_t n = buf.numel();
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
    const auto format = buf.dtype() == core::DType::f16 ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16;
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
}

// Note [16-bit gradients are summed in f32], for shards: the staging buffer holds one strip of
// k elements of every rank's shard side by side (k = staging / ranks); the strips are
// reduce-scattered and this rank's strip is rounded back into its shard, strip after strip.
void GradientSynchronizer::reduce_scatter_half(int b, GradientSyncStats& into) {
  core::Tensor& buf = buckets_[static_cast<std::size_t>(b)].buffer;
  const Shards& sh = shards_[static_cast<std::size_t>(b)];
  const auto format = buf.dtype() == core::DType::f16 ? kernels::HalfFormat::f16 : kernels::HalfFormat::bf16;
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
                         " values do not fit in a bucket of " + core::dtype_name(buf.dtype()) + " gradients");
    }
    const auto& counts = shards_[b].counts;
    try {
      if (is_half(value_dtype)) {
        // The bucket's first numel 16-bit words, whatever the gradients' type.
        auto* words =
            is_half(buf.dtype()) ? buf.data<std::uint16_t>() : reinterpret_cast<std::uint16_t*>(buf.data<float>());
        group_.allgather_in_place(words, counts);
        stats_.bytes += counts[rank_] * 2;
        stats_.uncompressed_bytes += counts[rank_] * 2;
      } else {
        group_.allgather_in_place(buf.data<float>(), counts);
        stats_.bytes += counts[rank_] * 4;
        stats_.uncompressed_bytes += counts[rank_] * 4;
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
    const Item item = queue_.front();
    queue_.pop_front();
    const bool skip = error_ != nullptr;  // after a failure the sums stop; finish() reports it
    lock.unlock();
    GradientSyncStats done;
    std::exception_ptr failure;
    if (!skip) {
      try {
        sum(item, done);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    lock.lock();
    if (failure && !error_) error_ = failure;
    thread_stats_.bytes += done.bytes;
    thread_stats_.uncompressed_bytes += done.uncompressed_bytes;
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
  if (!active_ || local_) return;
  std::exception_ptr failure;
  if (worker_.joinable()) {
    std::unique_lock<std::mutex> lock(mutex_);
    work_done_.wait(lock, [this] { return in_flight_ == 0; });
    stats_.bytes = thread_stats_.bytes;
    stats_.uncompressed_bytes = thread_stats_.uncompressed_bytes;
    stats_.calls = thread_stats_.calls;
    stats_.comm_s = thread_stats_.comm_s;
    thread_stats_ = {};
    failure = error_;
    error_ = nullptr;
  } else {
    try {
      for (int b : queue_order_) sum(Item{b, Part::whole}, stats_);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  stats_.exposed_s = seconds_since(t0);
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      throw RuntimeError(std::string("data-parallel gradient synchronisation failed: ") + e.what());
    }
  }
}

}  // namespace memtrain::comms
