#include "runtime/checkpoint/fault_injection.hpp"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "runtime/core/errors.hpp"

namespace memtrain::checkpoint {
namespace {

constexpr const char* kExpected =
    "a comma-separated list of kill_at_step=STEP[:RANK], kill_in_checkpoint=BYTES (non-negative integers)";

[[noreturn]] void bad(const std::string& text, const std::string& what) {
  throw ConfigError("MEMTRAIN_FAULT=" + text + ": " + what + "; expected " + kExpected);
}

}  // namespace

FaultPlan parse_fault_plan(const std::string& text) {
  FaultPlan plan;
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) {
      std::string what(item);
      what += " has no value";
      bad(text, what);
    }
    const std::string name(item.substr(0, eq));
    std::string_view value = item.substr(eq + 1);
    // kill_at_step=STEP:RANK: only that world rank (a rank killed, not the whole job).
    std::optional<std::int64_t> rank;
    if (const auto colon = value.find(':'); colon != std::string_view::npos && name == "kill_at_step") {
      const std::string_view r = value.substr(colon + 1);
      std::int64_t parsed = -1;
      const auto [rend, rec] = std::from_chars(r.data(), r.data() + r.size(), parsed);
      if (rec != std::errc{} || rend != r.data() + r.size() || r.empty() || parsed < 0) {
        std::string what = "kill_at_step rank ";
        what += r;
        what += " is not a non-negative integer";
        bad(text, what);
      }
      rank = parsed;
      value = value.substr(0, colon);
    }
    std::int64_t v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (ec != std::errc{} || end != value.data() + value.size() || value.empty() || v < 0) {
      std::string what = name;
      what += " = ";
      what += value;
      what += " is not a non-negative integer";
      bad(text, what);
    }
    if (name == "kill_at_step") {
      plan.kill_at_step = v;
      plan.kill_rank = rank;
    } else if (name == "kill_in_checkpoint") {
      plan.kill_in_checkpoint = v;
    } else {
      std::string what = "unknown fault ";
      what += name;
      bad(text, what);
    }
  }
  return plan;
}

FaultPlan fault_plan_from_environment() {
  const char* v = std::getenv("MEMTRAIN_FAULT");
  return v ? parse_fault_plan(v) : FaultPlan{};
}

void kill_self() {
  ::kill(::getpid(), SIGKILL);
  std::_Exit(137);  // not reached: SIGKILL cannot be caught
}

}  // namespace memtrain::checkpoint
