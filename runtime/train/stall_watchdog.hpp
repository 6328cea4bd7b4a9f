#pragma once
// health.stall_timeout: a rank that makes no progress ends the job (issue 48, section 3).
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace memtrain::train {

// Note [A hung rank ends the job]
// A rank that stops making progress (SIGSTOP, a hung device, a deadlock) leaves its peers
// waiting inside a collective forever, spinning at 70-100% CPU (Open MPI polls), and nothing
// inside MPI times out. So every rank of a multi-rank job runs a watchdog thread that writes a
// heartbeat file once a second into run_dir/heartbeats/ (its pid, the wall clock, its step, the
// time of its last progress, and the long phase it is in, if any). The main thread reports
// progress: a step or an evaluation done, and long phases (a checkpoint written or loaded,
// fill-mask at the end), which count as progress while they last. When a rank has made no
// progress for health.stall_timeout seconds, its watchdog reads every rank's heartbeat: if a
// rank is inside a long phase the job is waiting for it, not stalled; otherwise it names the
// rank whose heartbeat stopped (a stopped or dead process, whose own watchdog cannot act) or,
// every process being alive, the rank whose progress is oldest, with its step, and exits 1.
// mpirun then ends the other ranks, and `memtrain supervise` restarts the job from its newest
// trusted checkpoint. The heartbeats are compared by wall clock: ranks on several hosts need
// clocks within a few seconds of each other (NTP), far below the 600 s default (PyTorch's NCCL
// watchdog's).
class StallWatchdog {
 public:
  // dir: the job's heartbeat directory (created), shared by its ranks; timeout_s > 0. Starts
  // the thread. Throws RuntimeError when dir cannot be created.
  StallWatchdog(std::string dir, int world_rank, int world_size, double timeout_s);
  // Stops the thread and removes this rank's heartbeat file.
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  // The main thread made progress; `step` is the run's step now.
  void progress(std::int64_t step);

  // A long phase (a checkpoint write, a load, a wait for memory) counts as progress while the
  // object lives. Phases nest: an inner one's end restores the outer one.
  class Busy {
   public:
    Busy(StallWatchdog* w, const char* what);
    ~Busy();
    Busy(const Busy&) = delete;
    Busy& operator=(const Busy&) = delete;

   private:
    StallWatchdog* w_;
    const char* outer_ = nullptr;
  };

  // Wall-clock milliseconds since the Unix epoch.
  static std::int64_t now_ms();

 private:
  void run();
  void write_heartbeat();
  // Reads every rank's heartbeat: the line that ends the job, or "" when none is stalled.
  std::string find_stall() const;

  std::string dir_;
  int rank_, world_size_;
  std::int64_t timeout_ms_;
  std::atomic<std::int64_t> step_{0};
  std::atomic<std::int64_t> progress_ms_;
  std::atomic<const char*> busy_{nullptr};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace memtrain::train
