// UTF-8 validation: offsets of the first bad byte, checked against CPython's strict decoder
// (UnicodeDecodeError.start of bytes.decode("utf-8")), an independent implementation of the
// RFC 3629 syntax; the byte sequences are the RFC's examples of ill-formed input.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "runtime/data/utf8.hpp"

namespace memtrain::data {
namespace {

struct Case {
  std::string bytes;
  std::optional<std::size_t> expected;  // from CPython 3.11
};

TEST(FirstInvalidUtf8, AcceptsWellFormedText) {
  EXPECT_EQ(first_invalid_utf8(""), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("In the beginning"), std::nullopt);
  // 2-, 3- and 4-byte sequences at the edges of their ranges: U+0080, U+07FF, U+0800, U+D7FF,
  // U+E000, U+FFFF, U+10000, U+10FFFF.
  EXPECT_EQ(first_invalid_utf8("\xC2\x80\xDF\xBF\xE0\xA0\x80\xED\x9F\xBF\xEE\x80\x80\xEF\xBF\xBF"
                               "\xF0\x90\x80\x80\xF4\x8F\xBF\xBF"),
            std::nullopt);
}

TEST(FirstInvalidUtf8, ReportsOffsetOfFirstBadSequenceLikeCPython) {
  const Case cases[] = {
      {"abc\x80"
       "def",
       3},                                           // lone continuation byte
      {"\xC0\xAF", 0},                               // overlong '/'
      {"ab\xE0\x80\xAF", 2},                         // overlong 3-byte
      {"x\xED\xA0\x80", 1},                          // surrogate U+D800
      {"\xF4\x90\x80\x80", 0},                       // above U+10FFFF
      {"\xF5\x80\x80\x80", 0},                       // invalid lead byte
      {"ab\xE2\x82", 2},                             // truncated at the end
      {"\xC3(", 0},                                  // bad continuation
      {"ok \xE2\x82\xAC\xF0\x9D\x84\x9E \xFF", 11},  // after valid multibyte text
      {"\xE2(\xA1", 0},
  };
  for (const auto& c : cases) {
    EXPECT_EQ(first_invalid_utf8(c.bytes), c.expected) << "input size " << c.bytes.size();
  }
}

}  // namespace
}  // namespace memtrain::data
