#include "memory/byte_size.hpp"

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>
#include <stdexcept>
#include <utility>

namespace memtrain::memory {
namespace {

constexpr std::string_view kExpected =
    "expected a non-negative number with an optional unit B, KiB, MiB, GiB, TiB, PiB, EiB, KB, MB, GB, TB, PB, EB "
    "(e.g. 40GiB, 512MiB, 4096)";

[[noreturn]] void fail(std::string_view text, std::string_view what) {
  throw std::invalid_argument("invalid byte size '" + std::string(text) + "': " + std::string(what) + "; " +
                              std::string(kExpected));
}

// Multiplier for a unit spelled as the user wrote it; 0 when unknown.
double unit_multiplier(std::string_view unit) {
  // The units format_byte_size prints are read back (PiB and EiB too: replay's --capacity goes
  // up to 4 EiB).
  static const std::array<std::pair<std::string_view, double>, 15> kUnits{{
      {"", 1.0},
      {"B", 1.0},
      {"KiB", 1024.0},
      {"MiB", 1024.0 * 1024},
      {"GiB", 1024.0 * 1024 * 1024},
      {"TiB", 1024.0 * 1024 * 1024 * 1024},
      {"PiB", 1024.0 * 1024 * 1024 * 1024 * 1024},
      {"EiB", 1024.0 * 1024 * 1024 * 1024 * 1024 * 1024},
      {"kB", 1e3},
      {"KB", 1e3},
      {"MB", 1e6},
      {"GB", 1e9},
      {"TB", 1e12},
      {"PB", 1e15},
      {"EB", 1e18},
  }};
  for (const auto& [name, mult] : kUnits) {
    if (name == unit) return mult;
  }
  return 0.0;
}

bool is_space(char c) { return c == ' ' || c == '\t'; }

}  // namespace

std::size_t parse_byte_size(std::string_view text) {
  std::string_view s = text;
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  if (s.empty()) fail(text, "empty");
  if (s.front() == '-') fail(text, "negative");

  std::size_t pos = 0;
  bool seen_digit = false, seen_dot = false;
  while (pos < s.size() && ((s[pos] >= '0' && s[pos] <= '9') || s[pos] == '.')) {
    if (s[pos] == '.') {
      if (seen_dot) fail(text, "more than one decimal point");
      seen_dot = true;
    } else {
      seen_digit = true;
    }
    ++pos;
  }
  if (!seen_digit) fail(text, "no number");
  const std::string number(s.substr(0, pos));
  std::string_view unit = s.substr(pos);
  while (!unit.empty() && is_space(unit.front())) unit.remove_prefix(1);
  const double mult = unit_multiplier(unit);
  if (mult == 0.0) fail(text, "unknown unit '" + std::string(unit) + "'");

  if (!seen_dot && mult == 1.0) {
    // Plain byte counts stay exact integers (no detour through double).
    std::size_t value = 0;
    for (char c : number) {
      const std::size_t digit = static_cast<std::size_t>(c - '0');
      if (value > (std::numeric_limits<std::size_t>::max() - digit) / 10) {
        fail(text, "does not fit in 64 bits");
      }
      value = value * 10 + digit;
    }
    return value;
  }
  // Fractions of a unit round to the nearest byte ("1.5KiB" = 1536).
  const double value = std::floor(std::stod(number) * mult + 0.5);
  // 2^64 is exactly representable; anything at or above it does not fit.
  if (!(value < 18446744073709551616.0)) fail(text, "does not fit in 64 bits");
  return static_cast<std::size_t>(value);
}

std::string format_byte_size(std::size_t bytes) {
  static constexpr std::array<const char*, 7> kUnits{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  std::size_t u = 0;
  while (v >= 1024.0 && u + 1 < kUnits.size()) {
    v /= 1024.0;
    ++u;
  }
  char buf[48];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, kUnits[u]);
  }
  return buf;
}

}  // namespace memtrain::memory
