#pragma once
#include <stdexcept>
#include <string>

namespace memtrain::memory {

// A malformed allocation trace (replay CSV or RMM log CSV). The message names the file, the
// line number and what was wrong, e.g.
//   "trace.csv:12: bytes 'abc' is not a non-negative integer; expected op,id,bytes,stream,tag".
// memory/ depends on nothing else in the project, so this derives std::runtime_error; the CLI
// maps it to a usage error (exit 2).
class TraceFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace memtrain::memory
