// hosts(5) tables for `serve --egress-hosts`: comments, several names and lines per
// address, normal form of names, strict errors with file:line.
#include "egress/hosts_file.h"

#include <gtest/gtest.h>

namespace mcpcell::egress {
namespace {

TEST(HostsFile, ReadsAddressesNamesAndComments) {
  auto t = ParseHostsFile(
      "# pinned registries\n"
      "\n"
      "203.0.113.2   Allowed.Test a.wild.test.  # trailing comment\n"
      "2001:db8::2\tallowed.test\n"
      "203.0.113.2 allowed.test\n",
      "hosts");
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->size(), 2u);
  const auto& allowed = t->at("allowed.test");
  ASSERT_EQ(allowed.size(), 2u);  // the repeated pair once, in file order
  EXPECT_EQ(allowed[0].ToString(), "203.0.113.2");
  EXPECT_EQ(allowed[1].ToString(), "2001:db8::2");
  EXPECT_EQ(t->at("a.wild.test")[0].ToString(), "203.0.113.2");
}

TEST(HostsFile, RefusesWhatItCannotReadWithFileAndLine) {
  auto err = [](const char* text) {
    auto t = ParseHostsFile(text, "pins");
    return t.ok() ? std::string("(ok)") : t.error().message;
  };
  EXPECT_EQ(err("\n10.0.0.300 x.test\n"), "pins:2: \"10.0.0.300\" is not an IP address");
  EXPECT_EQ(err("10.0.0.3\n"), "pins:1: \"10.0.0.3\" has no names after it");
  EXPECT_EQ(err("10.0.0.3 10.0.0.4\n"), "pins:1: \"10.0.0.4\" is an address, not a name");
  EXPECT_NE(err("10.0.0.3 bad/name\n").find("pins:1: \"bad/name\": "), std::string::npos);
  EXPECT_EQ(err("# only a comment\n"), "(ok)");
}

TEST(HostsFile, LoadNamesTheMissingFile) {
  auto t = LoadHostsFile("/nonexistent/hosts");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.error().message.find("open(\"/nonexistent/hosts\")"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::egress
