#pragma once
// The exclusive lock a training job holds on its run directory (Note [One job per run
// directory]).
#include <string>

namespace memtrain::train {

// Note [One job per run directory]
// Two jobs given the same --run-dir (a second launch by mistake, or a scheduler that starts
// the next attempt while the last one is still writing) used to interleave: the second resumed
// from the first one's newest checkpoint, truncated its metrics.jsonl, and each removed the
// other's half-written step-N.tmp, so one job lost its logged steps and the other died. Rank 0
// of every `train` therefore holds flock(LOCK_EX) on run_dir/.lock from before it reads the
// directory's checkpoints until it returns. The kernel drops the lock when the process exits,
// however it exits, so a crashed job never leaves a stale lock; the file itself stays (removing
// it would let a third job lock a new inode while a second still holds the old one). A job
// finding the lock held waits up to kRunDirectoryLockWaitSeconds, since the ranks of a job that
// `mpirun` or `memtrain supervise` has just seen fail may take a few seconds to exit, and then
// stops with a ConfigError naming the holder's pid and host, which the holder writes into the
// file and empties again when it lets go.
constexpr double kRunDirectoryLockWaitSeconds = 10.0;

class RunDirectoryLock {
 public:
  // Locks `dir` (an existing directory) through dir/.lock, created if missing, and records this
  // process's pid and host name in it. While another process holds the lock, retries every
  // 0.1 s for up to `wait_seconds` (saying once on stderr that it waits). Throws ConfigError
  // "run directory D is in use by another job (pid P on host H holds D/.lock); expected ..."
  // when the wait ends with the lock still held, and when .lock is not a regular file (a
  // symbolic link is never followed); RuntimeError when .lock cannot be opened.
  static RunDirectoryLock acquire(const std::string& dir, double wait_seconds = kRunDirectoryLockWaitSeconds);

  RunDirectoryLock(RunDirectoryLock&& other) noexcept;
  RunDirectoryLock& operator=(RunDirectoryLock&& other) noexcept;
  RunDirectoryLock(const RunDirectoryLock&) = delete;
  RunDirectoryLock& operator=(const RunDirectoryLock&) = delete;
  // Releases the lock: empties the file (the holder's name) and closes it; the file stays.
  ~RunDirectoryLock();

 private:
  explicit RunDirectoryLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// The name of the lock file inside a run directory, ".lock"; a directory holding only it counts
// as empty for RunDirectory::open.
inline constexpr const char* kRunDirectoryLockFile = ".lock";

}  // namespace memtrain::train
