#pragma once
// Strict parsing of one YAML scalar (or --set value) into a typed config value. Each parser
// throws ValueError with what was wrong; the loader adds where (file:line or the --set
// argument), the key, the value and what was expected, so every message has one shape.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace memtrain::train {

// What was wrong with a value, without the where/key/expected that the loader adds.
class ValueError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// An integer in [lo, hi], written in decimal without sign tricks ("128", "-3"). Rejects
// "1.5", "1e3", "abc", "" and values outside the range.
long long parse_integer(std::string_view text, long long lo, long long hi);

// An unsigned 64-bit integer (seeds).
std::uint64_t parse_uint64(std::string_view text);

// A finite real number ("1e-3", "0.1", "5"). Bounds are inclusive unless the *_open flag is
// set. Rejects nan, inf and non-numbers.
double parse_real(std::string_view text, double lo, bool lo_open, double hi, bool hi_open);

// "true" or "false" (also "True", "TRUE", "False", "FALSE": the YAML 1.2 core schema).
bool parse_bool(std::string_view text);

// One of `allowed`. A value in `not_built` is a known feature that this build does not have
// yet: ValueError "not supported yet". Anything else: "unknown value".
std::string parse_choice(std::string_view text, const std::vector<std::string>& allowed,
                         const std::vector<std::string>& not_built = {});

// A size in bytes as users write it ("512MiB", "1GiB", "1048576"); memory::parse_byte_size.
std::size_t parse_size(std::string_view text);

// The shortest text that parses back to exactly `value` (std::to_chars, %g style: "0.0001",
// "1e-12"), for canonical YAML and messages.
std::string format_real(double value);
std::string format_real(float value);

// Levenshtein distance, for "did you mean" suggestions.
std::size_t edit_distance(std::string_view a, std::string_view b);

}  // namespace memtrain::train
