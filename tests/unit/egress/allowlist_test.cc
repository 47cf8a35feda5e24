#include "egress/allowlist.h"

#include <gtest/gtest.h>

namespace mcpcell::egress {
namespace {

Allowlist MustParse(const std::vector<std::string>& entries) {
  auto list = Allowlist::Parse(entries);
  EXPECT_TRUE(list.ok()) << list.error().message;
  return list.ok() ? list.value() : Allowlist();
}

std::string ParseError(const std::string& entry) {
  auto list = Allowlist::Parse({"pypi.org", entry});
  EXPECT_FALSE(list.ok()) << entry;
  return list.ok() ? "" : list.error().message;
}

std::string Matched(const Allowlist& list, const std::string& host, uint16_t port) {
  const AllowEntry* e = list.Match(host, port);
  return e ? e->text : "";
}

TEST(Allowlist, EmptyAllowsNothing) {
  Allowlist list;
  EXPECT_EQ(list.Match("pypi.org", 443), nullptr);
  EXPECT_EQ(list.Match("127.0.0.1", 80), nullptr);
}

TEST(Allowlist, ExactNameDefaultsToPorts80And443) {
  Allowlist list = MustParse({"pypi.org"});
  EXPECT_EQ(Matched(list, "pypi.org", 443), "pypi.org");
  EXPECT_EQ(Matched(list, "pypi.org", 80), "pypi.org");
  EXPECT_EQ(Matched(list, "pypi.org", 8080), "");
  EXPECT_EQ(Matched(list, "files.pypi.org", 443), "");
  EXPECT_EQ(Matched(list, "pypi.org.evil.com", 443), "");
  EXPECT_EQ(Matched(list, "evilpypi.org", 443), "");
}

TEST(Allowlist, NamesCompareCaseInsensitivelyWithoutTrailingDot) {
  Allowlist list = MustParse({"PyPI.org."});
  EXPECT_EQ(Matched(list, "pypi.ORG", 443), "PyPI.org.");
  EXPECT_EQ(Matched(list, "pypi.org.", 443), "PyPI.org.");
}

TEST(Allowlist, WildcardMatchesSubdomainsOnly) {
  Allowlist list = MustParse({"*.example.com"});
  EXPECT_EQ(Matched(list, "a.example.com", 443), "*.example.com");
  EXPECT_EQ(Matched(list, "a.b.example.com", 80), "*.example.com");
  EXPECT_EQ(Matched(list, "example.com", 443), "");
  EXPECT_EQ(Matched(list, "aexample.com", 443), "");
  EXPECT_EQ(Matched(list, "a.example.com", 22), "");
}

TEST(Allowlist, ExplicitPortReplacesTheDefaults) {
  Allowlist list = MustParse({"git.example.com:22", "*.example.org:8443"});
  EXPECT_EQ(Matched(list, "git.example.com", 22), "git.example.com:22");
  EXPECT_EQ(Matched(list, "git.example.com", 443), "");
  EXPECT_EQ(Matched(list, "x.example.org", 8443), "*.example.org:8443");
  EXPECT_EQ(Matched(list, "x.example.org", 443), "");
}

TEST(Allowlist, IpLiteralsAndCidrs) {
  Allowlist list = MustParse(
      {"10.0.0.5", "10.1.0.0/16:8080", "fd00::/8", "[2001:db8::1]:8443", "[2001:db8:1::/48]:443"});
  EXPECT_EQ(Matched(list, "10.0.0.5", 80), "10.0.0.5");
  EXPECT_EQ(Matched(list, "10.0.0.5", 8080), "");
  EXPECT_EQ(Matched(list, "10.1.200.3", 8080), "10.1.0.0/16:8080");
  EXPECT_EQ(Matched(list, "10.2.0.1", 8080), "");
  EXPECT_EQ(Matched(list, "fd12::1", 443), "fd00::/8");
  EXPECT_EQ(Matched(list, "FD12:0::1", 443), "fd00::/8");
  EXPECT_EQ(Matched(list, "fe80::1", 443), "");
  EXPECT_EQ(Matched(list, "2001:db8::1", 8443), "[2001:db8::1]:8443");
  EXPECT_EQ(Matched(list, "2001:db8:1:2::3", 443), "[2001:db8:1::/48]:443");
}

TEST(Allowlist, NamesDoNotMatchAddressesAndBack) {
  Allowlist list = MustParse({"pypi.org", "151.101.0.223"});
  EXPECT_EQ(Matched(list, "151.101.0.223", 443), "151.101.0.223");
  EXPECT_EQ(list.NamesAddress(*IpAddress::Parse("151.101.0.223"), 443)->text, "151.101.0.223");
  EXPECT_EQ(list.NamesAddress(*IpAddress::Parse("151.101.0.224"), 443), nullptr);
  // A name entry never names an address, so it can never lift the address rules.
  Allowlist names = MustParse({"localhost", "*.internal"});
  EXPECT_EQ(names.NamesAddress(*IpAddress::Parse("127.0.0.1"), 80), nullptr);
}

TEST(Allowlist, ErrorsNameTheEntry) {
  EXPECT_EQ(ParseError(""), "network.allow entry \"\": empty entry");
  EXPECT_EQ(ParseError("*."), "network.allow entry \"*.\": empty host name");
  EXPECT_EQ(ParseError("a.*.com"),
            "network.allow entry \"a.*.com\": '*' is allowed only as a whole first label "
            "(\"*.example.com\")");
  EXPECT_EQ(ParseError("*"),
            "network.allow entry \"*\": '*' is allowed only as a whole first "
            "label (\"*.example.com\")");
  EXPECT_EQ(ParseError("pypi.org:0"),
            "network.allow entry \"pypi.org:0\": port \"0\" is not 1..65535");
  EXPECT_EQ(ParseError("pypi.org:65536"),
            "network.allow entry \"pypi.org:65536\": port \"65536\" is not 1..65535");
  EXPECT_EQ(ParseError("pypi.org:"),
            "network.allow entry \"pypi.org:\": port \"\" is not 1..65535");
  EXPECT_EQ(ParseError("10.0.0.0/33"),
            "network.allow entry \"10.0.0.0/33\": prefix length 33 is longer than 32");
  EXPECT_EQ(ParseError("10.1.2.3/16"),
            "network.allow entry \"10.1.2.3/16\": host bits set in 10.1.2.3/16 (did you mean "
            "10.1.0.0/16?)");
  EXPECT_EQ(ParseError("10.0.0.0/x"),
            "network.allow entry \"10.0.0.0/x\": prefix length \"x\" is not a number");
  EXPECT_EQ(ParseError("bücher.de"),
            "network.allow entry \"bücher.de\": non-ASCII host names are not supported (write "
            "the xn-- form)");
  EXPECT_EQ(ParseError("[pypi.org]:443"),
            "network.allow entry \"[pypi.org]:443\": brackets are only for IPv6 addresses");
  EXPECT_EQ(ParseError("*.10.0.0.1"),
            "network.allow entry \"*.10.0.0.1\": a wildcard needs a domain, not an address");
  EXPECT_EQ(ParseError("127.1"),
            "network.allow entry \"127.1\": numeric host that is not a dotted-quad IPv4 address");
  EXPECT_EQ(ParseError("0x7f.0.0.1"),
            "network.allow entry \"0x7f.0.0.1\": numeric host that is not a dotted-quad IPv4 "
            "address");
  EXPECT_EQ(ParseError("-a.com"), "network.allow entry \"-a.com\": label starts or ends with '-'");
  EXPECT_EQ(ParseError("a..com"), "network.allow entry \"a..com\": empty label in host name");
  EXPECT_EQ(ParseError("http://pypi.org"),
            "network.allow entry \"http://pypi.org\": port \"//pypi.org\" is not 1..65535");
  EXPECT_EQ(ParseError("a b.com"),
            "network.allow entry \"a b.com\": control character or space in host");
  EXPECT_EQ(
      ParseError(std::string(64, 'a') + ".com"),
      "network.allow entry \"" + std::string(64, 'a') + ".com\": label longer than 63 characters");
}

TEST(Allowlist, XnNamesAndUnderscoresAreFine) {
  Allowlist list = MustParse({"xn--bcher-kva.de", "_dmarc.example.com"});
  EXPECT_EQ(Matched(list, "XN--BCHER-KVA.DE", 443), "xn--bcher-kva.de");
  EXPECT_EQ(Matched(list, "bücher.de", 443), "");
}

}  // namespace
}  // namespace mcpcell::egress
