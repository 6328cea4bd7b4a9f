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
    "a comma-separated list of kill_at_step=STEP, kill_in_checkpoint=BYTES (non-negative integers)";

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
    const std::string_view value = item.substr(eq + 1);
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
