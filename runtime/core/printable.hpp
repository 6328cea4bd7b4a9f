#pragma once
// Error text from libraries, made printable (printable() itself lives in memory/printable.hpp).
#include <string>

#include "memory/printable.hpp"  // printable()

namespace memtrain {

// An nlohmann::json exception's what() without the library's tag ("[json.exception.parse_error.101]
// parse error at line 2, column 1: ..." -> "parse error at line 2, column 1: ..."), printable.
std::string json_error_text(const char* what);

}  // namespace memtrain
