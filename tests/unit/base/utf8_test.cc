#include "base/utf8.h"

#include <gtest/gtest.h>

#include <string>

namespace mcpcell {
namespace {

TEST(Utf8, ReplacesInvalidSequences) {
  EXPECT_EQ(ToValidUtf8("plain"), "plain");
  EXPECT_EQ(ToValidUtf8("\xC3\xA9"), "\xC3\xA9");                                  // é
  EXPECT_EQ(ToValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(ToValidUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // cut
}

TEST(Utf8, DetectsBinary) {
  EXPECT_FALSE(LooksBinary("hello\nworld\n"));
  EXPECT_FALSE(LooksBinary("caf\xC3\xA9"));
  EXPECT_TRUE(LooksBinary(std::string("a\0b", 3)));
  EXPECT_TRUE(LooksBinary("\xff\xfe text"));
}

}  // namespace
}  // namespace mcpcell
