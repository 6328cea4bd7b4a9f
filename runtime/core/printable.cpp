#include "runtime/core/printable.hpp"

namespace memtrain {

std::string json_error_text(const char* what) {
  std::string_view text = what;
  if (text.starts_with("[json.exception.")) {
    if (const auto end = text.find("] "); end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  return printable(text);
}

}  // namespace memtrain
