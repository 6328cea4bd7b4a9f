#include "runtime/checkpoint/fault_injection.hpp"

#include <signal.h>
#include <unistd.h>

#include <charconv>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "runtime/core/errors.hpp"

namespace memtrain::checkpoint {
namespace {

constexpr const char* kExpected =
    "a comma-separated list of kill_at_step=STEP[:RANK], kill_in_checkpoint=BYTES, nan_grad=STEP:RANK[:COUNT], "
    "flip_param=STEP:RANK (non-negative integers)";

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
    // STEP, STEP:RANK or STEP:RANK:COUNT, each a non-negative integer.
    std::vector<std::int64_t> parts;
    std::string_view rest_value = value;
    while (true) {
      const auto colon = rest_value.find(':');
      const std::string_view part = rest_value.substr(0, colon);
      std::int64_t v = 0;
      const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
      if (ec != std::errc{} || end != part.data() + part.size() || part.empty() || v < 0) {
        std::string what = name;
        what += " = ";
        what += value;
        what += " is not a non-negative integer";
        if (parts.size() > 0) what += " (in " + std::string(part) + ")";
        bad(text, what);
      }
      parts.push_back(v);
      if (colon == std::string_view::npos) break;
      rest_value = rest_value.substr(colon + 1);
    }
    const auto arity = [&](std::size_t lo, std::size_t hi, const char* form) {
      if (parts.size() < lo || parts.size() > hi) {
        std::string what = name;
        what += " = ";
        what += value;
        what += "; expected ";
        what += form;
        bad(text, what);
      }
    };
    if (name == "kill_at_step") {
      arity(1, 2, "STEP or STEP:RANK");
      plan.kill_at_step = parts[0];
      if (parts.size() > 1) plan.kill_rank = parts[1];
    } else if (name == "kill_in_checkpoint") {
      arity(1, 1, "BYTES");
      plan.kill_in_checkpoint = parts[0];
    } else if (name == "nan_grad") {
      arity(2, 3, "STEP:RANK or STEP:RANK:COUNT");
      plan.nan_grad = RankFault{parts[0], parts[1], parts.size() > 2 ? parts[2] : 1};
      if (plan.nan_grad->count < 1) {
        std::string what = "nan_grad = ";
        what += value;
        what += ": COUNT 0 injects nothing";
        bad(text, what);
      }
    } else if (name == "flip_param") {
      arity(2, 2, "STEP:RANK");
      plan.flip_param = RankFault{parts[0], parts[1], 1};
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

void check_fault_ranks(const FaultPlan& plan, int world_size) {
  const auto check = [&](const char* fault, std::optional<std::int64_t> rank) {
    if (rank && (*rank < 0 || *rank >= world_size)) {
      throw ConfigError(std::string("MEMTRAIN_FAULT: ") + fault + " names rank " + std::to_string(*rank) +
                        "; the job has ranks 0.." + std::to_string(world_size - 1));
    }
  };
  check("kill_at_step", plan.kill_rank);
  if (plan.nan_grad) check("nan_grad", plan.nan_grad->rank);
  if (plan.flip_param) check("flip_param", plan.flip_param->rank);
}

void kill_self() {
  ::kill(::getpid(), SIGKILL);
  std::_Exit(137);  // not reached: SIGKILL cannot be caught
}

}  // namespace memtrain::checkpoint
