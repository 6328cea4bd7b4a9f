#include "runtime/train/stall_watchdog.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "runtime/core/errors.hpp"

namespace memtrain::train {
namespace fs = std::filesystem;
namespace {

// A heartbeat older than this is a process that does not run (stopped, dead or cut off).
constexpr std::int64_t kSilentMs = 5000;

std::string rank_file(const std::string& dir, int rank) {
  char name[32];
  std::snprintf(name, sizeof name, "rank-%05d", rank);
  return (fs::path(dir) / name).string();
}

struct Heartbeat {
  bool read = false;
  long pid = 0;
  std::int64_t alive_ms = 0, step = 0, progress_ms = 0;
  std::string busy;  // "-" when in no long phase
};

Heartbeat read_heartbeat(const std::string& path) {
  Heartbeat h;
  std::ifstream in(path);
  if (in >> h.pid >> h.alive_ms >> h.step >> h.progress_ms >> h.busy) h.read = true;
  return h;
}

}  // namespace

std::int64_t StallWatchdog::now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

StallWatchdog::StallWatchdog(std::string dir, int world_rank, int world_size, double timeout_s)
    : dir_(std::move(dir)),
      rank_(world_rank),
      world_size_(world_size),
      timeout_ms_(static_cast<std::int64_t>(timeout_s * 1000.0)),
      progress_ms_(now_ms()) {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) throw RuntimeError("health.stall_timeout: cannot create " + dir_ + ": " + ec.message());
  write_heartbeat();
  thread_ = std::thread([this] { run(); });
}

StallWatchdog::~StallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::error_code ec;
  fs::remove(rank_file(dir_, rank_), ec);
}

void StallWatchdog::progress(std::int64_t step) {
  step_.store(step);
  progress_ms_.store(now_ms());
}

// Phases nest (a preemption writes a checkpoint, then waits): the inner one's end restores the
// outer one, so that the wait after the checkpoint stays busy.
StallWatchdog::Busy::Busy(StallWatchdog* w, const char* what) : w_(w) {
  if (w_ != nullptr) outer_ = w_->busy_.exchange(what);
}

StallWatchdog::Busy::~Busy() {
  if (w_ == nullptr) return;
  w_->busy_.store(outer_);
  w_->progress_ms_.store(now_ms());  // the phase was progress until its end
}

// "pid alive_ms step progress_ms busy", replaced through a rename so that a reader sees a whole
// line. Not fsynced: a heartbeat is worthless after a crash of the machine.
void StallWatchdog::write_heartbeat() {
  const std::string path = rank_file(dir_, rank_);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    const char* busy = busy_.load();
    out << ::getpid() << ' ' << now_ms() << ' ' << step_.load() << ' '
        << (busy != nullptr ? now_ms() : progress_ms_.load()) << ' ' << (busy != nullptr ? busy : "-") << '\n';
    if (!out) return;  // a full disk: the next beat tries again
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
}

std::string StallWatchdog::find_stall() const {
  const std::int64_t now = now_ms();
  int silent = -1, oldest = -1;
  Heartbeat silent_beat, oldest_beat;
  for (int r = 0; r < world_size_; ++r) {
    const Heartbeat h = read_heartbeat(rank_file(dir_, r));
    if (h.read && h.busy != "-" && now - h.alive_ms <= kSilentMs) return "";  // waiting for its long phase
    if (!h.read || now - h.alive_ms > kSilentMs) {
      if (silent < 0) silent = r, silent_beat = h;
      continue;
    }
    if (oldest < 0 || h.progress_ms < oldest_beat.progress_ms) oldest = r, oldest_beat = h;
  }
  std::ostringstream line;
  line << "memtrain: health: ";
  if (silent >= 0) {
    line << "world rank " << silent;
    if (silent_beat.read) {
      line << " (pid " << silent_beat.pid << ") stopped sending heartbeats " << (now - silent_beat.alive_ms) / 1000
           << " s ago at step " << silent_beat.step << " (a stopped or dead process)";
    } else {
      line << " has no heartbeat in " << dir_;
    }
  } else if (oldest >= 0) {
    line << "world rank " << oldest << " (pid " << oldest_beat.pid << ") made no progress for "
         << (now - oldest_beat.progress_ms) / 1000 << " s at step " << oldest_beat.step;
  }
  line << "; health.stall_timeout = " << timeout_ms_ / 1000 << " s; world rank " << rank_
       << " ends the job (exit 1) for a supervisor to restart\n";
  return line.str();
}

void StallWatchdog::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; });
    if (stop_) break;
    write_heartbeat();
    if (busy_.load() != nullptr || now_ms() - progress_ms_.load() <= timeout_ms_) continue;
    const std::string stall = find_stall();
    if (stall.empty()) continue;
    std::cerr << stall << std::flush;
    std::_Exit(1);  // the main thread is blocked in a collective: no clean unwinding exists
  }
}

}  // namespace memtrain::train
