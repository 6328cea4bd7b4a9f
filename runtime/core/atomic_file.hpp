#pragma once
// Writing a run output so that a failed write never leaves a partial file behind.
#include <functional>
#include <ostream>
#include <string>

namespace memtrain::core {

// Writes `path` by calling write(stream) on `path`.tmp, then renaming it over `path`
// (POSIX rename(2) replaces the target atomically, so readers see the old file or the whole
// new one, never a prefix). When opening, writing, flushing or renaming fails (disk full,
// missing directory, permissions) the temporary file is removed, `path` is left as it was, and
// RuntimeError "cannot write <path>: <reason>" is thrown, the reason being
// std::strerror(errno) when the OS gave one. An exception from `write` itself also removes the
// temporary file and propagates.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace memtrain::core
