#pragma once
#include <cstddef>
#include <memory>
#include <string>

#include "memory/memory_resource.hpp"
#include "memory/shared_ledger.hpp"

namespace memtrain::memory {

// Charges every allocation to a job's share in a SharedLedger before asking the upstream, so
// that jobs sharing a device (processes, or clients in one process) stay within their limits
// and never take each other's reservations (Note [Shares: reservation, limit and the committed
// sum] in shared_ledger.hpp). Put it under a CachingAllocator: the allocator then sees a
// refused charge as the upstream running out, releases its cache, retries, and throws its own
// OutOfMemory to this job only.
//
// Charges exactly the bytes asked of the upstream (a caching allocator asks for whole segments).
// Joins the ledger on construction and leaves it on destruction (what is still charged returns
// to the device). Thread-safe when the upstream is.
class QuotaResourceAdaptor final : public MemoryResource {
 public:
  // Throws what SharedLedger::join throws: std::invalid_argument (limit below reservation),
  // std::runtime_error (the reservation does not fit).
  QuotaResourceAdaptor(std::shared_ptr<MemoryResource> upstream, std::shared_ptr<SharedLedger> ledger, JobShare share);
  ~QuotaResourceAdaptor() override;
  QuotaResourceAdaptor(const QuotaResourceAdaptor&) = delete;
  QuotaResourceAdaptor& operator=(const QuotaResourceAdaptor&) = delete;

  // The most this job can ever hold: min(limit, ledger capacity, upstream capacity if known).
  std::size_t capacity_bytes() const override;
  // What the ledger leaves this job now (SharedLedger::available_bytes).
  std::size_t available_bytes() const override;
  std::string name() const override;
  bool backs_memory() const override { return upstream_->backs_memory(); }

  const JobShare& share() const { return share_; }
  JobId job() const { return job_; }
  const std::shared_ptr<SharedLedger>& ledger() const { return ledger_; }
  // Bytes this job has charged now (from the ledger).
  std::size_t charged_bytes() const;

 private:
  // Throws memtrain::OutOfMemory, without calling the upstream, when the ledger refuses.
  void* do_allocate(std::size_t bytes, std::size_t alignment, StreamId stream) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t alignment, StreamId stream) override;

  std::shared_ptr<MemoryResource> upstream_;
  std::shared_ptr<SharedLedger> ledger_;
  JobShare share_;
  JobId job_;
};

// The one-line OutOfMemory message for a refused charge: the job, the request, its usage, and
// its limit or what the other jobs hold, with the next step. Shared by the quota adaptors.
std::string quota_refusal_message(SharedLedger& ledger, const JobShare& share, const ChargeResult& refused,
                                  std::size_t bytes);

}  // namespace memtrain::memory
