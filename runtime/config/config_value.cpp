#include "runtime/config/config_value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <system_error>

#include "memory/byte_size.hpp"

namespace memtrain::train {

namespace {

void require_text(std::string_view text) {
  if (text.empty()) throw ValueError("has no value");
}

}  // namespace

long long parse_integer(std::string_view text, long long lo, long long hi) {
  require_text(text);
  long long v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) throw ValueError("out of range");
  if (ec != std::errc() || end != text.data() + text.size()) throw ValueError("not an integer");
  if (v < lo || v > hi) throw ValueError("out of range");
  return v;
}

std::uint64_t parse_uint64(std::string_view text) {
  require_text(text);
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec == std::errc::result_out_of_range) throw ValueError("out of range");
  if (ec != std::errc() || end != text.data() + text.size()) {
    throw ValueError("not a non-negative integer");
  }
  return v;
}

double parse_real(std::string_view text, double lo, bool lo_open, double hi, bool hi_open) {
  require_text(text);
  double v = 0;
  // from_chars rejects a leading '+', which YAML allows; accept it.
  std::string_view digits = text.front() == '+' ? text.substr(1) : text;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (ec == std::errc::result_out_of_range) throw ValueError("out of range");
  if (ec != std::errc() || end != digits.data() + digits.size()) throw ValueError("not a number");
  if (!std::isfinite(v)) throw ValueError("not a finite number");
  const bool below = lo_open ? v <= lo : v < lo;
  const bool above = hi_open ? v >= hi : v > hi;
  if (below || above) throw ValueError("out of range");
  return v;
}

bool parse_bool(std::string_view text) {
  require_text(text);
  if (text == "true" || text == "True" || text == "TRUE") return true;
  if (text == "false" || text == "False" || text == "FALSE") return false;
  throw ValueError("not a boolean");
}

std::string parse_choice(std::string_view text, const std::vector<std::string>& allowed,
                         const std::vector<std::string>& not_built) {
  require_text(text);
  if (std::find(allowed.begin(), allowed.end(), text) != allowed.end()) return std::string(text);
  if (std::find(not_built.begin(), not_built.end(), text) != not_built.end()) {
    throw ValueError("not supported yet");
  }
  throw ValueError("unknown value");
}

std::size_t parse_size(std::string_view text) {
  require_text(text);
  try {
    return memory::parse_byte_size(text);
  } catch (const std::invalid_argument&) {
    throw ValueError("not a size");
  }
}

std::string format_real(double value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general);
  return std::string(buf, end);
}

std::string format_real(float value) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::general);
  return std::string(buf, end);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace memtrain::train
