#include "memory/cross_job_release.hpp"

#include <algorithm>
#include <cstdint>
#include <thread>

#include "memory/out_of_memory.hpp"
#include "memory/quota_resource_adaptor.hpp"

namespace memtrain::memory {

ReleasedCharge charge_with_release(SharedLedger& ledger, JobId job, std::size_t bytes, std::chrono::milliseconds wait) {
  ReleasedCharge out;
  out.charge = ledger.try_charge(job, bytes);
  if (out.charge.ok || out.charge.refusal != ChargeRefusal::over_capacity || wait.count() <= 0) return out;
  // Nobody else caches anything: there is nothing to wait for.
  if (ledger.unanswered(job, UINT64_MAX).empty()) return out;
  out.asked = true;
  const std::uint64_t sequence = ledger.request_release(job);
  const auto deadline = std::chrono::steady_clock::now() + wait;
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
    out.charge = ledger.try_charge(job, bytes);
    if (out.charge.ok || out.charge.refusal != ChargeRefusal::over_capacity) return out;
    out.unanswered = ledger.unanswered(job, sequence);
    // Everyone answered: what they released is all there is. Charge once more, since the last
    // answer may have come after the charge above.
    if (out.unanswered.empty()) {
      out.charge = ledger.try_charge(job, bytes);
      return out;
    }
    if (std::chrono::steady_clock::now() >= deadline) return out;
  }
}

std::string release_outcome_text(const ReleasedCharge& result, std::chrono::milliseconds wait) {
  if (!result.asked) return {};
  if (result.unanswered.empty()) {
    return " The other jobs released their cached memory, and it was not enough.";
  }
  std::string who;
  for (const std::string& w : result.unanswered) who += (who.empty() ? "" : ", ") + w;
  return " Asked the other jobs to release their cached memory; " + who + " did not answer within " +
         std::to_string(wait.count()) + " ms (memory.release_timeout; a stopped or hung process).";
}

void charge_or_throw(SharedLedger& ledger, JobId job, const JobShare& share, std::size_t bytes) {
  const ReleasedCharge charge = charge_with_release(ledger, job, bytes, share.release_wait);
  if (charge.charge.ok) return;
  ledger.count_oom(job);
  throw OutOfMemory(
      quota_refusal_message(ledger, share, charge.charge, bytes) + release_outcome_text(charge, share.release_wait),
      bytes);
}

std::size_t quota_available_bytes(SharedLedger& ledger, JobId job, std::size_t device_available) {
  return std::min(ledger.available_bytes(job), device_available);
}

}  // namespace memtrain::memory
