#include "memory/ledger_agent.hpp"

#include <algorithm>
#include <exception>
#include <string>

namespace memtrain::memory {

LedgerAgent::LedgerAgent(std::shared_ptr<SharedLedger> ledger, JobId job, CachingAllocator& allocator,
                         std::chrono::milliseconds period)
    : ledger_(std::move(ledger)), job_(job), allocator_(allocator), period_(period) {
  // Requests posted before this process joined are not its to answer.
  answered_ = ledger_->release_sequence();
  publish_once();
  thread_ = std::thread([this] { run(); });
}

LedgerAgent::~LedgerAgent() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  state_ = static_cast<std::uint32_t>(JobState::finished);
  try {
    publish_once();
  } catch (const std::exception&) {
    // The ledger no longer knows this process (it left first): nothing to publish.
  }
}

void LedgerAgent::set_progress(std::int64_t step, double tokens_per_s, JobState state, std::size_t working_set_bytes) {
  step_ = step;
  tokens_per_s_ = tokens_per_s;
  working_set_ = working_set_bytes;
  set_state(state);
}

void LedgerAgent::set_state(JobState state) {
  state_ = static_cast<std::uint32_t>(state);
  wake_.notify_all();
}

void LedgerAgent::publish_once() {
  const std::uint64_t sequence = ledger_->release_sequence();
  std::size_t released = 0;
  const bool answer = sequence > answered_;
  if (answer) {
    const JobId asker = ledger_->release_asker();
    const bool mine = asker.slot == job_.slot && asker.generation == job_.generation && asker.member == job_.member;
    if (!mine) {
      const std::size_t goal = releasable(allocator_.stats());
      released = goal > 0 ? allocator_.release_cached(goal) : 0;
      if (released > 0) ++releases_;
    }
    answered_ = sequence;
  }
  const MemoryStats s = allocator_.stats();
  MemberFigures f;
  f.allocated_bytes = static_cast<std::size_t>(s.allocated_bytes.current);
  f.reserved_bytes = static_cast<std::size_t>(s.reserved_bytes.current);
  f.peak_reserved_bytes = static_cast<std::size_t>(s.reserved_bytes.peak);
  f.releasable_bytes = releasable(s);
  f.fragmentation = s.fragmentation;
  f.step = step_;
  f.tokens_per_s = tokens_per_s_;
  f.state = static_cast<JobState>(state_.load());
  f.num_ooms = s.num_ooms;
  f.policy = std::string(allocator_.policy_name());
  // Published before answering: the asker's last look must see the emptied cache.
  ledger_->publish(job_, f);
  if (answer) ledger_->answer_release(job_, sequence, released);
}

std::size_t LedgerAgent::releasable(const MemoryStats& s) const {
  const auto clamp = [](std::int64_t v) { return v > 0 ? static_cast<std::size_t>(v) : std::size_t{0}; };
  const std::size_t reserved = clamp(s.reserved_bytes.current);
  const std::size_t free_whole =
      clamp(s.reserved_bytes.current - s.allocated_bytes.current - s.inactive_split_bytes.current);
  const std::size_t keep = std::max(clamp(s.allocated_bytes.current), working_set_.load());
  return std::min(free_whole, reserved - std::min(reserved, keep));
}

void LedgerAgent::run() {
  std::unique_lock lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, period_);
    if (stop_) break;
    lock.unlock();
    try {
      publish_once();
    } catch (const std::exception&) {
      // A ledger the process left, or a lock error: the figures are for display and the
      // asker's wait is bounded, so the agent keeps going rather than ending the job.
    }
    lock.lock();
  }
}

}  // namespace memtrain::memory
