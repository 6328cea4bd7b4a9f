#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace memtrain::memory {

// Parses a size in bytes as users write it: "40GiB", "512MiB", "1.5GiB", "4096", "64KiB",
// also "40GB"/"512MB"/"1KB" (decimal, powers of 1000) and a bare "B" suffix. Whitespace between
// number and unit is allowed; units are case-sensitive as IEC 80000-13 writes them, except that
// "kB"/"KB" are both accepted. Throws std::invalid_argument naming the text and the expected
// form for an empty string, a negative or non-numeric number, an unknown unit, or a value that
// does not fit in std::size_t.
std::size_t parse_byte_size(std::string_view text);

// "1.50 GiB", "512.00 MiB", "100 B": the binary unit that keeps the number below 1024.
std::string format_byte_size(std::size_t bytes);

}  // namespace memtrain::memory
