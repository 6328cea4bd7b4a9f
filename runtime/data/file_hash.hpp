#pragma once
// xxh64 checksums of files, for the data cache manifest.
#include <cstdint>
#include <string>

namespace memtrain::data {

// XXH64 (seed 0) of the whole file, streamed in 1 MiB chunks. Throws RuntimeError when the file
// cannot be read.
std::uint64_t xxh64_file(const std::string& path);

// 16 lower-case hex digits, zero-padded: the form hashes take in manifests and directory names.
std::string hex64(std::uint64_t value);

}  // namespace memtrain::data
