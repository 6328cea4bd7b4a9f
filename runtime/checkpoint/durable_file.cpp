#include "runtime/checkpoint/durable_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "runtime/checkpoint/fault_injection.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::checkpoint {

std::size_t WriteBudget::allow(std::size_t n) const {
  if (!armed_) return n;
  return static_cast<std::size_t>(std::clamp<std::int64_t>(left_, 0, static_cast<std::int64_t>(n)));
}

void WriteBudget::spend(std::size_t n) {
  if (!armed_) return;
  left_ -= static_cast<std::int64_t>(n);
  if (left_ <= 0) kill_self();
}

void write_file_durably(const std::string& path, std::span<const std::byte> bytes, WriteBudget* budget) {
  const std::span<const std::byte> one[1] = {bytes};
  write_file_durably(path, std::span<const std::span<const std::byte>>(one), budget);
}

void write_file_durably(const std::string& path, std::span<const std::span<const std::byte>> pieces,
                        WriteBudget* budget) {
  auto fail = [&](int err, int fd) {
    if (fd >= 0) ::close(fd);
    std::remove(path.c_str());
    throw RuntimeError("cannot write " + path + ": " + std::strerror(err));
  };
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail(errno, -1);
  constexpr std::size_t kChunk = std::size_t{1} << 22;  // 4 MiB: the fault fires near its byte
  for (const auto bytes : pieces) {
    std::size_t done = 0;
    while (done < bytes.size()) {
      std::size_t n = std::min(kChunk, bytes.size() - done);
      if (budget) n = std::max<std::size_t>(budget->allow(n), 0);
      if (n > 0) {
        const ssize_t w = ::write(fd, bytes.data() + done, n);
        if (w < 0) {
          if (errno == EINTR) continue;
          fail(errno, fd);
        }
        n = static_cast<std::size_t>(w);
        done += n;
      }
      if (budget) budget->spend(n);  // kills when the budget reaches 0, mid-file
    }
  }
  if (::fsync(fd) != 0) fail(errno, fd);
  if (::close(fd) != 0) fail(errno, -1);
}

}  // namespace memtrain::checkpoint
