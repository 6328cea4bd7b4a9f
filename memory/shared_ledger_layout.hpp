#pragma once
// The shared segment of memory::SharedLedger (shared_ledger.hpp): its layout and the helpers that
// both of the ledger's source files use (shared_ledger.cpp: opening, jobs, charges, release;
// ledger_admission.cpp: the admission queue). Internal to memory/.
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <string>

#include "memory/shared_ledger.hpp"

namespace memtrain::memory {

// Slot::state.
inline constexpr std::uint32_t kFree = 0;
inline constexpr std::uint32_t kActive = 1;
// Slot::admission: how the job entered (Note [Admission by plan]).
inline constexpr std::uint32_t kNoAdmission = 0;  // joined directly (memory.admission: fail)
inline constexpr std::uint32_t kWaiting = 1;
inline constexpr std::uint32_t kAdmitted = 2;

// steady_clock is CLOCK_MONOTONIC: one clock for every process of the host.
inline std::uint64_t now_ns() {
  return static_cast<std::uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

// What a job holds of the device (Note [Shares: reservation, limit and the committed sum]).
inline std::size_t footprint(std::uint64_t in_use, std::uint64_t reservation) {
  return static_cast<std::size_t>(std::max(in_use, reservation));
}

struct Member {
  std::int32_t pid;  // 0: empty
  std::uint64_t start_time;
  std::uint64_t in_use;
  std::uint64_t allocated, reserved, peak_reserved, releasable;
  double fragmentation;
  std::int64_t step;
  double tokens_per_s;
  std::uint32_t state;
  std::int64_t num_ooms;
  std::uint64_t answered_release;
  char policy[24];
  std::uint32_t ticket;  // the job's place in the queue (Note [Admission by plan]); holds nothing
};

struct SharedLedger::Slot {
  std::atomic<std::uint32_t> state;  // kFree or kActive; written last when an entry is filled
  std::uint64_t generation;
  std::uint64_t reservation;
  std::uint64_t limit;
  std::uint64_t releases;
  std::uint64_t released_bytes;
  char name[32];
  char key[SharedLedger::kMaxKeyBytes];
  Member members[SharedLedger::kMaxMembers];
  // Note [Admission by plan].
  std::uint32_t admission;  // kNoAdmission, kWaiting, kAdmitted
  std::int32_t priority;
  std::uint32_t elastic;
  std::uint32_t preemptible;
  std::uint32_t preempt;  // asked to checkpoint and wait again
  std::uint32_t asked;    // as the queue's head, it asked others to make room
  std::uint64_t need;
  std::uint64_t floor;
  std::uint64_t target;  // asked to shrink to this reservation (0: not asked)
  std::uint64_t arrival_ns;
  std::uint64_t waiting_since_ns;
  std::uint64_t aging_s;
  std::uint64_t admissions;
  std::uint64_t asked_at_ns;  // when it was asked to make room (0: not asked)
  std::uint64_t silent;       // asked and no step boundary since, for longer than the asker's timeout
  std::uint64_t answer_timeout_ms;
  std::uint64_t polled_ns;  // a waiting job's last poll (Note [A silent job is passed over])

  std::uint64_t in_use() const {
    std::uint64_t total = 0;
    for (const Member& m : members) total += m.pid != 0 ? m.in_use : 0;
    return total;
  }
  bool has_members() const {
    return std::any_of(std::begin(members), std::end(members), [](const Member& m) { return m.pid != 0; });
  }
};

struct SharedLedger::Layout {
  std::atomic<std::uint32_t> magic;  // kMagic once the creator has initialised everything
  std::uint32_t version;
  std::uint64_t capacity;
  std::uint64_t next_generation;
  pthread_mutex_t mutex;
  std::atomic<std::uint64_t> release_sequence;  // Note [Cross-job release]
  std::uint32_t release_slot;
  std::uint32_t release_member;
  std::uint64_t release_generation;
  Slot slots[SharedLedger::kMaxJobs];
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "the ledger's state words must be lock-free to be shared between processes");

inline bool is_active(const SharedLedger::Slot& s) { return s.state.load(std::memory_order_relaxed) == kActive; }

// The key as stored: its last kMaxKeyBytes - 1 bytes (run directories differ at the end).
inline std::string stored_key(const std::string& key) {
  const std::size_t keep = SharedLedger::kMaxKeyBytes - 1;
  return key.size() <= keep ? key : key.substr(key.size() - keep);
}

// A new member for the calling process: its pid and start time, the rest zero.
void fill_member(Member& m);

inline void clear_admission(SharedLedger::Slot& s) {
  s.admission = kNoAdmission;
  s.priority = 0;
  s.elastic = s.preemptible = s.preempt = s.asked = 0;
  s.need = s.floor = s.target = s.arrival_ns = s.waiting_since_ns = s.aging_s = s.admissions = 0;
  s.asked_at_ns = s.silent = s.answer_timeout_ms = s.polled_ns = 0;
}

// Fills a free slot for a new job whose first member is the calling process (join, enqueue);
// the caller sets what else it needs and then publishes the slot by storing kActive in state.
inline void start_slot(SharedLedger::Slot& s, std::uint64_t generation, const std::string& name, const std::string& key,
                       std::uint64_t reservation, std::uint64_t limit) {
  s.generation = generation;
  s.reservation = reservation;
  s.limit = limit;
  s.releases = s.released_bytes = 0;
  std::memset(s.name, 0, sizeof s.name);
  std::memcpy(s.name, name.data(), std::min(name.size(), sizeof s.name - 1));
  std::memset(s.key, 0, sizeof s.key);
  std::memcpy(s.key, key.data(), std::min(key.size(), sizeof s.key - 1));
  for (Member& m : s.members) std::memset(&m, 0, sizeof m);
  fill_member(s.members[0]);
  clear_admission(s);
}

}  // namespace memtrain::memory
