// The two trace formats replay reads (declared in replay.hpp). Both are one record per line
// with no quoting, so a line reader and a split on ',' are the whole parser.
#include <charconv>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "memory/printable.hpp"
#include "memory/replay.hpp"

namespace memtrain::memory {
namespace {

constexpr std::string_view kTraceHeader = "op,id,bytes,stream,tag";
constexpr std::string_view kRmmHeader = "Thread,Time,Action,Pointer,Size,Stream";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split_commas(std::string_view line) {
  std::vector<std::string_view> fields;
  std::size_t start = 0;
  for (;;) {
    const std::size_t comma = line.find(',', start);
    fields.push_back(trim(line.substr(start, comma - start)));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return fields;
}

[[noreturn]] void fail(const std::string& source, std::size_t line, const std::string& what) {
  throw TraceFormatError(source + ":" + std::to_string(line) + ": " + what);
}

template <class Int>
Int parse_uint(std::string_view field, const char* name, const std::string& source, std::size_t line,
               std::string_view expected_header) {
  Int value = 0;
  const auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), value);
  if (field.empty() || ec != std::errc() || end != field.data() + field.size()) {
    fail(source, line,
         std::string(name) + " '" + printable(field, 60) + "' is not a non-negative integer" +
             (ec == std::errc::result_out_of_range ? " in range" : "") + "; expected " + std::string(expected_header));
  }
  return value;
}

// Reads lines, dropping comments (from '#') and blank lines; calls fn(content, line_number).
template <class Fn>
void for_each_record(std::istream& in, Fn&& fn) {
  std::string raw;
  std::size_t line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    std::string_view line = raw;
    // A spreadsheet's "CSV UTF-8" starts with a byte-order mark: not part of the header.
    if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = trim(line);
    if (line.empty()) continue;
    fn(line, line_no);
  }
}

}  // namespace

std::vector<TraceOp> parse_trace_csv(std::istream& in, const std::string& source, std::vector<StepMark>* steps) {
  std::vector<TraceOp> ops;
  bool header_seen = false;
  for_each_record(in, [&](std::string_view line, std::size_t line_no) {
    if (!header_seen) {
      if (line != kTraceHeader) {
        fail(source, line_no, "header is '" + printable(line, 60) + "'; expected '" + std::string(kTraceHeader) + "'");
      }
      header_seen = true;
      return;
    }
    const auto f = split_commas(line);
    if (f.size() > 5) {
      fail(source, line_no,
           std::to_string(f.size()) + " fields; expected at most 5 (" + std::string(kTraceHeader) + ")");
    }
    auto field = [&](std::size_t i) { return i < f.size() ? f[i] : std::string_view{}; };
    if (f[0] == "step") {
      // Note [Step boundaries in a trace]
      if (field(1).empty()) fail(source, line_no, "step row has no step number; expected step,N");
      for (std::size_t i = 2; i < f.size(); ++i) {
        if (!f[i].empty()) fail(source, line_no, "step row has more than a step number; expected step,N");
      }
      const auto step = parse_uint<std::uint64_t>(field(1), "step", source, line_no, "step,N");
      if (steps != nullptr) steps->push_back({step, ops.size(), line_no});
      return;
    }
    TraceOp op;
    op.line = line_no;
    if (f[0] == "alloc") {
      op.kind = TraceOp::Kind::alloc;
    } else if (f[0] == "free") {
      op.kind = TraceOp::Kind::free;
    } else {
      fail(source, line_no, "op '" + printable(f[0], 60) + "' is not alloc, free or step");
    }
    if (field(1).empty()) fail(source, line_no, "id is empty; every row names an allocation");
    op.id = std::string(field(1));
    if (op.kind == TraceOp::Kind::alloc || !field(2).empty()) {
      if (field(2).empty()) fail(source, line_no, "alloc row has no bytes");
      op.bytes = parse_uint<std::size_t>(field(2), "bytes", source, line_no, kTraceHeader);
    }
    if (!field(3).empty()) {
      op.stream = parse_uint<StreamId>(field(3), "stream", source, line_no, kTraceHeader);
    }
    op.tag = std::string(field(4));
    ops.push_back(std::move(op));
  });
  if (!header_seen) fail(source, 1, "empty trace; expected the header '" + std::string(kTraceHeader) + "'");
  return ops;
}

std::vector<TraceOp> parse_rmm_log_csv(std::istream& in, const std::string& source) {
  std::vector<TraceOp> ops;
  std::map<std::string, StreamId, std::less<>> streams{{"0x0", kDefaultStream}, {"0", kDefaultStream}};
  bool header_seen = false;
  for_each_record(in, [&](std::string_view line, std::size_t line_no) {
    if (!header_seen) {
      if (line != kRmmHeader) {
        fail(source, line_no, "header is '" + printable(line, 60) + "'; expected '" + std::string(kRmmHeader) + "'");
      }
      header_seen = true;
      return;
    }
    const auto f = split_commas(line);
    if (f.size() != 6) {
      fail(source, line_no, std::to_string(f.size()) + " fields; expected 6 (" + std::string(kRmmHeader) + ")");
    }
    TraceOp op;
    op.line = line_no;
    const std::string_view action = f[2];
    if (action == "allocate") {
      op.kind = TraceOp::Kind::alloc;
    } else if (action == "free" || action == "deallocate") {
      op.kind = TraceOp::Kind::free;
    } else if (action == "allocate failure") {
      return;  // the request never held memory
    } else {
      fail(source, line_no,
           "Action '" + printable(action, 60) + "' is not allocate, free, deallocate or 'allocate failure'");
    }
    if (f[3].empty()) fail(source, line_no, "Pointer is empty");
    op.id = std::string(f[3]);
    op.bytes = parse_uint<std::size_t>(f[4], "Size", source, line_no, kRmmHeader);
    if (f[5].empty()) fail(source, line_no, "Stream is empty");
    auto it = streams.find(f[5]);
    if (it == streams.end()) {
      // Stream pointers become small ids in order of first appearance (0 stays the default).
      const auto next = static_cast<StreamId>(streams.size() - 1);
      it = streams.emplace(std::string(f[5]), next).first;
    }
    op.stream = it->second;
    ops.push_back(std::move(op));
  });
  if (!header_seen) fail(source, 1, "empty log; expected the header '" + std::string(kRmmHeader) + "'");
  return ops;
}

InternedTrace intern_trace(const std::vector<TraceOp>& ops) {
  InternedTrace trace;
  trace.ops.reserve(ops.size());
  trace.lines.reserve(ops.size());
  trace.tags.emplace_back();
  // Keys view the strings of `ops`, which outlive this function: no copy per row.
  std::unordered_map<std::string_view, std::uint32_t> ids, tags;
  auto index_of = [](std::unordered_map<std::string_view, std::uint32_t>& table, std::vector<std::string>& names,
                     std::string_view text, const char* what) {
    const auto [it, inserted] = table.try_emplace(text, static_cast<std::uint32_t>(names.size()));
    if (inserted) {
      if (names.size() == std::numeric_limits<std::uint32_t>::max()) {
        throw std::length_error(std::string("trace has more than 2^32 - 1 distinct ") + what);
      }
      names.emplace_back(text);
    }
    return it->second;
  };
  std::string_view last_tag;  // rows of one tag come in runs: skip the lookup then
  std::uint32_t last_tag_index = 0;
  for (const TraceOp& op : ops) {
    InternedTrace::Op out;
    out.alloc = op.kind == TraceOp::Kind::alloc;
    out.bytes = op.bytes;
    out.stream = op.stream;
    out.id = index_of(ids, trace.ids, op.id, "ids");
    if (out.alloc && !op.tag.empty()) {
      if (op.tag != last_tag) {
        last_tag = op.tag;
        last_tag_index = index_of(tags, trace.tags, op.tag, "tags");
      }
      out.tag = last_tag_index;
    }
    trace.ops.push_back(out);
    trace.lines.push_back(op.line);
  }
  return trace;
}

std::vector<TraceOp> read_trace_file(const std::string& path, std::vector<StepMark>* steps) {
  // A directory opens as a stream that reads nothing, which would pass for an empty trace.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    throw TraceFormatError(path + ": is a directory; expected a trace file (" + std::string(kTraceHeader) +
                           ", or RMM's log)");
  }
  // A FIFO without a writer would block the open forever, and a device (/dev/zero) never ends:
  // only a regular file (or a link to one) is read.
  if (std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec)) {
    throw TraceFormatError(path + ": is not a regular file (a pipe, device or special file); expected a trace file (" +
                           std::string(kTraceHeader) + ", or RMM's log)");
  }
  std::ifstream in(path);
  if (!in) throw TraceFormatError(path + ": cannot open trace file (missing or unreadable)");
  // The first record picks the parser; comments and blank lines may precede it.
  std::string raw, first;
  while (first.empty() && std::getline(in, raw)) {
    std::string_view line = raw;
    if (const auto hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    first = std::string(trim(line));
  }
  in.clear();
  in.seekg(0);
  if (first == kRmmHeader) return parse_rmm_log_csv(in, path);
  return parse_trace_csv(in, path, steps);
}

}  // namespace memtrain::memory
