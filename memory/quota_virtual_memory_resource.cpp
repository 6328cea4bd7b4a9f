#include "memory/quota_virtual_memory_resource.hpp"

#include <algorithm>
#include <stdexcept>

#include "memory/cross_job_release.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {

QuotaVirtualMemoryResource::QuotaVirtualMemoryResource(std::shared_ptr<VirtualMemoryResource> upstream,
                                                       std::shared_ptr<SharedLedger> ledger, JobShare share)
    : upstream_(std::move(upstream)), ledger_(std::move(ledger)), share_(std::move(share)) {
  if (!upstream_ || !ledger_) {
    throw std::invalid_argument("QuotaVirtualMemoryResource: upstream and ledger must not be null");
  }
  job_ = ledger_->join(share_);
}

QuotaVirtualMemoryResource::~QuotaVirtualMemoryResource() {
  try {
    ledger_->leave(job_);
  } catch (...) {
    // Already reclaimed (cannot happen while this process lives); nothing left to return.
  }
}

std::size_t QuotaVirtualMemoryResource::capacity_bytes() const {
  std::size_t cap = std::min(share_.limit, ledger_->capacity_bytes());
  if (upstream_->capacity_bytes() != 0) cap = std::min(cap, upstream_->capacity_bytes());
  return cap;
}

std::string QuotaVirtualMemoryResource::name() const { return upstream_->name() + " (job '" + share_.name + "')"; }

// Note [The ledger and the device disagree] (cross_job_release.hpp).
std::size_t QuotaVirtualMemoryResource::available_bytes() const {
  return quota_available_bytes(*ledger_, job_, upstream_->available_bytes());
}

std::size_t QuotaVirtualMemoryResource::charged_bytes() const { return ledger_->entry(job_).in_use_bytes; }

PhysicalHandle QuotaVirtualMemoryResource::create_physical(std::size_t bytes) {
  charge_or_throw(*ledger_, job_, share_, bytes);
  PhysicalHandle h;
  try {
    h = upstream_->create_physical(bytes);
  } catch (...) {
    ledger_->release(job_, bytes);
    throw;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  chunk_bytes_[h] = bytes;
  return h;
}

void QuotaVirtualMemoryResource::release_physical(PhysicalHandle handle) {
  std::size_t bytes = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = chunk_bytes_.find(handle);
    if (it == chunk_bytes_.end()) {
      throw VirtualMemoryError("QuotaVirtualMemoryResource: release_physical of handle " + std::to_string(handle) +
                               " that this job did not create (or released already)");
    }
    bytes = it->second;
  }
  upstream_->release_physical(handle);  // may throw (still mapped): then nothing changes here
  {
    std::lock_guard<std::mutex> lock(mutex_);
    chunk_bytes_.erase(handle);
  }
  ledger_->release(job_, bytes);
}

}  // namespace memtrain::memory
