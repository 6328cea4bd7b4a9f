#include "runtime/cli/error_report.hpp"

#include <chrono>
#include <new>
#include <thread>
#include <stdexcept>
#include <string_view>

#include "memory/out_of_memory.hpp"
#include "memory/trace_format_error.hpp"
#include "comms/communicator.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::cli {

std::string program_name() {
  const int rank = comms::launched_by_mpi() ? comms::launcher_rank() : 0;
  return rank > 0 ? "memtrain[rank " + std::to_string(rank) + "]" : "memtrain";
}

int report_and_end_job(std::exception_ptr error, std::ostream& err) {
  const std::string program = program_name();
  bool config_error = false;
  try {
    std::rethrow_exception(error);
  } catch (const ConfigError&) {
    config_error = true;
  } catch (...) {}
  if (config_error && program != "memtrain") {
    // Note [A config error is printed once]: rank 0's MPI_Abort normally ends this process
    // during the wait.
    std::this_thread::sleep_for(std::chrono::seconds(kQuietRankWaitSeconds));
  }
  const int code = exit_status(error, err, program);
  comms::abort_job_if_multi_rank(code);
  return code;
}

int exit_status(std::exception_ptr error, std::ostream& err, const std::string& program) {
  const std::string& p = program;
  try {
    std::rethrow_exception(error);
  } catch (const ConfigError& e) {
    err << p << ": config error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const memory::TraceFormatError& e) {
    err << p << ": trace error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const OutOfMemory& e) {
    const std::string_view what = e.what();
    err << p << ": " << (what.starts_with("out of memory") ? "" : "out of memory: ") << what << "\n";
    return kExitFailure;
  } catch (const RuntimeError& e) {
    err << p << ": error: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    err << p << ": error: out of host memory (std::bad_alloc)\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    err << p << ": error: " << e.what() << "\n";
    return kExitFailure;
  } catch (...) {
    err << p << ": error: unknown exception\n";
    return kExitFailure;
  }
}

}  // namespace memtrain::cli
