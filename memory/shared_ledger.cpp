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

namespace memtrain::memory {

namespace {

constexpr std::uint32_t kMagic = 0x4D4C4447;  // "MLDG"
constexpr std::uint32_t kVersion = 1;
constexpr std::uint32_t kFree = 0;
constexpr std::uint32_t kActive = 1;
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

std::size_t footprint(std::uint64_t in_use, std::uint64_t reservation) {
  return static_cast<std::size_t>(std::max(in_use, reservation));
}

}  // namespace

struct SharedLedger::Slot {
  std::atomic<std::uint32_t> state;  // kFree or kActive; written last when an entry is filled
  std::int32_t pid;
  std::uint64_t start_time;
  std::uint64_t generation;
  std::uint64_t reservation;
  std::uint64_t limit;
  std::uint64_t in_use;
  char name[32];
};

struct SharedLedger::Layout {
  std::atomic<std::uint32_t> magic;  // kMagic once the creator has initialised everything
  std::uint32_t version;
  std::uint64_t capacity;
  std::uint64_t next_generation;
  pthread_mutex_t mutex;
  Slot slots[SharedLedger::kMaxJobs];
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free,
              "the ledger's state words must be lock-free to be shared between processes");

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
    : device_(device), shm_name_(shm_name(device)) {
  if (capacity_bytes == 0) {
    throw std::invalid_argument("shared ledger for device '" + device_ + "': capacity is 0 bytes; expected > 0");
  }
  const auto deadline = std::chrono::steady_clock::now() + kOpenTimeout;
  int fd = -1;
  bool creator = false;
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
    if (!process_alive(static_cast<pid_t>(s.pid), s.start_time)) {
      s.state.store(kFree, std::memory_order_relaxed);
      ++reclaimed;
    }
  }
  return reclaimed;
}

SharedLedger::Slot& SharedLedger::find_locked(JobId job, const char* what) {
  if (job.slot < kMaxJobs) {
    Slot& s = layout_->slots[job.slot];
    if (s.state.load(std::memory_order_relaxed) == kActive && s.generation == job.generation) return s;
  }
  throw std::logic_error(std::string("shared ledger ") + shm_name_ + ": " + what + " for job slot " +
                         std::to_string(job.slot) + " generation " + std::to_string(job.generation) +
                         " that is not in the ledger (it left, or its process was declared dead)");
}

JobId SharedLedger::join(const JobShare& share) {
  if (share.limit < share.reservation) {
    throw std::invalid_argument("job '" + share.name + "' on device '" + device_ + "': limit " +
                                std::to_string(share.limit) + " bytes is below its reservation " +
                                std::to_string(share.reservation) + " bytes; expected limit >= reservation");
  }
  LockGuard guard(*this);
  reclaim_dead_locked();
  std::size_t committed = 0;
  Slot* free_slot = nullptr;
  for (Slot& s : layout_->slots) {
    if (s.state.load(std::memory_order_relaxed) == kActive) {
      committed += footprint(s.in_use, s.reservation);
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
      msg += " '" + std::string(s.name) + "' (pid " + std::to_string(s.pid) + ") reserves " +
             format_byte_size(s.reservation) + ", uses " + format_byte_size(s.in_use) + ";";
    }
    // Every rank of a job is a job of its own here: ranks on one device each reserve.
    msg += " expected a reservation of at most " + format_byte_size(capacity - std::min(committed, capacity)) +
           " (the capacity less what the others reserve or use; each rank of a job reserves its own)";
    throw std::runtime_error(msg);
  }
  if (!free_slot) {
    throw std::runtime_error("shared ledger for device '" + device_ + "' is full: " + std::to_string(kMaxJobs) +
                             " jobs are registered");
  }
  Slot& s = *free_slot;
  s.pid = static_cast<std::int32_t>(::getpid());
  s.start_time = start_time_of(::getpid());
  s.generation = layout_->next_generation++;
  s.reservation = share.reservation;
  s.limit = share.limit;
  s.in_use = 0;
  std::memset(s.name, 0, sizeof s.name);
  std::memcpy(s.name, share.name.data(), std::min(share.name.size(), sizeof s.name - 1));
  s.state.store(kActive, std::memory_order_release);  // published last: a crash before leaves it free
  return JobId{static_cast<std::uint32_t>(&s - layout_->slots), s.generation};
}

void SharedLedger::leave(JobId job) {
  LockGuard guard(*this);
  find_locked(job, "leave").state.store(kFree, std::memory_order_release);
}

ChargeResult SharedLedger::try_charge(JobId job, std::size_t bytes) {
  LockGuard guard(*this);
  Slot& me = find_locked(job, "charge");
  for (int attempt = 0; attempt < 2; ++attempt) {
    std::size_t others = 0;
    for (const Slot& s : layout_->slots) {
      if (&s == &me || s.state.load(std::memory_order_relaxed) != kActive) continue;
      others += footprint(s.in_use, s.reservation);
    }
    const std::size_t capacity = layout_->capacity;
    const std::size_t room_on_device = capacity - std::min(others, capacity);  // max footprint for me
    const std::size_t limit = std::min<std::size_t>(me.limit, room_on_device);
    const std::size_t available = limit - std::min<std::size_t>(me.in_use, limit);
    if (bytes <= available) {
      me.in_use += bytes;
      return ChargeResult{true, ChargeRefusal::none, static_cast<std::size_t>(me.in_use), available - bytes};
    }
    // Before refusing, reclaim the shares of processes that are gone, then look again.
    if (attempt == 0 && reclaim_dead_locked() > 0) continue;
    const bool over_limit = me.in_use > me.limit || bytes > me.limit - me.in_use;
    return ChargeResult{false, over_limit ? ChargeRefusal::over_limit : ChargeRefusal::over_capacity,
                        static_cast<std::size_t>(me.in_use), available};
  }
  return ChargeResult{false, ChargeRefusal::over_capacity, static_cast<std::size_t>(me.in_use), 0};
}

void SharedLedger::release(JobId job, std::size_t bytes) {
  LockGuard guard(*this);
  Slot& me = find_locked(job, "release");
  if (bytes > me.in_use) {
    throw std::logic_error("shared ledger " + shm_name_ + ": job '" + std::string(me.name) + "' releases " +
                           std::to_string(bytes) + " bytes but has only " + std::to_string(me.in_use) + " charged");
  }
  me.in_use -= bytes;
}

LedgerSnapshot SharedLedger::snapshot() {
  LockGuard guard(*this);
  reclaim_dead_locked();
  LedgerSnapshot snap;
  snap.capacity_bytes = layout_->capacity;
  for (const Slot& s : layout_->slots) {
    if (s.state.load(std::memory_order_relaxed) != kActive) continue;
    snap.reserved_bytes += s.reservation;
    snap.committed_bytes += footprint(s.in_use, s.reservation);
    snap.jobs.push_back(LedgerEntry{s.name, static_cast<pid_t>(s.pid), static_cast<std::size_t>(s.reservation),
                                    static_cast<std::size_t>(s.limit), static_cast<std::size_t>(s.in_use)});
  }
  return snap;
}

LedgerEntry SharedLedger::entry(JobId job) {
  LockGuard guard(*this);
  const Slot& s = find_locked(job, "entry");
  return LedgerEntry{s.name, static_cast<pid_t>(s.pid), static_cast<std::size_t>(s.reservation),
                     static_cast<std::size_t>(s.limit), static_cast<std::size_t>(s.in_use)};
}

}  // namespace memtrain::memory
