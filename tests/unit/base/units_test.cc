#include "base/units.h"

#include <gtest/gtest.h>

namespace mcpcell {
namespace {

TEST(Units, Sizes) {
  EXPECT_EQ(ParseSize("512MiB"), 512ull << 20);
  EXPECT_EQ(ParseSize("1GiB"), 1ull << 30);
  EXPECT_EQ(ParseSize("64KiB"), 64ull << 10);
  EXPECT_EQ(ParseSize("100MB"), 100000000ull);
  EXPECT_EQ(ParseSize("4096"), 4096ull);
  EXPECT_EQ(ParseSize("7B"), 7ull);
  for (const char* bad :
       {"", "lots", "1.5GiB", "-1MiB", "1 GiB", "1gib", "GiB", "1GiBx", "99999999999999999999",
        "20000000TiB", "1mb", "1Mi", "1KK", "M", " 1G", "1G ", "+1G", "20000000T"}) {
    EXPECT_FALSE(ParseSize(bad).has_value()) << bad;
  }
}

TEST(Units, SizesInTheFlagsShortFormAreBinaryInEitherCase) {
  EXPECT_EQ(ParseSize("512M"), 512ull << 20);
  EXPECT_EQ(ParseSize("512m"), 512ull << 20);
  EXPECT_EQ(ParseSize("2G"), 2ull << 30);
  EXPECT_EQ(ParseSize("2g"), 2ull << 30);
  EXPECT_EQ(ParseSize("1k"), 1024ull);
  EXPECT_EQ(ParseSize("1K"), 1024ull);
  EXPECT_EQ(ParseSize("3T"), 3ull << 40);
  EXPECT_EQ(ParseSize("3t"), 3ull << 40);
  EXPECT_EQ(ParseSize("1048576"), 1048576ull);
  EXPECT_EQ(ParseSize("0"), 0ull);  // the caller decides whether zero is a size
}

TEST(Units, Durations) {
  EXPECT_EQ(ParseDuration("30s"), std::chrono::seconds(30));
  EXPECT_EQ(ParseDuration("15m"), std::chrono::seconds(900));
  EXPECT_EQ(ParseDuration("2h"), std::chrono::seconds(7200));
  EXPECT_EQ(ParseDuration("1d"), std::chrono::seconds(86400));
  for (const char* bad : {"", "30", "1.5h", "-1s", "soon", "1ms", "h", "1 h"}) {
    EXPECT_FALSE(ParseDuration(bad).has_value()) << bad;
  }
}

TEST(Units, FormatRoundTrips) {
  EXPECT_EQ(FormatSize(1ull << 30), "1GiB");
  EXPECT_EQ(FormatSize(512ull << 20), "512MiB");
  EXPECT_EQ(FormatSize(1000), "1000B");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(7200)), "2h");
  EXPECT_EQ(FormatDuration(std::chrono::seconds(90)), "90s");
  for (uint64_t v : {1ull, 1023ull, 1024ull, 3ull << 20, 5ull << 40}) {
    EXPECT_EQ(ParseSize(FormatSize(v)), v);
  }
}

}  // namespace
}  // namespace mcpcell
