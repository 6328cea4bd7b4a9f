#include "runtime/cli/error_report.hpp"

#include <new>
#include <stdexcept>
#include <string_view>

#include "memory/out_of_memory.hpp"
#include "memory/trace_format_error.hpp"
#include "runtime/core/errors.hpp"

namespace memtrain::cli {

int exit_status(std::exception_ptr error, std::ostream& err) {
  try {
    std::rethrow_exception(error);
  } catch (const ConfigError& e) {
    err << "memtrain: config error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const memory::TraceFormatError& e) {
    err << "memtrain: trace error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const OutOfMemory& e) {
    const std::string_view what = e.what();
    err << "memtrain: " << (what.starts_with("out of memory") ? "" : "out of memory: ") << what << "\n";
    return kExitFailure;
  } catch (const RuntimeError& e) {
    err << "memtrain: error: " << e.what() << "\n";
    return kExitFailure;
  } catch (const std::bad_alloc&) {
    err << "memtrain: error: out of host memory (std::bad_alloc)\n";
    return kExitFailure;
  } catch (const std::exception& e) {
    err << "memtrain: error: " << e.what() << "\n";
    return kExitFailure;
  } catch (...) {
    err << "memtrain: error: unknown exception\n";
    return kExitFailure;
  }
}

}  // namespace memtrain::cli
