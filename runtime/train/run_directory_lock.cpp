#include "runtime/train/run_directory_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <thread>

#include "runtime/core/errors.hpp"

namespace memtrain::train {

namespace {

// What the holder wrote into the lock file ("pid P on host H"), or empty.
std::string holder_of(int fd) {
  char buf[256] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  if (n <= 0) return {};
  std::string text(buf, static_cast<std::size_t>(n));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\0')) text.pop_back();
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || static_cast<unsigned char>(c) >= 0x7f) c = '?';
  }
  return text;
}

void record_holder(int fd) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "?");
  const std::string text = "pid " + std::to_string(::getpid()) + " on host " + host + "\n";
  // Best effort: the lock is what excludes; the text only names the holder in a message.
  if (::ftruncate(fd, 0) == 0) {
    [[maybe_unused]] const ssize_t n = ::pwrite(fd, text.data(), text.size(), 0);
  }
}

}  // namespace

RunDirectoryLock RunDirectoryLock::acquire(const std::string& dir, double wait_seconds) {
  const std::string path = (std::filesystem::path(dir) / kRunDirectoryLockFile).string();
  // O_NOFOLLOW: the file is emptied and written, and a symbolic link planted as .lock would
  // have that done to whatever it names (a root job truncating another file).
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int err = errno;
    if (err == ELOOP || err == EISDIR || err == ENXIO) {
      throw ConfigError("run directory " + dir + ": " + path + " is not a regular file (" + std::strerror(err) +
                        "); expected the lock file memtrain creates there: remove it");
    }
    throw RuntimeError("cannot open " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw ConfigError("run directory " + dir + ": " + path +
                      " is not a regular file; expected the lock file memtrain creates there: remove it");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait_seconds);
  bool said = false;
  for (;;) {
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) break;
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK) {
      ::close(fd);
      throw RuntimeError("cannot lock " + path + ": " + std::strerror(err));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      const std::string holder = holder_of(fd);
      ::close(fd);
      throw ConfigError("run directory " + dir + " is in use by another job (" +
                        (holder.empty() ? "a process" : holder) + " holds " + path +
                        "); expected a run directory that no running job writes to: wait for that job to end, "
                        "or choose another --run-dir");
    }
    if (!said && wait_seconds > 0) {
      const std::string holder = holder_of(fd);
      std::cerr << "memtrain: run directory " << dir << " is locked by "
                << (holder.empty() ? "another process" : holder) << "; waiting up to " << wait_seconds
                << " s for it to end\n";
      said = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  record_holder(fd);
  return RunDirectoryLock(fd);
}

RunDirectoryLock::RunDirectoryLock(RunDirectoryLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

RunDirectoryLock& RunDirectoryLock::operator=(RunDirectoryLock&& other) noexcept {
  if (this != &other) {
    RunDirectoryLock released(fd_);  // releases as the destructor does
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

RunDirectoryLock::~RunDirectoryLock() {
  if (fd_ < 0) return;
  // Still holding the lock: the holder's name goes with it (only a crashed holder leaves it).
  [[maybe_unused]] const int rc = ::ftruncate(fd_, 0);
  ::close(fd_);
}

}  // namespace memtrain::train
