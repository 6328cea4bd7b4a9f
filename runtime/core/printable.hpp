#pragma once
// User text as an error message quotes it: one printable line, never the raw bytes of a binary
// file, an escape sequence or a megabyte-long value.
#include <cstddef>
#include <string>
#include <string_view>

namespace memtrain {

// `text` with every byte outside printable ASCII (0x20-0x7e) written as \xNN, cut after
// `max_chars` characters of the input with "... (N bytes)" appended. Throws nothing but
// std::bad_alloc.
std::string printable(std::string_view text, std::size_t max_chars = 200);

// An nlohmann::json exception's what() without the library's tag ("[json.exception.parse_error.101]
// parse error at line 2, column 1: ..." -> "parse error at line 2, column 1: ..."), printable.
std::string json_error_text(const char* what);

}  // namespace memtrain
