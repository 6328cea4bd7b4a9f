#pragma once
// A per-device ledger of memory shares in POSIX shared memory, so that several jobs (processes
// on one host, or clients inside one process) can share a device without one job's growth
// taking memory that another job reserved.
#include <pthread.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace memtrain::memory {

// Limit value meaning "no limit other than the device's capacity".
inline constexpr std::size_t kNoLimit = SIZE_MAX;

// What a job asks for when it joins a ledger. Units: bytes.
struct JobShare {
  std::string name;              // for messages; truncated to 31 bytes in the ledger
  std::size_t reservation = 0;   // guaranteed to this job: no other job can take it
  std::size_t limit = kNoLimit;  // the job is never charged past this (must be >= reservation)
};

// Identifies a job's entry; the generation detects a slot that was reclaimed and reused.
struct JobId {
  std::uint32_t slot = 0;
  std::uint64_t generation = 0;
};

// One job as the ledger sees it (a copy, taken under the ledger's lock).
struct LedgerEntry {
  std::string name;
  pid_t pid = 0;
  std::size_t reservation = 0;
  std::size_t limit = kNoLimit;
  std::size_t in_use_bytes = 0;
};

struct LedgerSnapshot {
  std::size_t capacity_bytes = 0;
  std::size_t reserved_bytes = 0;   // sum of the reservations
  std::size_t committed_bytes = 0;  // sum over jobs of max(in use, reservation)
  std::vector<LedgerEntry> jobs;
};

// Why a charge was refused (ChargeResult::ok false).
enum class ChargeRefusal { none, over_limit, over_capacity };

struct ChargeResult {
  bool ok = true;
  ChargeRefusal refusal = ChargeRefusal::none;
  std::size_t in_use_bytes = 0;     // the job's usage after the call
  std::size_t available_bytes = 0;  // what the job could still be charged right now
};

// Note [Shares: reservation, limit and the committed sum]
// Each job j has a reservation r_j, a limit l_j and bytes in use u_j. What j holds of the
// device is max(u_j, r_j): its reservation, or its usage once it has outgrown it. The ledger
// keeps   sum_j max(u_j, r_j) <= capacity   at all times, and it follows that:
//  - the sum of the reservations never exceeds the capacity (join checks it against the
//    committed sum, so memory already used by another job cannot be promised either);
//  - a job growing within its reservation never fails: max(u_j, r_j) stays r_j, the sum does
//    not move;
//  - a job growing past its reservation takes only unreserved free capacity, so it can
//    never take what another job reserved, and it is refused (its own OutOfMemory) instead;
//  - u_j never exceeds l_j.
// Entries record the pid and the process start time; an entry whose process is gone (or
// whose pid now names a newer process) is reclaimed the next time a job joins, a charge is
// refused, or a snapshot is taken, so a crashed job's share returns to the device.
//
// Note [Robust process-shared mutex]
// The lock lives in the shared segment (PTHREAD_PROCESS_SHARED) and is robust: a process
// killed while holding it leaves it to the next locker with EOWNERDEAD. Every update writes a
// single counter, or fills an entry before publishing it with its state word, so the data is
// consistent at any instant; the new owner reclaims dead entries and marks the mutex
// consistent. The mutex is error-checking, so locking it twice from one thread throws
// instead of hanging.
//
// Thread-safe and process-safe. All sizes are bytes.
class SharedLedger {
 public:
  static constexpr std::uint32_t kMaxJobs = 64;

  // Opens the ledger of `device` (shared memory object shm_name(device)), creating it with
  // `capacity_bytes` when it does not exist. Throws std::invalid_argument when the existing
  // ledger has another capacity or capacity_bytes is 0, std::runtime_error when the shared
  // memory cannot be created or mapped, or was never initialised (a creator that crashed;
  // the message says which file to remove).
  SharedLedger(std::string_view device, std::size_t capacity_bytes);
  ~SharedLedger();
  SharedLedger(const SharedLedger&) = delete;
  SharedLedger& operator=(const SharedLedger&) = delete;

  // "/memtrain-ledger-<device>", with characters other than [A-Za-z0-9._-] replaced by '_'.
  static std::string shm_name(std::string_view device);
  // Removes the shared memory object of `device` (shm_unlink); processes that have it open
  // keep using it. Returns false when it did not exist.
  static bool remove(std::string_view device);

  // Adds a job owned by the calling process. Reclaims dead entries first. Throws
  // std::invalid_argument when limit < reservation, std::runtime_error when the reservation
  // does not fit in what the other jobs hold (the message lists them) or all kMaxJobs slots
  // are taken.
  JobId join(const JobShare& share);
  // Removes the job; what it still had charged returns to the device.
  void leave(JobId job);

  // Charges `bytes` to `job` if that keeps the job within its limit and the committed sum
  // within the capacity (Note [Shares: reservation, limit and the committed sum]); otherwise
  // charges nothing and says why. Throws std::logic_error for an unknown or reclaimed job.
  ChargeResult try_charge(JobId job, std::size_t bytes);
  // Returns `bytes` previously charged. Throws std::logic_error for an unknown job or more
  // bytes than the job has charged.
  void release(JobId job, std::size_t bytes);

  LedgerSnapshot snapshot();
  LedgerEntry entry(JobId job);
  std::size_t capacity_bytes() const;
  const std::string& device() const { return device_; }

  // Holds the ledger's lock until destroyed. For a caller that must keep other processes out
  // for a while (tests use it to die inside the critical section). Calling the ledger from
  // the same thread while a guard is alive throws std::logic_error.
  class LockGuard {
   public:
    explicit LockGuard(SharedLedger& ledger);
    ~LockGuard();
    LockGuard(const LockGuard&) = delete;
    LockGuard& operator=(const LockGuard&) = delete;

   private:
    SharedLedger& ledger_;
  };

  // Number of dead owners this process recovered the lock from (EOWNERDEAD); for tests.
  std::uint64_t recovered_owner_deaths() const { return recovered_owner_deaths_; }

  struct Layout;  // the shared segment (defined in the .cpp)
  struct Slot;    // one job's entry in it

 private:
  void lock();
  void unlock();
  std::size_t reclaim_dead_locked();
  Slot& find_locked(JobId job, const char* what);

  std::string device_;
  std::string shm_name_;
  Layout* layout_ = nullptr;
  std::uint64_t recovered_owner_deaths_ = 0;
};

}  // namespace memtrain::memory
