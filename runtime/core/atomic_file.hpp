#pragma once
// Writing a run output so that a failed write or a crash never leaves a partial file behind.
#include <functional>
#include <ostream>
#include <string>

namespace memtrain::core {

// Writes `path` by calling write(stream) on `path`.tmp, fsyncing it, renaming it over `path`
// and fsyncing the parent directory. POSIX rename(2) replaces the target atomically, so readers
// see the old file or the whole new one, never a prefix; the two fsyncs make that hold after a
// power loss too (without the first, the rename can reach the disk before the data and leave
// an empty file under the new name; without the second, the rename itself can be lost).
// When opening, writing, flushing, syncing or renaming fails (disk full, missing directory,
// permissions) the temporary file is removed, `path` is left as it was, and RuntimeError
// "cannot write <path>: <reason>" is thrown, the reason being std::strerror(errno) when the OS
// gave one. An exception from `write` itself also removes the temporary file and propagates.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

// fsync(2) of the file or directory at `path`, so that its data (a file) or its entries (a
// directory: files created, renamed or removed in it) survive a crash. Throws RuntimeError
// "cannot sync <path>: <reason>" when it cannot be opened or synced.
void sync_path(const std::string& path);

}  // namespace memtrain::core
