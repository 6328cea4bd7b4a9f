#pragma once
// A per-device ledger of memory shares in POSIX shared memory, so that several jobs (processes
// on one host, or clients inside one process) can share a device without one job's growth
// taking memory that another job reserved.
#include <pthread.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <sys/types.h>
#include <vector>

namespace memtrain::memory {

// Limit value meaning "no limit other than the device's capacity".
inline constexpr std::size_t kNoLimit = SIZE_MAX;

// What a job asks for when it joins a ledger. Units: bytes.
struct JobShare {
  JobShare() = default;
  JobShare(std::string name_, std::size_t reservation_ = 0, std::size_t limit_ = kNoLimit, std::string key_ = {})
      : name(std::move(name_)), reservation(reservation_), limit(limit_), key(std::move(key_)) {}

  std::string name;              // for messages; truncated to 31 bytes in the ledger
  std::size_t reservation = 0;   // guaranteed to this job: no other job can take it
  std::size_t limit = kNoLimit;  // the job is never charged past this (must be >= reservation)
  // What makes two processes one job (Note [A job is its run directory]): the absolute run
  // directory of a training job. Processes that join with the same key share one entry, its
  // reservation and its limit; an empty key makes the process a job of its own. At most
  // kMaxKeyBytes - 1 bytes are kept; longer keys are told apart by their last bytes.
  std::string key;
  // How long a charge refused for lack of capacity waits for other processes to release cached
  // memory (Note [Cross-job release]); 0 = it never asks. Not stored in the ledger.
  std::chrono::milliseconds release_wait{0};
};

// Identifies one process's place in the ledger: its job's slot, the slot's generation (which
// detects a slot that was reclaimed and reused) and the process's member index in the job.
struct JobId {
  std::uint32_t slot = 0;
  std::uint64_t generation = 0;
  std::uint32_t member = 0;
};

// What a job is doing, as `memtrain top` shows it.
enum class JobState : std::uint32_t { starting, training, evaluating, checkpointing, waiting, finished };
// "starting", "training", ...
const char* job_state_name(JobState state);

// A process's allocator figures, published by the process (LedgerAgent) for the live view and
// for cross-job release. Bytes, except where said.
struct MemberFigures {
  std::size_t allocated_bytes = 0;
  std::size_t reserved_bytes = 0;
  std::size_t peak_reserved_bytes = 0;
  std::size_t releasable_bytes = 0;  // cached segments with nothing allocated in them
  double fragmentation = 0.0;        // memory::MemoryStats::fragmentation
  std::int64_t step = 0;             // optimizer steps done
  double tokens_per_s = 0.0;
  JobState state = JobState::starting;
  std::int64_t num_ooms = 0;
  std::string policy;  // truncated to 23 bytes
};

// One process of a job (a copy).
struct LedgerMember {
  pid_t pid = 0;
  std::size_t in_use_bytes = 0;  // charged to the job by this process
  MemberFigures figures;
  std::uint64_t answered_release = 0;  // the last release request it answered
};

// One job as the ledger sees it (a copy, taken under the ledger's lock). in_use_bytes is the
// sum over its members.
struct LedgerEntry {
  std::string name;
  // Admission by plan (Note [Admission by plan]): whether the job waits in the queue, and what
  // it asked for. A job that joined without admission has admission_bytes 0.
  bool waiting = false;
  int priority = 0;
  std::size_t admission_bytes = 0;  // its need, bytes
  std::size_t floor_bytes = 0;      // its need at its elastic floor (= admission_bytes if not elastic)
  std::size_t target_bytes = 0;     // what the pool asks it to shrink to (0: nothing asked)
  bool preempt_requested = false;
  std::string key;
  pid_t pid = 0;  // the first live member's
  std::size_t reservation = 0;
  std::size_t limit = kNoLimit;
  std::size_t in_use_bytes = 0;
  std::uint64_t releases = 0;        // times its members released cached memory for another job
  std::uint64_t released_bytes = 0;  // bytes they released then
  std::vector<LedgerMember> members;
};

struct LedgerSnapshot {
  std::size_t capacity_bytes = 0;
  std::size_t reserved_bytes = 0;   // sum of the reservations
  std::size_t committed_bytes = 0;  // sum over jobs of max(in use, reservation)
  std::vector<LedgerEntry> jobs;
};

// A job that asks to be admitted by plan (Note [Admission by plan]). Bytes.
struct AdmissionRequest {
  std::string name;
  std::string key;                 // the job's key (JobShare::key); must not be empty
  int priority = 0;                // higher is admitted first and may shrink or preempt lower
  std::size_t need_bytes = 0;      // the job's planned peak reserved bytes
  std::size_t floor_bytes = 0;     // its need at its elastic floor; need_bytes when not elastic
  bool elastic = false;            // may be asked to shrink to floor_bytes
  bool preemptible = false;        // may be asked to checkpoint and give all its memory back
  std::chrono::seconds aging{60};  // one priority level gained per this much waiting; 0 = none
  // How long a job asked to make room may take to reach a step boundary before it is passed
  // over as silent (Note [A silent job is passed over]).
  std::chrono::milliseconds answer_timeout{10000};
};

// What a waiting job learns from poll_admission.
struct AdmissionStatus {
  bool admitted = false;
  std::size_t granted_bytes = 0;  // its reservation once admitted (at least its floor)
  std::size_t jobs_ahead = 0;     // waiting jobs before it in the queue's order
  std::size_t free_bytes = 0;     // capacity less what all jobs hold
  bool asked_others = false;      // it is the head and asked lower-priority jobs to shrink or stop
  // Jobs asked to make room that have not reached a step boundary within the answer timeout,
  // as "'name' (pid N)": passed over (Note [A silent job is passed over]).
  std::vector<std::string> silent;
};

// What the pool asks of an admitted job at its next step boundary (pool_request).
struct PoolRequest {
  std::size_t target_bytes = 0;       // shrink to at most this reservation (0: no request)
  bool preempt = false;               // checkpoint, give everything back and wait again
  std::size_t waiting_jobs = 0;       // jobs in the queue
  std::size_t free_bytes = 0;         // capacity less what all jobs hold
  std::size_t reservation_bytes = 0;  // the job's reservation now
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
// Note [A job is its run directory]
// A job is one training job, not one process: its MPI ranks on a host share one entry, whose
// reservation and limit are the job's (the sum of what its ranks hold), and a dead rank's
// charge returns with it. The job is named by its run directory (JobShare::key), not by its
// config: two runs of one config are two jobs, and a relaunch of a run is the same job. The
// first member to join sets the reservation and limit; a later member with other figures is
// refused (the ranks of one job read one config, so this means two jobs share a directory).
//
// Note [Cross-job release]
// A caching allocator keeps freed segments for reuse; on a device shared by several jobs,
// those cached bytes may be exactly what another job lacks. Each process publishes how many
// of its reserved bytes it could give back (MemberFigures::releasable_bytes). A job whose
// charge is refused for lack of capacity while others hold releasable bytes posts a release
// request (a sequence number in the ledger); every other process's LedgerAgent sees it within
// its poll period, empties its allocator's cache (freed segments return through its quota
// adaptor, lowering its charge) and records that it answered. The asker retries its charge
// until it succeeds, or every process that held releasable bytes has answered and it still
// does not fit, or its wait bound passes (a stopped or hung process never answers): then it
// fails with OutOfMemory as before, naming the processes that did not answer. Nobody waits
// for memory that is in use, only for cached memory, so the wait is short.
//
// Note [Admission by plan]
// A job with memory.admission: wait knows its need before it allocates anything (its dry-run
// peak reserved bytes, the figure `memtrain plan` prints) and enters the ledger as a waiting
// entry that holds nothing. The queue's order is the effective priority (memory.priority, plus
// one level for every memory.priority_aging seconds waited, so a low-priority job cannot wait
// forever behind a stream of higher ones), then arrival. Each waiting job polls:
//  - the head starts when its need fits in what is free; its reservation becomes its need;
//  - otherwise, if lower-priority admitted jobs can make room, the head asks them: elastic ones
//    to shrink towards their floor (lowest priority first, the latest arrival first), and if
//    that is not enough, preemptible ones (those with checkpoints) to stop and wait; they act
//    at their next step boundary, and the head waits for the room;
//  - when nothing can make room and the head is elastic, it starts with what is free if that
//    is at least its floor (it grows later);
//  - a job further back starts before the ones ahead only when it fits, none ahead of it fits,
//    the head asked nobody to make room and the head has waited less than its aging period:
//    it takes memory the ones ahead could not use, but never starves the head.
// Note [A silent job is passed over]
// A job asked to shrink or stop acts at its next step boundary; one that is stopped (SIGSTOP)
// or hung never does, and memory it holds cannot be taken from it. So the head waits at most
// its answer timeout (memory.release_timeout) for each job it asked: a job that has not reached
// a step boundary by then is marked silent, named in the head's waiting message, and left out
// of every later request until it reaches a boundary again. With nothing else to ask, the head
// stops asking, so jobs behind it that fit start (backfill); the head itself waits until memory
// frees (a job ends, or the silent one resumes and is asked again). A waiting job that stops
// polling (Ctrl-Z on a queued job) is passed over the same way: after its own answer timeout it
// leaves the queue's order, and the jobs behind it move up, until it polls again.
// Priority for shrinking and preemption is the configured one, not the aged one: a job that
// aged past another must not preempt it and then be preempted back. The head asks with the
// highest configured priority among the waiting jobs, so that a head aged past a job of higher
// priority does not take that job's right to make room away (the room goes in queue order).
// An admitted job's reservation is its need; it may lower it at any time (a shrink) and raise
// it only while nobody waits (a grow), so the queue always sees the room it was promised.

// Thread-safe and process-safe. All sizes are bytes.
class SharedLedger {
 public:
  static constexpr std::uint32_t kMaxJobs = 64;
  static constexpr std::uint32_t kMaxMembers = 16;  // processes of one job on one host
  static constexpr std::size_t kMaxKeyBytes = 192;

  // Opens the ledger of `device` (shared memory object shm_name(device)), creating it with
  // `capacity_bytes` when it does not exist. Throws std::invalid_argument when the existing
  // ledger has another capacity or capacity_bytes is 0, std::runtime_error when the shared
  // memory cannot be created or mapped, or was never initialised (a creator that crashed;
  // the message says which file to remove).
  SharedLedger(std::string_view device, std::size_t capacity_bytes);
  // Opens the existing ledger of `device` with the capacity it has (for a reader such as
  // `memtrain top`). Throws std::runtime_error when there is none (the message says so) or
  // it cannot be mapped, std::invalid_argument when it has another layout version.
  static std::unique_ptr<SharedLedger> open_existing(std::string_view device);
  ~SharedLedger();
  SharedLedger(const SharedLedger&) = delete;
  SharedLedger& operator=(const SharedLedger&) = delete;

  // Whether `name` is a ledger name: 1 to `max_bytes` characters from [A-Za-z0-9._-] (so that
  // the shared memory object's name is the ledger's, unmangled). memory.ledger takes at most 64;
  // a GPU's ledger adds "-gpu-<uuid>" to it (gpu_ledger_name, runtime/train/model_memory.hpp).
  static bool valid_name(std::string_view name, std::size_t max_bytes = 64);
  // "/memtrain-ledger-<device>", with characters other than [A-Za-z0-9._-] replaced by '_'.
  static std::string shm_name(std::string_view device);
  // Removes the shared memory object of `device` (shm_unlink); processes that have it open
  // keep using it. Returns false when it did not exist.
  static bool remove(std::string_view device);

  // Adds the calling process to the job of share.key (Note [A job is its run directory]), or
  // a new job when none is live. Reclaims dead entries first. Throws std::invalid_argument
  // when limit < reservation or the job exists with another reservation or limit,
  // std::runtime_error when a new job's reservation does not fit in what the other jobs hold
  // (the message lists them), all kMaxJobs slots or the job's kMaxMembers are taken.
  JobId join(const JobShare& share);
  // Removes the process from its job, and the job when it was the last; what the process
  // still had charged returns to the device.
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
  // What `job` could be charged now: within its limit and what the other jobs leave.
  std::size_t available_bytes(JobId job);

  // Records this process's figures (Note [Cross-job release]; `memtrain top`).
  void publish(JobId job, const MemberFigures& figures);
  // Counts one OutOfMemory of this process's job (shown by `memtrain top`).
  void count_oom(JobId job);

  // Asks every other process to release its cached memory (Note [Cross-job release]). Returns
  // the request's sequence number.
  std::uint64_t request_release(JobId asker);
  // The latest request's number (0: none yet) and who asked; read without the lock, so a
  // LedgerAgent can poll it cheaply.
  std::uint64_t release_sequence() const;
  JobId release_asker();
  // Records that `job`'s process answered request `sequence`, having released `bytes`.
  void answer_release(JobId job, std::uint64_t sequence, std::size_t bytes);
  // Processes other than `asker` that published releasable bytes and have not answered
  // `sequence` yet, as "'name' (pid N)" strings; empty when all have.
  std::vector<std::string> unanswered(JobId asker, std::uint64_t sequence);
  std::size_t capacity_bytes() const;
  const std::string& device() const { return device_; }

  // Admission by plan (Note [Admission by plan]). enqueue adds the calling process as the job's
  // ticket (a member holding nothing) in the queue; throws std::invalid_argument for an empty
  // key, a floor above the need, or a key already in the ledger, std::runtime_error when the
  // ledger is full. poll_admission decides, under the lock, whether the ticket's job starts now,
  // and when it heads the queue asks lower-priority jobs to shrink or be preempted.
  JobId enqueue(const AdmissionRequest& request);
  AdmissionStatus poll_admission(JobId ticket);
  // A preempted job goes back to the queue with its arrival time kept: reservation 0, waiting,
  // its ticket showing `step` (the steps it has done, which `memtrain top` shows while it waits).
  void requeue(JobId ticket, std::int64_t step = 0);
  // The number of times the job of `key` was admitted (0 while it first waits): the other ranks
  // of a job wait for it to change. Throws std::runtime_error when no live job has the key.
  std::uint64_t admissions_of(const std::string& key);
  // Also records that the job reached a step boundary (it is not silent).
  PoolRequest pool_request(JobId job);
  // Sets the job's reservation: a decrease always succeeds (and clears the shrink request), an
  // increase up to what the job holds in use always (it takes nothing), any other increase only
  // while nobody waits and it fits beside what the others hold. Returns whether it was set.
  bool set_reservation(JobId job, std::size_t bytes);

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
  SharedLedger(std::string_view device, std::size_t capacity_bytes, bool create);
  void lock();
  void unlock();
  std::size_t reclaim_dead_locked();
  std::size_t committed_locked() const;
  bool ask_for_room_locked(const Slot& head, std::int32_t priority, std::size_t deficit);
  void clear_requests_locked();
  Slot& find_locked(JobId job, const char* what);

  std::string device_;
  std::string shm_name_;
  Layout* layout_ = nullptr;
  std::uint64_t recovered_owner_deaths_ = 0;
};

}  // namespace memtrain::memory
