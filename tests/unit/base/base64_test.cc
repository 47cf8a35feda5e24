#include "base/base64.h"

#include <gtest/gtest.h>

#include <string>

namespace mcpcell {
namespace {

TEST(Base64, RoundTripsEveryLength) {
  std::string data;
  for (int i = 0; i < 300; ++i) {
    auto decoded = Base64Decode(Base64Encode(data));
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    EXPECT_EQ(*decoded, data);
    data += static_cast<char>(i * 37);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
}

TEST(Base64, RefusesBadInputAndSaysWhere) {
  auto bad = Base64Decode("ab*d");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("character 2"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(Base64Decode("abc").ok());   // not a multiple of 4
  EXPECT_FALSE(Base64Decode("ab=c").ok());  // data after padding
  EXPECT_FALSE(Base64Decode("a===").ok());  // too much padding
  auto ws = Base64Decode("Zm9v\nYmFy");
  ASSERT_TRUE(ws.ok());
  EXPECT_EQ(*ws, "foobar");
}

}  // namespace
}  // namespace mcpcell
