#pragma once
// User text as an error message quotes it: one printable line, never the raw bytes of a binary
// file, an escape sequence or a megabyte-long value. In memory/, the bottom layer, so that the
// trace reader and every layer above share it.
#include <cstddef>
#include <string>
#include <string_view>

namespace memtrain {

// `text` with every byte outside printable ASCII (0x20-0x7e) written as \xNN, cut after
// `max_chars` characters of the input with "... (N bytes)" appended. Throws nothing but
// std::bad_alloc.
std::string printable(std::string_view text, std::size_t max_chars = 200);

}  // namespace memtrain
