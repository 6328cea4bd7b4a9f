#pragma once
// Charging through a shared ledger, with other processes' cached memory released first when
// that is what stands between a job and its request (Note [Cross-job release] in
// shared_ledger.hpp).
#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

#include "memory/shared_ledger.hpp"

namespace memtrain::memory {

// The outcome of charge_with_release: the last charge's result, and when it was refused after
// asking, who had not answered (empty when everyone answered, or nobody was asked).
struct ReleasedCharge {
  ChargeResult charge;
  bool asked = false;
  std::vector<std::string> unanswered;
};

// Charges `bytes` to `job`. When the charge is refused for lack of capacity (not for the job's
// own limit), `wait` > 0 and another process has published releasable bytes, posts a release
// request and retries every millisecond or so until the charge succeeds, every asked process
// has answered and it still does not fit, or `wait` has passed. Throws what
// SharedLedger::try_charge throws.
ReleasedCharge charge_with_release(SharedLedger& ledger, JobId job, std::size_t bytes, std::chrono::milliseconds wait);

// The sentence an OutOfMemory message adds after a refused charge that asked for a release:
// who did not answer within the wait, or that what they released was not enough.
std::string release_outcome_text(const ReleasedCharge& result, std::chrono::milliseconds wait);

// charge_with_release for a quota adaptor: on refusal counts the job's OutOfMemory in the
// ledger and throws memtrain::OutOfMemory with quota_refusal_message and the release outcome.
// Shared by QuotaResourceAdaptor and QuotaVirtualMemoryResource.
void charge_or_throw(SharedLedger& ledger, JobId job, const JobShare& share, std::size_t bytes);

// Note [The ledger and the device disagree]: processes that are not memtrain (a PyTorch job on
// the same GPU) take device memory without asking the ledger, so the ledger can promise bytes
// the device no longer has. The smaller figure wins: what the ledger leaves `job`, and no more
// than `device_available` (MemoryResource::available_bytes; cudaMemGetInfo on a GPU).
std::size_t quota_available_bytes(SharedLedger& ledger, JobId job, std::size_t device_available);

}  // namespace memtrain::memory
