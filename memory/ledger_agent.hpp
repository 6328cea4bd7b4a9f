#pragma once
// A process's voice in its shared ledger: it publishes the allocator's figures for the live view
// (`memtrain top`) and answers other jobs' release requests (Note [Cross-job release] in
// shared_ledger.hpp).
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

#include "memory/caching_allocator.hpp"
#include "memory/shared_ledger.hpp"

namespace memtrain::memory {

// Runs one thread that, every `period` and when woken by set_progress: publishes `allocator`'s
// figures (allocated, reserved, peak reserved, releasable, fragmentation, num_ooms, policy)
// with the progress the owner reported, and when another process has posted a release request
// it has not answered, releases the releasable bytes (CachingAllocator::release_cached,
// thread-safe) and answers it. The allocator must outlive the agent. The destructor publishes
// state `finished` and joins the thread.
//
// Note [What a job may release]
// Releasable is what the job caches above its own working set: the free whole segments, but
// no more than reserved - max(allocated now, the working set the owner last reported). The
// working set is the most a training step had allocated at once (take_window_peak_allocated
// around the step). Releasing a training step's own memory would only move the failure: the
// job would need it back at its next step, find it taken by the asker, and fail in turn (the
// cascade of the elastic-pool issue). What an evaluation with a larger batch, a first step, or
// a step with longer sequences left cached above that is what other jobs may have.
//
// Note [Answering from a thread]
// The request is answered from this thread rather than at the owner's next step boundary: a
// step can take seconds (an evaluation, a checkpoint write) and the asker holds an allocation
// until it is answered; empty_cache only returns segments with nothing allocated in them, so
// it is safe beside a running step, which at worst has to reserve a segment again.
class LedgerAgent {
 public:
  LedgerAgent(std::shared_ptr<SharedLedger> ledger, JobId job, CachingAllocator& allocator,
              std::chrono::milliseconds period = std::chrono::milliseconds(20));
  ~LedgerAgent();
  LedgerAgent(const LedgerAgent&) = delete;
  LedgerAgent& operator=(const LedgerAgent&) = delete;

  // What the owner is doing: optimizer steps done, the last step's tokens/s, the state, and
  // the last training step's working set (bytes; Note [What a job may release]). Published
  // within the period.
  void set_progress(std::int64_t step, double tokens_per_s, JobState state, std::size_t working_set_bytes);
  void set_state(JobState state);

  // Requests this agent answered with a release, and the bytes it released (for tests).
  std::uint64_t releases() const { return releases_.load(); }

 private:
  void run();
  void publish_once();
  std::size_t releasable(const MemoryStats& s) const;

  std::shared_ptr<SharedLedger> ledger_;
  JobId job_;
  CachingAllocator& allocator_;
  std::chrono::milliseconds period_;
  std::atomic<std::int64_t> step_{0};
  std::atomic<double> tokens_per_s_{0.0};
  std::atomic<std::size_t> working_set_{0};
  std::atomic<std::uint32_t> state_{static_cast<std::uint32_t>(JobState::starting)};
  std::atomic<std::uint64_t> releases_{0};
  std::uint64_t answered_ = 0;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace memtrain::memory
