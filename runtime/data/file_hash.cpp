#include "runtime/data/file_hash.hpp"

#include <xxhash.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include "runtime/core/errors.hpp"

namespace memtrain::data {

std::uint64_t xxh64_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw RuntimeError("cannot read " + path + " to checksum it");
  std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> state(XXH64_createState(), &XXH64_freeState);
  XXH64_reset(state.get(), 0);
  std::vector<char> buffer(1 << 20);
  while (in) {
    in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
    XXH64_update(state.get(), buffer.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw RuntimeError("read error while checksumming " + path);
  return XXH64_digest(state.get());
}

std::string hex64(std::uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace memtrain::data
