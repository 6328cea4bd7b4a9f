#include "memory/statistics_resource_adaptor.hpp"

#include <algorithm>
#include <stdexcept>

namespace memtrain::memory {
namespace {

void add(StatCounter& c, std::int64_t amount) {
  c.current += amount;
  c.allocated += amount;
  c.peak = std::max(c.peak, c.current);
}

void remove(StatCounter& c, std::int64_t amount) {
  c.current -= amount;
  c.freed += amount;
}

}  // namespace

StatisticsResourceAdaptor::StatisticsResourceAdaptor(std::shared_ptr<MemoryResource> upstream)
    : upstream_(std::move(upstream)) {
  if (!upstream_) throw std::invalid_argument("StatisticsResourceAdaptor: upstream is null");
}

StatisticsResourceAdaptor::Counters StatisticsResourceAdaptor::counters() const {
  std::lock_guard lock(mutex_);
  return counters_;
}

void StatisticsResourceAdaptor::reset_peaks() {
  std::lock_guard lock(mutex_);
  counters_.bytes.peak = counters_.bytes.current;
  counters_.allocations.peak = counters_.allocations.current;
}

void* StatisticsResourceAdaptor::do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) {
  void* p = upstream_->allocate(bytes, alignment, stream);
  std::lock_guard lock(mutex_);
  add(counters_.bytes, static_cast<std::int64_t>(bytes));
  add(counters_.allocations, 1);
  return p;
}

void StatisticsResourceAdaptor::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) {
  upstream_->deallocate(p, bytes, alignment, stream);
  std::lock_guard lock(mutex_);
  remove(counters_.bytes, static_cast<std::int64_t>(bytes));
  remove(counters_.allocations, 1);
}

}  // namespace memtrain::memory
