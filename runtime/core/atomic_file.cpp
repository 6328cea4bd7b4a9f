#include "runtime/core/atomic_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runtime/core/errors.hpp"

namespace memtrain::core {
namespace {

// The OS reason of the last failed call, or the stream's state when it set no errno.
std::string reason(int err) {
  return err != 0 ? std::string(std::strerror(err)) : std::string("the stream reported an error");
}

// fsync of `path`; returns errno on failure, 0 on success.
int try_sync(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno;
  const int rc = ::fsync(fd);
  const int err = rc != 0 ? errno : 0;
  ::close(fd);
  return err;
}

std::string parent_of(const std::string& path) {
  const auto parent = std::filesystem::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

}  // namespace

void sync_path(const std::string& path) {
  if (const int err = try_sync(path); err != 0) {
    throw RuntimeError("cannot sync " + path + ": " + std::strerror(err));
  }
}

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  const std::string tmp = path + ".tmp";
  auto fail = [&](int err) {
    std::remove(tmp.c_str());
    throw RuntimeError("cannot write " + path + ": " + reason(err));
  };
  errno = 0;
  std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
  if (!out) fail(errno);
  try {
    write(out);
  } catch (...) {
    out.close();
    std::remove(tmp.c_str());
    throw;
  }
  out.flush();
  if (!out) fail(errno);
  out.close();  // the last buffered bytes reach the file here; ENOSPC can appear only now
  if (!out) fail(errno);
  if (const int err = try_sync(tmp); err != 0) fail(err);
  errno = 0;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(errno);
  // The new file is complete under its name; a failed directory sync is still an error (the
  // caller asked for a durable file), but the file is not removed.
  if (const int err = try_sync(parent_of(path)); err != 0) {
    throw RuntimeError("cannot write " + path + ": syncing its directory: " + std::strerror(err));
  }
}

}  // namespace memtrain::core
