#pragma once
// A string from one rank to all: its length, then its bytes (two broadcasts).
#include <cstdint>
#include <string>

#include "comms/communicator.hpp"

namespace memtrain::comms {

// Every rank of `comm` returns `root`'s `s` (the others' `s` is ignored). Collective: every rank
// calls it with the same root. Throws what comm.broadcast throws.
inline std::string broadcast_string(Communicator& comm, std::string s, int root = 0) {
  std::int64_t length = static_cast<std::int64_t>(s.size());
  comm.broadcast(&length, sizeof length, root);
  s.resize(static_cast<std::size_t>(length));
  if (length > 0) comm.broadcast(s.data(), length, root);
  return s;
}

}  // namespace memtrain::comms
