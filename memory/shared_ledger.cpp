#include "memory/shared_ledger.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "memory/byte_size.hpp"
#include "memory/shared_ledger_layout.hpp"

namespace memtrain::memory {

namespace {

constexpr std::uint32_t kMagic = 0x4D4C4447;  // "MLDG"
// 2: jobs with members (Note [A job is its run directory]); 3: admission by plan.
constexpr std::uint32_t kVersion = 3;
constexpr auto kOpenTimeout = std::chrono::seconds(5);

std::string errno_text(int err) { return std::strerror(err); }

// Process start time in clock ticks since boot (/proc/<pid>/stat field 22), and whether the
// process is a zombie (field 3). Returns false when /proc has no such process.
bool read_proc_stat(pid_t pid, std::uint64_t& start_time, bool& zombie) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!in || !std::getline(in, line)) return false;
  // The command name (field 2) is in parentheses and may contain spaces: parse after the last ')'.
  auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  rest >> field;  // field 3: state
  zombie = field == "Z" || field == "X";
  for (int i = 4; i <= 22 && rest >> field; ++i) {
    if (i == 22) {
      start_time = std::strtoull(field.c_str(), nullptr, 10);
      return true;
    }
  }
  return false;
}

std::uint64_t start_time_of(pid_t pid) {
  std::uint64_t t = 0;
  bool zombie = false;
  return read_proc_stat(pid, t, zombie) ? t : 0;
}

bool process_alive(pid_t pid, std::uint64_t start_time) {
  if (::kill(pid, 0) != 0 && errno == ESRCH) return false;
  std::uint64_t now_start = 0;
  bool zombie = false;
  if (!read_proc_stat(pid, now_start, zombie)) return true;  // no /proc: trust kill()
  if (zombie) return false;
  // A different start time means the pid was reused by a newer process.
  return start_time == 0 || now_start == start_time;
}

}  // namespace

bool SharedLedger::valid_name(std::string_view name, std::size_t max_bytes) {
  return !name.empty() && name.size() <= max_bytes &&
         name.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") ==
             std::string_view::npos;
}

std::string SharedLedger::shm_name(std::string_view device) {
  std::string name = "/memtrain-ledger-";
  for (char c : device) {
    bool ok =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
    name += ok ? c : '_';
  }
  return name;
}

bool SharedLedger::remove(std::string_view device) { return ::shm_unlink(shm_name(device).c_str()) == 0; }

SharedLedger::SharedLedger(std::string_view device, std::size_t capacity_bytes)
    : SharedLedger(device, capacity_bytes, /*create=*/true) {}

std::unique_ptr<SharedLedger> SharedLedger::open_existing(std::string_view device) {
  return std::unique_ptr<SharedLedger>(new SharedLedger(device, 0, /*create=*/false));
}

SharedLedger::SharedLedger(std::string_view device, std::size_t capacity_bytes, bool create)
    : device_(device), shm_name_(shm_name(device)) {
  if (create && capacity_bytes == 0) {
    throw std::invalid_argument("shared ledger for device '" + device_ + "': capacity is 0 bytes; expected > 0");
  }
  const auto deadline = std::chrono::steady_clock::now() + kOpenTimeout;
  int fd = -1;
  bool creator = false;
  if (!create) {
    fd = ::shm_open(shm_name_.c_str(), O_RDWR, 0600);
    if (fd < 0 && errno == ENOENT) {
      throw std::runtime_error("no ledger '" + device_ + "' on this host (/dev/shm" + shm_name_ +
                               "): no job with memory.capacity, memory.limit or memory.reservation has run on it");
    }
    if (fd < 0) throw std::runtime_error("shared ledger: shm_open(" + shm_name_ + ") failed: " + errno_text(errno));
  }
  while (fd < 0) {
    fd = ::shm_open(shm_name_.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      creator = true;
      break;
    }
    if (errno != EEXIST) {
      throw std::runtime_error("shared ledger: shm_open(" + shm_name_ + ") failed: " + errno_text(errno));
    }
    fd = ::shm_open(shm_name_.c_str(), O_RDWR, 0600);
    if (fd < 0 && errno != ENOENT) {  // ENOENT: removed between the two calls; try again
      throw std::runtime_error("shared ledger: shm_open(" + shm_name_ + ") failed: " + errno_text(errno));
    }
  }
  if (creator && ::ftruncate(fd, sizeof(Layout)) != 0) {
    int err = errno;
    ::close(fd);
    ::shm_unlink(shm_name_.c_str());
    throw std::runtime_error("shared ledger: ftruncate(" + shm_name_ + ") failed: " + errno_text(err));
  }
  // An opener may see the object before the creator has sized it.
  struct stat st {};
  while (!creator) {
    if (::fstat(fd, &st) != 0) {
      int err = errno;
      ::close(fd);
      throw std::runtime_error("shared ledger: fstat(" + shm_name_ + ") failed: " + errno_text(err));
    }
    if (static_cast<std::size_t>(st.st_size) >= sizeof(Layout)) break;
    // A ledger of another layout (an older memtrain) has its own size: say so at once rather
    // than wait for a creator that is not coming.
    if (st.st_size >= 8) {
      std::uint32_t head[2] = {0, 0};
      if (::pread(fd, head, sizeof head, 0) == static_cast<ssize_t>(sizeof head) && head[0] == kMagic &&
          head[1] != kVersion) {
        ::close(fd);
        throw std::runtime_error("shared ledger /dev/shm" + shm_name_ +
                                 " was created by another memtrain version (ledger layout " + std::to_string(head[1]) +
                                 ", this one uses " + std::to_string(kVersion) +
                                 "); once no job of that version runs on it, remove it (rm /dev/shm" + shm_name_ + ")");
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      ::close(fd);
      throw std::runtime_error("shared ledger " + shm_name_ + " has size " + std::to_string(st.st_size) +
                               " bytes, expected " + std::to_string(sizeof(Layout)) +
                               " (a creator that crashed?); remove /dev/shm" + shm_name_);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void* p = ::mmap(nullptr, sizeof(Layout), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int map_err = errno;
  ::close(fd);
  if (p == MAP_FAILED) {
    if (creator) ::shm_unlink(shm_name_.c_str());
    throw std::runtime_error("shared ledger: mmap(" + shm_name_ + ") failed: " + errno_text(map_err));
  }
  layout_ = static_cast<Layout*>(p);

  if (creator) {
    // The object is zero-filled by ftruncate, which is a valid kFree state for every slot.
    layout_->version = kVersion;
    layout_->capacity = capacity_bytes;
    layout_->next_generation = 1;
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
    int rc = pthread_mutex_init(&layout_->mutex, &attr);
    pthread_mutexattr_destroy(&attr);
    if (rc != 0) {
      ::munmap(layout_, sizeof(Layout));
      ::shm_unlink(shm_name_.c_str());
      throw std::runtime_error("shared ledger: pthread_mutex_init failed: " + errno_text(rc));
    }
    layout_->magic.store(kMagic, std::memory_order_release);
  } else {
    while (layout_->magic.load(std::memory_order_acquire) != kMagic) {
      if (std::chrono::steady_clock::now() > deadline) {
        ::munmap(layout_, sizeof(Layout));
        throw std::runtime_error("shared ledger " + shm_name_ +
                                 " was never initialised (its creator crashed?); remove /dev/shm" + shm_name_);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (!create && layout_->version == kVersion) return;  // a reader takes the ledger's capacity
    if (layout_->version == kVersion && layout_->capacity != capacity_bytes) {
      // The ledger outlives its jobs (/dev/shm): with none left (the dead reclaimed), the
      // capacity is the next job's to set, not the last one's to keep.
      LockGuard guard(*this);
      reclaim_dead_locked();
      const bool empty = std::none_of(std::begin(layout_->slots), std::end(layout_->slots),
                                      [](const Slot& s) { return s.state.load(std::memory_order_relaxed) == kActive; });
      if (empty) layout_->capacity = capacity_bytes;
    }
    if (layout_->version != kVersion || layout_->capacity != capacity_bytes) {
      std::string msg = "shared ledger for device '" + device_ + "' exists with capacity " +
                        std::to_string(layout_->capacity) + " bytes (version " + std::to_string(layout_->version) +
                        "); asked for " + std::to_string(capacity_bytes) + " bytes (version " +
                        std::to_string(kVersion) + "): every job on a device must give the same capacity";
      ::munmap(layout_, sizeof(Layout));
      throw std::invalid_argument(msg);
    }
  }
}

SharedLedger::~SharedLedger() {
  if (layout_) ::munmap(layout_, sizeof(Layout));
}

std::size_t SharedLedger::capacity_bytes() const { return static_cast<std::size_t>(layout_->capacity); }

void SharedLedger::lock() {
  int rc = pthread_mutex_lock(&layout_->mutex);
  if (rc == EOWNERDEAD) {
    // Note [Robust process-shared mutex]: the data is consistent; the dead owner's entries go.
    ++recovered_owner_deaths_;
    reclaim_dead_locked();
    pthread_mutex_consistent(&layout_->mutex);
    return;
  }
  if (rc == EDEADLK) {
    throw std::logic_error("shared ledger " + shm_name_ +
                           ": this thread already holds its lock (a LockGuard is alive)");
  }
  if (rc != 0) {
    throw std::runtime_error("shared ledger " + shm_name_ + ": lock failed: " + errno_text(rc));
  }
}

void SharedLedger::unlock() { pthread_mutex_unlock(&layout_->mutex); }

SharedLedger::LockGuard::LockGuard(SharedLedger& ledger) : ledger_(ledger) { ledger_.lock(); }
SharedLedger::LockGuard::~LockGuard() { ledger_.unlock(); }

std::size_t SharedLedger::reclaim_dead_locked() {
  std::size_t reclaimed = 0;
  for (Slot& s : layout_->slots) {
    if (s.state.load(std::memory_order_relaxed) != kActive) continue;
    for (Member& m : s.members) {
      if (m.pid != 0 && !process_alive(static_cast<pid_t>(m.pid), m.start_time)) {
        m.pid = 0;  // its charge goes with it (Note [A job is its run directory])
        m.in_use = 0;
        ++reclaimed;
      }
    }
    if (!s.has_members()) s.state.store(kFree, std::memory_order_relaxed);
  }
  return reclaimed;
}

SharedLedger::Slot& SharedLedger::find_locked(JobId job, const char* what) {
  if (job.slot < kMaxJobs && job.member < kMaxMembers) {
    Slot& s = layout_->slots[job.slot];
    if (s.state.load(std::memory_order_relaxed) == kActive && s.generation == job.generation &&
        s.members[job.member].pid != 0) {
      return s;
    }
  }
  throw std::logic_error(std::string("shared ledger ") + shm_name_ + ": " + what + " for job slot " +
                         std::to_string(job.slot) + " generation " + std::to_string(job.generation) + " member " +
                         std::to_string(job.member) +
                         " that is not in the ledger (it left, or its process was declared dead)");
}

void fill_member(Member& m) {
  std::memset(&m, 0, sizeof m);
  m.pid = static_cast<std::int32_t>(::getpid());
  m.start_time = start_time_of(::getpid());
}

JobId SharedLedger::join(const JobShare& share) {
  if (share.limit < share.reservation) {
    throw std::invalid_argument("job '" + share.name + "' on device '" + device_ + "': limit " +
                                std::to_string(share.limit) + " bytes is below its reservation " +
                                std::to_string(share.reservation) + " bytes; expected limit >= reservation");
  }
  const std::string key = stored_key(share.key);
  LockGuard guard(*this);
  reclaim_dead_locked();
  if (!key.empty()) {
    for (Slot& s : layout_->slots) {
      if (s.state.load(std::memory_order_relaxed) != kActive || key != s.key) continue;
      // An admitted job's reservation is the admission's (its need, shrunk or grown since).
      if (s.admission == kNoAdmission && (s.reservation != share.reservation || s.limit != share.limit)) {
        throw std::invalid_argument("job '" + share.name + "' (" + share.key + ") on device '" + device_ +
                                    "' joins with reservation " + std::to_string(share.reservation) + " and limit " +
                                    std::to_string(share.limit) + " bytes, but its other processes joined with " +
                                    std::to_string(s.reservation) + " and " + std::to_string(s.limit) +
                                    "; expected the same memory.reservation and memory.limit on every rank");
      }
      for (std::uint32_t i = 0; i < kMaxMembers; ++i) {
        if (s.members[i].pid != 0) continue;
        fill_member(s.members[i]);
        return JobId{static_cast<std::uint32_t>(&s - layout_->slots), s.generation, i};
      }
      throw std::runtime_error("job '" + share.name + "' on device '" + device_ + "' already has " +
                               std::to_string(kMaxMembers) + " processes on this host; expected at most that many");
    }
  }
  std::size_t committed = 0;
  Slot* free_slot = nullptr;
  for (Slot& s : layout_->slots) {
    if (s.state.load(std::memory_order_relaxed) == kActive) {
      committed += footprint(s.in_use(), s.reservation);
    } else if (!free_slot) {
      free_slot = &s;
    }
  }
  const std::size_t capacity = layout_->capacity;
  if (share.reservation > capacity - std::min(committed, capacity)) {
    std::string msg = "cannot reserve " + format_byte_size(share.reservation) + " for job '" + share.name +
                      "' on device '" + device_ + "': capacity " + format_byte_size(capacity) + ", " +
                      format_byte_size(committed) + " reserved or in use by other jobs:";
    for (const Slot& s : layout_->slots) {
      if (s.state.load(std::memory_order_relaxed) != kActive) continue;
      msg += " '" + std::string(s.name) + "' (pid " + std::to_string(s.members[0].pid) + ") reserves " +
             format_byte_size(s.reservation) + ", uses " + format_byte_size(s.in_use()) + ";";
    }
    msg += " expected a reservation of at most " + format_byte_size(capacity - std::min(committed, capacity)) +
           " (the capacity less what the others reserve or use)";
    throw std::runtime_error(msg);
  }
  if (!free_slot) {
    throw std::runtime_error("shared ledger for device '" + device_ + "' is full: " + std::to_string(kMaxJobs) +
                             " jobs are registered");
  }
  Slot& s = *free_slot;
  start_slot(s, layout_->next_generation++, share.name, key, share.reservation, share.limit);
  s.state.store(kActive, std::memory_order_release);  // published last: a crash before leaves it free
  return JobId{static_cast<std::uint32_t>(&s - layout_->slots), s.generation, 0};
}

void SharedLedger::leave(JobId job) {
  LockGuard guard(*this);
  Slot& s = find_locked(job, "leave");
  s.members[job.member].pid = 0;
  s.members[job.member].in_use = 0;
  if (!s.has_members()) s.state.store(kFree, std::memory_order_release);
}

ChargeResult SharedLedger::try_charge(JobId job, std::size_t bytes) {
  LockGuard guard(*this);
  Slot* me = &find_locked(job, "charge");
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::size_t others = 0;
    for (const Slot& s : layout_->slots) {
      if (&s == me || s.state.load(std::memory_order_relaxed) != kActive) continue;
      others += footprint(s.in_use(), s.reservation);
    }
    const std::size_t in_use = me->in_use();
    const std::size_t capacity = layout_->capacity;
    const std::size_t room_on_device = capacity - std::min(others, capacity);  // max footprint for me
    const std::size_t limit = std::min<std::size_t>(me->limit, room_on_device);
    const std::size_t available = limit - std::min<std::size_t>(in_use, limit);
    if (bytes <= available) {
      me->members[job.member].in_use += bytes;
      return ChargeResult{true, ChargeRefusal::none, in_use + bytes, available - bytes};
    }
    // Before refusing, reclaim the shares of processes that are gone, then look again.
    if (attempt == 0 && reclaim_dead_locked() > 0) {
      me = &find_locked(job, "charge");
      continue;
    }
    const bool over_limit = in_use > me->limit || bytes > me->limit - in_use;
    return ChargeResult{false, over_limit ? ChargeRefusal::over_limit : ChargeRefusal::over_capacity, in_use,
                        available};
  }
  return ChargeResult{false, ChargeRefusal::over_capacity, static_cast<std::size_t>(me->in_use()), 0};
}

std::size_t SharedLedger::available_bytes(JobId job) {
  LockGuard guard(*this);
  const Slot& me = find_locked(job, "available_bytes");
  std::size_t others = 0;
  for (const Slot& s : layout_->slots) {
    if (&s == &me || s.state.load(std::memory_order_relaxed) != kActive) continue;
    others += footprint(s.in_use(), s.reservation);
  }
  const std::size_t capacity = layout_->capacity;
  const std::size_t limit = std::min<std::size_t>(me.limit, capacity - std::min(others, capacity));
  return limit - std::min<std::size_t>(me.in_use(), limit);
}

void SharedLedger::release(JobId job, std::size_t bytes) {
  LockGuard guard(*this);
  Slot& s = find_locked(job, "release");
  Member& me = s.members[job.member];
  if (bytes > me.in_use) {
    throw std::logic_error("shared ledger " + shm_name_ + ": job '" + std::string(s.name) + "' releases " +
                           std::to_string(bytes) + " bytes but has only " + std::to_string(me.in_use) + " charged");
  }
  me.in_use -= bytes;
}

namespace {

LedgerEntry entry_of(const SharedLedger::Slot& s);

}  // namespace

LedgerSnapshot SharedLedger::snapshot() {
  LockGuard guard(*this);
  reclaim_dead_locked();
  LedgerSnapshot snap;
  snap.capacity_bytes = layout_->capacity;
  for (const Slot& s : layout_->slots) {
    if (s.state.load(std::memory_order_relaxed) != kActive) continue;
    snap.reserved_bytes += s.reservation;
    snap.committed_bytes += footprint(s.in_use(), s.reservation);
    snap.jobs.push_back(entry_of(s));
  }
  return snap;
}

LedgerEntry SharedLedger::entry(JobId job) {
  LockGuard guard(*this);
  return entry_of(find_locked(job, "entry"));
}

void SharedLedger::publish(JobId job, const MemberFigures& f) {
  LockGuard guard(*this);
  Member& m = find_locked(job, "publish").members[job.member];
  m.allocated = f.allocated_bytes;
  m.reserved = f.reserved_bytes;
  m.peak_reserved = f.peak_reserved_bytes;
  m.releasable = f.releasable_bytes;
  m.fragmentation = f.fragmentation;
  m.step = f.step;
  m.tokens_per_s = f.tokens_per_s;
  m.state = static_cast<std::uint32_t>(f.state);
  m.num_ooms = std::max(m.num_ooms, f.num_ooms);
  std::memset(m.policy, 0, sizeof m.policy);
  std::memcpy(m.policy, f.policy.data(), std::min(f.policy.size(), sizeof m.policy - 1));
}

void SharedLedger::count_oom(JobId job) {
  LockGuard guard(*this);
  ++find_locked(job, "count_oom").members[job.member].num_ooms;
}

std::uint64_t SharedLedger::request_release(JobId asker) {
  LockGuard guard(*this);
  find_locked(asker, "request_release");
  layout_->release_slot = asker.slot;
  layout_->release_member = asker.member;
  layout_->release_generation = asker.generation;
  return layout_->release_sequence.fetch_add(1, std::memory_order_acq_rel) + 1;
}

std::uint64_t SharedLedger::release_sequence() const {
  return layout_->release_sequence.load(std::memory_order_acquire);
}

JobId SharedLedger::release_asker() {
  LockGuard guard(*this);
  return JobId{layout_->release_slot, layout_->release_generation, layout_->release_member};
}

void SharedLedger::answer_release(JobId job, std::uint64_t sequence, std::size_t bytes) {
  LockGuard guard(*this);
  Slot& s = find_locked(job, "answer_release");
  Member& m = s.members[job.member];
  m.answered_release = std::max(m.answered_release, sequence);
  if (bytes > 0) {
    ++s.releases;
    s.released_bytes += bytes;
  }
}

std::vector<std::string> SharedLedger::unanswered(JobId asker, std::uint64_t sequence) {
  LockGuard guard(*this);
  reclaim_dead_locked();
  std::vector<std::string> out;
  for (std::uint32_t i = 0; i < kMaxJobs; ++i) {
    const Slot& s = layout_->slots[i];
    if (s.state.load(std::memory_order_relaxed) != kActive) continue;
    for (std::uint32_t j = 0; j < kMaxMembers; ++j) {
      const Member& m = s.members[j];
      const bool is_asker = i == asker.slot && j == asker.member && s.generation == asker.generation;
      if (m.pid == 0 || is_asker || m.releasable == 0 || m.answered_release >= sequence) continue;
      std::string who = "'";  // appended piece by piece: GCC 12 warns (-Wrestrict) on "'" + std::string(...)
      who.append(s.name).append("' (pid ").append(std::to_string(m.pid)).append(")");
      out.push_back(std::move(who));
    }
  }
  return out;
}

const char* job_state_name(JobState state) {
  switch (state) {
    case JobState::starting:
      return "starting";
    case JobState::training:
      return "training";
    case JobState::evaluating:
      return "evaluating";
    case JobState::checkpointing:
      return "checkpointing";
    case JobState::waiting:
      return "waiting";
    case JobState::finished:
      return "finished";
  }
  return "unknown";
}

namespace {

LedgerEntry entry_of(const SharedLedger::Slot& s) {
  LedgerEntry e;
  e.name = s.name;
  e.key = s.key;
  e.waiting = s.admission == kWaiting;
  e.priority = s.priority;
  e.admission_bytes = static_cast<std::size_t>(s.need);
  e.floor_bytes = static_cast<std::size_t>(s.floor);
  e.target_bytes = static_cast<std::size_t>(s.target);
  e.preempt_requested = s.preempt != 0;
  e.reservation = static_cast<std::size_t>(s.reservation);
  e.limit = static_cast<std::size_t>(s.limit);
  e.in_use_bytes = static_cast<std::size_t>(s.in_use());
  e.releases = s.releases;
  e.released_bytes = s.released_bytes;
  for (const Member& m : s.members) {
    if (m.pid == 0) continue;
    if (e.pid == 0) e.pid = m.pid;
    // A ticket is the job's place in the queue, not a process's memory: shown while it waits.
    if (m.ticket != 0 && s.admission != kWaiting) continue;
    LedgerMember lm;
    lm.pid = m.pid;
    lm.in_use_bytes = static_cast<std::size_t>(m.in_use);
    lm.answered_release = m.answered_release;
    MemberFigures& f = lm.figures;
    f.allocated_bytes = m.allocated;
    f.reserved_bytes = m.reserved;
    f.peak_reserved_bytes = m.peak_reserved;
    f.releasable_bytes = m.releasable;
    f.fragmentation = m.fragmentation;
    f.step = m.step;
    f.tokens_per_s = m.tokens_per_s;
    f.state = static_cast<JobState>(m.state);
    f.num_ooms = m.num_ooms;
    f.policy = m.policy;
    e.members.push_back(std::move(lm));
  }
  return e;
}

}  // namespace

}  // namespace memtrain::memory
