#pragma once
// Work that only rank 0 does (preparing data, creating the run directory) while the other
// ranks wait, with its failure reported on every rank instead of leaving them blocked.
#include <exception>
#include <string>

#include "comms/communicator.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {

// Runs `work` on rank 0, then all ranks meet in one collective. When `work` threw on rank 0 it
// rethrows there, and the other ranks throw RuntimeError("<what> failed on rank 0"), so no rank
// waits forever at a later collective. `what` names the work for that message.
template <class Work>
void run_on_root(comms::Communicator& comm, const std::string& what, Work&& work) {
  std::exception_ptr error;
  if (comm.rank() == 0) {
    try {
      work();
    } catch (...) {
      error = std::current_exception();
    }
  }
  std::int64_t failed = error ? 1 : 0;
  comm.allreduce_sum(&failed, 1);
  if (error) std::rethrow_exception(error);
  if (failed != 0) throw RuntimeError(what + " failed on rank 0 (its message says why)");
}

}  // namespace memtrain::train
