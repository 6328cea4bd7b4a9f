#pragma once
// Work that only rank 0 does (preparing data, creating the run directory) while the other
// ranks wait, with its failure reported on every rank instead of leaving them blocked.
#include <exception>
#include <string>
#include <utility>

#include "comms/communicator.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::train {

// Runs `work` on every rank for which `mine` is true, then all ranks meet in one collective.
// When `work` threw on a rank it rethrows there, and the other ranks throw
// "<what> failed on <elsewhere> (its message says why)", so no rank waits forever at a later
// collective: a ConfigError when any rank's failure was one (every rank then exits 2, the
// usage code), else a RuntimeError.
template <class Work>
void run_where(comms::Communicator& comm, bool mine, const std::string& what, const std::string& elsewhere,
               Work&& work) {
  std::exception_ptr error;
  std::int64_t failed[2] = {0, 0};  // any failure, config failures
  if (mine) {
    try {
      work();
    } catch (const ConfigError&) {
      error = std::current_exception();
      failed[1] = 1;
    } catch (...) {
      error = std::current_exception();
    }
  }
  if (error) failed[0] = 1;
  comm.allreduce_sum(failed, 2);
  if (error) std::rethrow_exception(error);
  const std::string message = what + " failed on " + elsewhere + " (its message says why)";
  if (failed[1] != 0) throw ConfigError(message);
  if (failed[0] != 0) throw RuntimeError(message);
}

// Runs `work` on rank 0 while the others wait (run_where).
template <class Work>
void run_on_root(comms::Communicator& comm, const std::string& what, Work&& work) {
  run_where(comm, comm.rank() == 0, what, "rank 0", std::forward<Work>(work));
}

}  // namespace memtrain::train
