#include "memory/printable.hpp"

#include <cstdio>

namespace memtrain {

std::string printable(std::string_view text, std::size_t max_chars) {
  std::string out;
  for (const char ch : text.substr(0, max_chars)) {
    const auto byte = static_cast<unsigned char>(ch);
    if (byte >= 0x20 && byte < 0x7f) {
      out += ch;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02x", byte);
      out += hex;
    }
  }
  if (text.size() > max_chars) out += "... (" + std::to_string(text.size()) + " bytes)";
  return out;
}

}  // namespace memtrain
