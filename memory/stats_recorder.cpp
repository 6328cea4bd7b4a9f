#include "memory/stats_recorder.hpp"

#include <algorithm>

namespace memtrain::memory {
namespace {

void increase(StatCounter& c, std::size_t n) {
  const auto v = static_cast<std::int64_t>(n);
  c.current += v;
  c.allocated += v;
  c.peak = std::max(c.peak, c.current);
}

void decrease(StatCounter& c, std::size_t n) {
  const auto v = static_cast<std::int64_t>(n);
  c.current -= v;
  c.freed += v;
}

}  // namespace

double fragmentation(std::size_t largest_free, std::size_t total_free) {
  if (total_free == 0) return 0.0;
  return 1.0 - static_cast<double>(largest_free) / static_cast<double>(total_free);
}

TagStats& StatsRecorder::tag(TagId id) {
  if (id >= per_tag_.size()) per_tag_.resize(std::size_t{id} + 1);
  return per_tag_[id];
}

void StatsRecorder::block_allocated(std::size_t size, std::size_t requested, TagId tag_id) {
  increase(stats_.allocated_bytes, size);
  increase(stats_.active_bytes, size);
  increase(stats_.requested_bytes, requested);
  TagStats& t = tag(tag_id);
  increase(t.allocated_bytes, size);
  increase(t.active_bytes, size);
  increase(t.requested_bytes, requested);
}

void StatsRecorder::block_freed(std::size_t size, std::size_t requested, TagId tag_id) {
  decrease(stats_.allocated_bytes, size);
  decrease(stats_.requested_bytes, requested);
  TagStats& t = tag(tag_id);
  decrease(t.allocated_bytes, size);
  decrease(t.requested_bytes, requested);
}

void StatsRecorder::block_inactive(std::size_t size, TagId tag_id) {
  decrease(stats_.active_bytes, size);
  decrease(tag(tag_id).active_bytes, size);
}

void StatsRecorder::segment_reserved(std::size_t bytes) {
  const auto before = stats_.reserved_bytes.peak;
  increase(stats_.reserved_bytes, bytes);
  ++stats_.num_device_alloc;
  if (stats_.reserved_bytes.peak > before) peak_is_new_ = true;
}

void StatsRecorder::segment_released(std::size_t bytes) {
  decrease(stats_.reserved_bytes, bytes);
  ++stats_.num_device_free;
}

void StatsRecorder::inactive_split_added(std::size_t bytes) { increase(stats_.inactive_split_bytes, bytes); }

void StatsRecorder::inactive_split_removed(std::size_t bytes) { decrease(stats_.inactive_split_bytes, bytes); }

void StatsRecorder::reset_peaks() {
  auto reset = [](StatCounter& c) { c.peak = c.current; };
  reset(stats_.allocated_bytes);
  reset(stats_.reserved_bytes);
  reset(stats_.active_bytes);
  reset(stats_.inactive_split_bytes);
  reset(stats_.requested_bytes);
  for (TagStats& t : per_tag_) {
    reset(t.allocated_bytes);
    reset(t.active_bytes);
    reset(t.requested_bytes);
  }
  peak_is_new_ = true;  // the next segment at the (new) peak records fragmentation again
}

MemoryStats StatsRecorder::snapshot(std::size_t largest_free, std::size_t total_free) const {
  MemoryStats out = stats_;
  out.fragmentation = fragmentation(largest_free, total_free);
  out.utilization = out.reserved_bytes.peak == 0
                        ? 0.0
                        : static_cast<double>(out.allocated_bytes.peak) / static_cast<double>(out.reserved_bytes.peak);
  for (std::size_t id = 0; id < per_tag_.size(); ++id) {
    const TagStats& t = per_tag_[id];
    if (t.allocated_bytes.allocated != 0 || t.requested_bytes.allocated != 0) {
      out.per_tag.emplace(static_cast<TagId>(id), t);
    }
  }
  return out;
}

}  // namespace memtrain::memory
