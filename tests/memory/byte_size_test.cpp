#include "memory/byte_size.hpp"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

namespace memtrain::memory {
namespace {

// IEC binary prefixes are powers of 1024, SI prefixes powers of 1000 (IEC 80000-13).
TEST(ParseByteSize, BinaryAndDecimalUnitsFollowTheirStandards) {
  EXPECT_EQ(parse_byte_size("4096"), 4096u);
  EXPECT_EQ(parse_byte_size("0"), 0u);
  EXPECT_EQ(parse_byte_size("12B"), 12u);
  EXPECT_EQ(parse_byte_size("64KiB"), 64u * 1024);
  EXPECT_EQ(parse_byte_size("512MiB"), 512ull << 20);
  EXPECT_EQ(parse_byte_size("40GiB"), 40ull << 30);
  EXPECT_EQ(parse_byte_size("2TiB"), 2ull << 40);
  EXPECT_EQ(parse_byte_size("1PiB"), 1ull << 50);
  EXPECT_EQ(parse_byte_size("4EiB"), 4ull << 60);  // replay --capacity's largest (README)
  EXPECT_EQ(parse_byte_size("2PB"), 2'000'000'000'000'000ull);
  EXPECT_EQ(parse_byte_size(format_byte_size(3ull << 50)), 3ull << 50);  // what is printed reads back
  EXPECT_EQ(parse_byte_size("40GB"), 40'000'000'000ull);
  EXPECT_EQ(parse_byte_size("1kB"), 1000u);
  EXPECT_EQ(parse_byte_size("1.5GiB"), 3ull << 29);
  EXPECT_EQ(parse_byte_size(" 8 MiB "), 8ull << 20);
  EXPECT_EQ(parse_byte_size("18446744073709551615"), 18446744073709551615ull);
}

TEST(ParseByteSize, RejectsBadTextNamingItAndTheExpectedForm) {
  for (const std::string bad : {"", "   ", "-1GiB", "abc", "GiB", "12 parsecs", "1.2.3MiB", "18446744073709551616",
                                "16EiB", "20000000TiB", "40gib"}) {
    try {
      parse_byte_size(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const std::invalid_argument& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("'" + bad + "'"), std::string::npos) << msg;
      EXPECT_NE(msg.find("expected"), std::string::npos) << msg;
    }
  }
}

TEST(FormatByteSize, PicksTheUnitThatKeepsTheNumberBelow1024) {
  EXPECT_EQ(format_byte_size(100), "100 B");
  EXPECT_EQ(format_byte_size(1536), "1.50 KiB");
  EXPECT_EQ(format_byte_size(3ull << 29), "1.50 GiB");
  EXPECT_EQ(parse_byte_size(format_byte_size(40ull << 30)), 40ull << 30);
}

}  // namespace
}  // namespace memtrain::memory
