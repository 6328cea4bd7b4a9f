// printable() and json_error_text(): user text in a message is one printable line.
#include "runtime/core/printable.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace memtrain {
namespace {

TEST(Printable, EscapesEveryByteOutsidePrintableAscii) {
  EXPECT_EQ(printable("plain text ~!"), "plain text ~!");
  EXPECT_EQ(printable(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(printable("\xff\x1b[2J\n\x7f"), "\\xff\\x1b[2J\\x0a\\x7f");
}

TEST(Printable, CutsLongTextAndSaysHowLongItWas) {
  EXPECT_EQ(printable(std::string(10, 'x'), 10), std::string(10, 'x'));
  EXPECT_EQ(printable(std::string(11, 'x'), 10), std::string(10, 'x') + "... (11 bytes)");
  // The limit counts input bytes, not their escaped form.
  EXPECT_EQ(printable(std::string(3, '\x01'), 2), "\\x01\\x01... (3 bytes)");
}

TEST(JsonErrorText, DropsTheLibrarysTagAndKeepsItsReason) {
  try {
    const auto parsed = nlohmann::json::parse("{\"x\":");
    FAIL() << "parsed a truncated document: " << parsed.dump();
  } catch (const nlohmann::json::exception& e) {
    const std::string text = json_error_text(e.what());
    EXPECT_EQ(text.find("[json.exception"), std::string::npos) << text;
    EXPECT_EQ(text.rfind("parse error at line 1, column 6", 0), 0u) << text;
  }
  EXPECT_EQ(json_error_text("no tag here"), "no tag here");
}

}  // namespace
}  // namespace memtrain
