#include "memory/quota_resource_adaptor.hpp"

#include <algorithm>
#include <stdexcept>

#include "memory/byte_size.hpp"
#include "memory/cross_job_release.hpp"
#include "memory/out_of_memory.hpp"

namespace memtrain::memory {

QuotaResourceAdaptor::QuotaResourceAdaptor(std::shared_ptr<MemoryResource> upstream,
                                           std::shared_ptr<SharedLedger> ledger, JobShare share)
    : upstream_(std::move(upstream)), ledger_(std::move(ledger)), share_(std::move(share)) {
  if (!upstream_ || !ledger_) throw std::invalid_argument("QuotaResourceAdaptor: upstream and ledger must not be null");
  job_ = ledger_->join(share_);
}

QuotaResourceAdaptor::~QuotaResourceAdaptor() {
  try {
    ledger_->leave(job_);
  } catch (...) {
    // Already reclaimed (cannot happen while this process lives); nothing left to return.
  }
}

std::size_t QuotaResourceAdaptor::capacity_bytes() const {
  std::size_t cap = std::min(share_.limit, ledger_->capacity_bytes());
  if (upstream_->capacity_bytes() != 0) cap = std::min(cap, upstream_->capacity_bytes());
  return cap;
}

std::string QuotaResourceAdaptor::name() const { return upstream_->name() + " (job '" + share_.name + "')"; }

std::string quota_refusal_message(SharedLedger& ledger, const JobShare& share, const ChargeResult& refused,
                                  std::size_t bytes) {
  std::string msg = "out of memory on " + ledger.device() + ": job '" + share.name + "' tried to allocate " +
                    format_byte_size(bytes) + " with " + format_byte_size(refused.in_use_bytes) + " in use; ";
  if (refused.refusal == ChargeRefusal::over_limit) {
    return msg + "its limit is " + format_byte_size(share.limit) + ". Raise memory.limit or use less memory.";
  }
  LedgerSnapshot snap = ledger.snapshot();
  const std::size_t mine = std::max(refused.in_use_bytes, share.reservation);
  const std::size_t others = snap.committed_bytes - std::min(snap.committed_bytes, mine);
  return msg + "capacity " + format_byte_size(snap.capacity_bytes) + ", other jobs hold " + format_byte_size(others) +
         " (reserved or in use), " + format_byte_size(refused.available_bytes) +
         " is left to this job. Raise memory.reservation or wait for other jobs.";
}

std::size_t QuotaResourceAdaptor::charged_bytes() const { return ledger_->entry(job_).in_use_bytes; }

// Note [The ledger and the device disagree] (cross_job_release.hpp).
std::size_t QuotaResourceAdaptor::available_bytes() const {
  return quota_available_bytes(*ledger_, job_, upstream_->available_bytes());
}

void* QuotaResourceAdaptor::do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) {
  charge_or_throw(*ledger_, job_, share_, bytes);
  try {
    return upstream_->allocate(bytes, alignment, stream);
  } catch (...) {
    ledger_->release(job_, bytes);
    throw;
  }
}

void QuotaResourceAdaptor::do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) {
  upstream_->deallocate(p, bytes, alignment, stream);
  ledger_->release(job_, bytes);
}

}  // namespace memtrain::memory
