#include "egress/address.h"

#include <gtest/gtest.h>

namespace mcpcell::egress {
namespace {

std::string Classify(const std::string& text, const std::vector<IpAddress>& own = {}) {
  auto ip = IpAddress::Parse(text);
  EXPECT_TRUE(ip.has_value()) << text;
  if (!ip) return "<unparsable>";
  return ClassifyAddress(*ip, own).value_or("public");
}

struct Row {
  const char* address;
  const char* reason;
};

TEST(Address, ClassificationTable) {
  const Row rows[] = {
      {"8.8.8.8", "public"},
      {"151.101.0.223", "public"},
      {"127.0.0.1", "loopback"},
      {"127.255.255.254", "loopback"},
      {"10.0.0.1", "private (RFC 1918)"},
      {"172.16.0.1", "private (RFC 1918)"},
      {"172.31.255.255", "private (RFC 1918)"},
      {"172.32.0.1", "public"},
      {"192.168.1.1", "private (RFC 1918)"},
      {"100.64.0.1", "carrier-grade NAT (100.64.0.0/10)"},
      {"100.127.255.255", "carrier-grade NAT (100.64.0.0/10)"},
      {"100.128.0.1", "public"},
      {"169.254.169.254", "link-local"},
      {"169.254.0.1", "link-local"},
      {"0.0.0.0", "unspecified"},
      {"0.1.2.3", "this network (0.0.0.0/8)"},
      {"224.0.0.1", "multicast"},
      {"239.255.255.250", "multicast"},
      {"255.255.255.255", "broadcast"},
      {"240.0.0.1", "reserved (240.0.0.0/4)"},
      {"192.0.0.170", "IETF protocol assignments (192.0.0.0/24)"},
      {"198.18.0.1", "benchmarking (198.18.0.0/15)"},
      {"::1", "loopback"},
      {"::", "unspecified"},
      {"fc00::1", "unique local (fc00::/7)"},
      {"fd12:3456::1", "unique local (fc00::/7)"},
      {"fe80::1", "link-local"},
      {"febf::1", "link-local"},
      {"fec0::1", "site-local (fec0::/10)"},
      {"ff02::1", "multicast"},
      {"100::1", "discard-only (100::/64)"},
      {"2606:4700::1111", "public"},
      {"::ffff:127.0.0.1", "loopback (IPv4-mapped 127.0.0.1)"},
      {"::ffff:169.254.169.254", "link-local (IPv4-mapped 169.254.169.254)"},
      {"::ffff:10.1.2.3", "private (RFC 1918) (IPv4-mapped 10.1.2.3)"},
      {"::ffff:8.8.8.8", "public"},
      {"64:ff9b::a9fe:a9fe", "link-local (NAT64 169.254.169.254)"},
      {"64:ff9b::7f00:1", "loopback (NAT64 127.0.0.1)"},
      {"64:ff9b::808:808", "public"},
      {"64:ff9b:1::c0a8:101", "private (RFC 1918) (local-use NAT64 192.168.1.1)"},
      {"2002:a9fe:a9fe::1", "link-local (6to4 169.254.169.254)"},
      {"2002:0a00:0001::", "private (RFC 1918) (6to4 10.0.0.1)"},
      {"2002:0808:0808::1", "public"},
      {"::7f00:1", "loopback (IPv4-compatible 127.0.0.1)"},
  };
  for (const Row& r : rows) EXPECT_EQ(Classify(r.address), r.reason) << r.address;
}

TEST(Address, HostsOwnAddresses) {
  std::vector<IpAddress> own = {*IpAddress::Parse("203.0.113.7"),
                                *IpAddress::Parse("2001:db8:5::7")};
  EXPECT_EQ(Classify("203.0.113.7", own), "the host's own address");
  EXPECT_EQ(Classify("2001:db8:5::7", own), "the host's own address");
  EXPECT_EQ(Classify("::ffff:203.0.113.7", own),
            "the host's own address (IPv4-mapped 203.0.113.7)");
  EXPECT_EQ(Classify("203.0.113.8", own), "public");
}

TEST(Address, HostAddressesReadsInterfaces) {
  // Every Linux host has loopback up in its network namespace.
  auto own = HostAddresses();
  EXPECT_NE(std::find(own.begin(), own.end(), IpAddress::V4(127, 0, 0, 1)), own.end());
}

TEST(Address, ParseIsStrict) {
  for (const char* bad : {"127.1", "0x7f.0.0.1", "017.0.0.1", "1.2.3.4.5", "256.0.0.1", "", "[::1]",
                          "fe80::1%eth0", " 1.2.3.4", "1.2.3.4 ", "::g"}) {
    EXPECT_FALSE(IpAddress::Parse(bad).has_value()) << bad;
  }
  EXPECT_EQ(IpAddress::Parse("FD00:0:0::1")->ToString(), "fd00::1");
  EXPECT_EQ(IpAddress::Parse("10.0.0.1")->ToString(), "10.0.0.1");
}

TEST(Address, InPrefix) {
  auto a = *IpAddress::Parse("10.1.2.3");
  EXPECT_TRUE(InPrefix(a, *IpAddress::Parse("10.0.0.0"), 8));
  EXPECT_TRUE(InPrefix(a, *IpAddress::Parse("10.1.2.0"), 23));
  EXPECT_FALSE(InPrefix(a, *IpAddress::Parse("10.1.4.0"), 23));
  EXPECT_TRUE(InPrefix(a, *IpAddress::Parse("0.0.0.0"), 0));
  EXPECT_FALSE(InPrefix(a, *IpAddress::Parse("::"), 0));  // families never mix
  EXPECT_FALSE(InPrefix(a, *IpAddress::Parse("10.0.0.0"), 33));
}

}  // namespace
}  // namespace mcpcell::egress
