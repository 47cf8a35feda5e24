#include "tools/output_capture.h"

#include <gtest/gtest.h>

namespace mcpcell::tools {
namespace {

TEST(OutputCapture, KeepsEverythingWhenSmall) {
  OutputCapture c(16);
  c.Append("hello ");
  c.Append("world");
  EXPECT_FALSE(c.truncated());
  EXPECT_EQ(c.total(), 11u);
  EXPECT_EQ(c.Render(""), "hello world");
}

TEST(OutputCapture, KeepsHeadAndTailOfAFlood) {
  OutputCapture c(8);  // 4 head + 4 tail
  c.Append("abcd");
  for (int i = 0; i < 1000; ++i) c.Append("xxxxxxxxxx");
  c.Append("wxyz");
  EXPECT_TRUE(c.truncated());
  EXPECT_EQ(c.total(), 10008u);
  std::string r = c.Render("/workspace/.mcpcell/out");
  EXPECT_EQ(r.substr(0, 4), "abcd");
  EXPECT_EQ(r.substr(r.size() - 4), "wxyz");
  EXPECT_NE(r.find("10000 bytes omitted"), std::string::npos) << r;
  EXPECT_NE(r.find("/workspace/.mcpcell/out"), std::string::npos) << r;
  EXPECT_NE(r.find("the full output is in"), std::string::npos) << r;
  // A saved copy that was capped is not called the full output.
  r = c.Render("/workspace/.mcpcell/out", 5000);
  EXPECT_EQ(r.find("full output"), std::string::npos) << r;
  EXPECT_NE(r.find("the first 5000 of 10008 bytes are in /workspace/.mcpcell/out"),
            std::string::npos)
      << r;
}

TEST(OutputCapture, TailRingWrapsAcrossSmallChunks) {
  OutputCapture c(6);  // 3 head + 3 tail
  for (char ch : std::string("0123456789")) c.Append(std::string(1, ch));
  std::string r = c.Render("");
  EXPECT_EQ(r.substr(0, 3), "012");
  EXPECT_EQ(r.substr(r.size() - 3), "789");
  EXPECT_NE(r.find("4 bytes omitted"), std::string::npos) << r;
}

TEST(OutputCapture, RendersInvalidUtf8AsReplacementCharacters) {
  OutputCapture c(64);
  c.Append(std::string("ok\xff\xfe", 4));
  EXPECT_EQ(c.Render(""), "ok\xEF\xBF\xBD\xEF\xBF\xBD");
}

}  // namespace
}  // namespace mcpcell::tools
