#pragma once
// UTF-8 well-formedness check, so a corpus with bad bytes is rejected with the exact offset
// instead of being silently altered by the tokenizer.
#include <cstddef>
#include <optional>
#include <string_view>

namespace memtrain::data {

// Returns the byte offset of the first byte that cannot start or continue a well-formed UTF-8
// sequence (RFC 3629, section 4 syntax: no overlong forms, no surrogates U+D800..U+DFFF, nothing
// above U+10FFFF, no truncated sequence), or nullopt when all of `text` is well-formed.
// For a sequence cut short, the offset is that of the lead byte.
std::optional<std::size_t> first_invalid_utf8(std::string_view text);

}  // namespace memtrain::data
