#pragma once
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

#include "memory/quota_resource_adaptor.hpp"
#include "memory/shared_ledger.hpp"
#include "memory/virtual_memory_resource.hpp"

namespace memtrain::memory {

// The quota adaptor for a virtual-memory upstream, so vmm_stitch and expandable segments run
// under quotas too. Only physical memory counts (virtual_memory_resource.hpp: reservations of
// address space are free), so create_physical charges the job's share in the SharedLedger and
// release_physical returns it; reserve, map and unmap pass straight through. A refused charge
// throws memtrain::OutOfMemory without asking the upstream (quota_refusal_message).
//
// Joins the ledger on construction, leaves on destruction. Thread-safe when the upstream is.
class QuotaVirtualMemoryResource final : public VirtualMemoryResource {
 public:
  // Throws what SharedLedger::join throws.
  QuotaVirtualMemoryResource(std::shared_ptr<VirtualMemoryResource> upstream, std::shared_ptr<SharedLedger> ledger,
                             JobShare share);
  ~QuotaVirtualMemoryResource() override;
  QuotaVirtualMemoryResource(const QuotaVirtualMemoryResource&) = delete;
  QuotaVirtualMemoryResource& operator=(const QuotaVirtualMemoryResource&) = delete;

  std::size_t capacity_bytes() const override;
  // What the ledger leaves this job now (SharedLedger::available_bytes).
  std::size_t available_bytes() const override;
  std::string name() const override;
  bool backs_memory() const override { return upstream_->backs_memory(); }
  std::size_t granularity() const override { return upstream_->granularity(); }

  VirtualRange reserve(std::size_t bytes) override { return upstream_->reserve(bytes); }
  void release(const VirtualRange& range) override { upstream_->release(range); }
  PhysicalHandle create_physical(std::size_t bytes) override;
  void release_physical(PhysicalHandle handle) override;
  void map(std::uintptr_t address, std::size_t bytes, PhysicalHandle handle, std::size_t offset) override {
    upstream_->map(address, bytes, handle, offset);
  }
  void unmap(std::uintptr_t address, std::size_t bytes) override { upstream_->unmap(address, bytes); }

  JobId job() const { return job_; }
  const std::shared_ptr<SharedLedger>& ledger() const { return ledger_; }
  std::size_t charged_bytes() const;

 private:
  std::shared_ptr<VirtualMemoryResource> upstream_;
  std::shared_ptr<SharedLedger> ledger_;
  JobShare share_;
  JobId job_;
  std::mutex mutex_;
  std::unordered_map<PhysicalHandle, std::size_t> chunk_bytes_;  // what each live chunk charged
};

}  // namespace memtrain::memory
