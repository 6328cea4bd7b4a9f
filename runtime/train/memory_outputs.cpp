#include "runtime/train/memory_outputs.hpp"

#include <nlohmann/json.hpp>
#include <stdexcept>

#include "memory/chrome_trace_json.hpp"
#include "memory/memory_snapshot_json.hpp"
#include "memory/trace_csv_writer.hpp"
#include "runtime/core/errors.hpp"
#include "runtime/core/atomic_file.hpp"
#include "runtime/core/json_text.hpp"

namespace memtrain::train {
namespace {

void write_json(const std::string& path, const nlohmann::json& j) {
  core::write_file_atomically(path, [&](std::ostream& out) { out << core::json_text(j) << '\n'; });
}

void write_trace_csv_file(const std::string& path, const std::vector<memory::TraceEvent>& events) {
  try {
    core::write_file_atomically(path, [&](std::ostream& out) { memory::write_trace_csv(out, events); });
  } catch (const std::invalid_argument& e) {
    throw RuntimeError("cannot write " + path + ": " + e.what());
  }
}

}  // namespace

void write_memory_outputs(const memory::CachingAllocator& allocator, const memory::TraceRecorder* trace,
                          const RunDirectory& run_dir) {
  const std::vector<memory::TraceEvent> events = trace ? trace->events() : std::vector<memory::TraceEvent>{};
  write_json(run_dir.file("memory_snapshot.json"), memory::memory_snapshot_json(allocator.snapshot(), events));
  if (trace) {
    write_json(run_dir.file("memory_trace.json"), memory::chrome_trace_json(events));
    write_trace_csv_file(run_dir.file("memory_trace.csv"), events);
  }
}

}  // namespace memtrain::train
