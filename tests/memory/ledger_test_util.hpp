#pragma once
// Helpers for the shared-ledger tests: a device name no other test (or run) uses, and a
// forked child that runs a function and reports through its exit status and a pipe.
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <stdexcept>
#include <string>

#include "memory/shared_ledger.hpp"

namespace memtrain::memory::testing {

// A ledger device name unique to this process and call; removed again by ~ScopedDevice.
struct ScopedDevice {
  std::string name;
  ScopedDevice() {
    static std::atomic<int> counter{0};
    name = "m3test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    SharedLedger::remove(name);
  }
  ~ScopedDevice() { SharedLedger::remove(name); }
};

// A forked child. `body(ready_fd)` runs in the child; it may write a byte to ready_fd to say
// "I got this far", and its return value becomes the exit status (exceptions give 99).
class Child {
 public:
  explicit Child(const std::function<int(int ready_fd)>& body) {
    int fds[2];
    if (::pipe(fds) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::close(fds[0]);
      int code = 99;
      try {
        code = body(fds[1]);
      } catch (...) {
        code = 99;
      }
      ::_exit(code);  // never run the parent's atexit handlers or gtest teardown
    }
    ::close(fds[1]);
    read_fd_ = fds[0];
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    ::close(read_fd_);
  }

  // Waits (at most timeout_ms) for the child's ready byte; false on timeout or early exit.
  bool wait_ready(int timeout_ms = 10000) {
    pollfd p{read_fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return false;
    char c;
    return ::read(read_fd_, &c, 1) == 1;
  }
  void kill_hard() { ::kill(pid_, SIGKILL); }
  // Exit status, or -signal when killed by a signal.
  int wait() {
    int status = 0;
    ::waitpid(pid_, &status, 0);
    reaped_ = true;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return -WTERMSIG(status);
    return -1000;
  }
  // Non-blocking wait: true (and the exit status in `code`) once the child has exited.
  bool try_wait(int& code) {
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    reaped_ = true;
    code = WIFEXITED(status) ? WEXITSTATUS(status) : WIFSIGNALED(status) ? -WTERMSIG(status) : -1000;
    return true;
  }
  pid_t pid() const { return pid_; }

  static void signal_ready(int fd) {
    char c = 1;
    (void)!::write(fd, &c, 1);
  }

 private:
  pid_t pid_ = -1;
  int read_fd_ = -1;
  bool reaped_ = false;
};

}  // namespace memtrain::memory::testing
