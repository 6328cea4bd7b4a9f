#pragma once
// Readable names for parameterised tests: a case's own text (a config key, a message) made into
// a GoogleTest name, so a failure reads `ConfigErrors/NotSupportedYet.X/device_cuda_2` and not
// `64-byte object <E0-F7 ...>`.
#include <cctype>
#include <cstddef>
#include <string>
#include <string_view>

namespace memtrain::testing {

// `text` with every run of characters other than [A-Za-z0-9] replaced by one '_', trimmed of
// leading and trailing '_', at most `max_chars` long, then "_<index>" so that two cases whose
// texts agree still get distinct names.
inline std::string case_name(std::string_view text, std::size_t index, std::size_t max_chars = 60) {
  std::string out;
  for (char ch : text) {
    if (std::isalnum(static_cast<unsigned char>(ch))) {
      out += ch;
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
    if (out.size() >= max_chars) break;
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  return (out.empty() ? std::string("case") : out) + "_" + std::to_string(index);
}

}  // namespace memtrain::testing
