#include "runtime/core/atomic_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "runtime/core/errors.hpp"

namespace memtrain::core {
namespace {

// The OS reason of the last failed call, or the stream's state when it set no errno.
std::string reason(int err) {
  return err != 0 ? std::string(std::strerror(err)) : std::string("the stream reported an error");
}

}  // namespace

void write_file_atomically(const std::string& path,
                           const std::function<void(std::ostream&)>& write) {
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
  errno = 0;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) fail(errno);
}

}  // namespace memtrain::core
