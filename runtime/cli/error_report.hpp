#pragma once
// How a failure reaches the user: one line on stderr and an exit code (runtime/core/errors.hpp).
#include <exception>
#include <ostream>
#include <string>

namespace memtrain::cli {

inline constexpr int kExitFailure = 1;  // a correctly set-up run failed
inline constexpr int kExitUsage = 2;    // bad usage, config or input file

// Prints `error` as "memtrain: <kind> error: <message>" (an out-of-memory error as
// "memtrain: <message>", its message starts with "out of memory") and returns the exit code:
// 2 for ConfigError, TraceFormatError and std::invalid_argument raised by the verbs' input
// checks; 1 for RuntimeError, OutOfMemory and any other exception.
// `program` replaces "memtrain" at the start of the line: "memtrain[rank 3]" for a rank other
// than 0 of an MPI job (program_name).
int exit_status(std::exception_ptr error, std::ostream& err, const std::string& program = "memtrain");

// "memtrain", or "memtrain[rank N]" in rank N > 0 of an MPI job (comms::launcher_rank), so
// that a message from one rank of many says which.
std::string program_name();

// Note [A config error is printed once]
// A config error of a multi-rank job (a world size that the tensor-parallel size does not
// divide, heads that it does not split) is raised by every rank alike, from the same YAML;
// printing it once per rank would bury the one line the user needs among N copies. So rank 0
// prints it, and the other ranks stay quiet and wait for rank 0 to end the job. A rank whose
// error rank 0 does not share (it cannot be ruled out: a file only that rank reads) prints it
// with its rank after kQuietRankWaitSeconds and ends the job itself, so nothing hangs.
inline constexpr int kQuietRankWaitSeconds = 10;

// Reports `error` as the top level of main does: prints it (except a ConfigError on a rank
// other than 0, Note [A config error is printed once]), ends a multi-rank job
// (comms::abort_job_if_multi_rank) and returns the exit code.
int report_and_end_job(std::exception_ptr error, std::ostream& err);

}  // namespace memtrain::cli
