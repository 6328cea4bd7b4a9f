#include "runtime/core/printable.hpp"

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

std::string json_error_text(const char* what) {
  std::string_view text = what;
  if (text.starts_with("[json.exception.")) {
    if (const auto end = text.find("] "); end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return printable(text);
}

}  // namespace memtrain
