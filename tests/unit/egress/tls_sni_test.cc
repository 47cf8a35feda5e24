#include "egress/tls_sni.h"

#include <gtest/gtest.h>

#include "tls_test_util.h"

namespace mcpcell::egress {
namespace {

using Kind = SniResult::Kind;

// Re-frames one handshake record's payload into records of at most `chunk` bytes: a
// legitimate (if unusual) way for a client to send its ClientHello.
std::string Refragment(const std::string& record, size_t chunk) {
  std::string payload = record.substr(5), out;
  for (size_t pos = 0; pos < payload.size(); pos += chunk) {
    std::string part = payload.substr(pos, chunk);
    out += record.substr(0, 3);
    out.push_back(static_cast<char>(part.size() >> 8));
    out.push_back(static_cast<char>(part.size() & 0xff));
    out += part;
  }
  return out;
}

TEST(TlsSni, RealClientHello) {
  std::string hello = testing::ClientHelloBytes("Files.PythonHosted.org");
  ASSERT_GT(hello.size(), 100u);
  SniResult r = ExtractSni(hello);
  EXPECT_EQ(r.kind, Kind::kName) << r.value;
  EXPECT_EQ(r.value, "Files.PythonHosted.org");
}

TEST(TlsSni, EveryPrefixNeedsMore) {
  std::string hello = testing::ClientHelloBytes("pypi.org");
  for (size_t n = 0; n < hello.size(); ++n) {
    SniResult r = ExtractSni(std::string_view(hello).substr(0, n));
    ASSERT_EQ(r.kind, Kind::kNeedMore) << "prefix " << n << ": " << r.value;
  }
  // Trailing bytes (the client's next flight) do not disturb the result.
  EXPECT_EQ(ExtractSni(hello + "trailing").value, "pypi.org");
}

TEST(TlsSni, ClientHelloSplitAcrossRecords) {
  std::string hello = testing::ClientHelloBytes("pypi.org");
  std::string split = Refragment(hello, 50);
  EXPECT_GT(split.size(), hello.size());
  SniResult r = ExtractSni(split);
  EXPECT_EQ(r.kind, Kind::kName) << r.value;
  EXPECT_EQ(r.value, "pypi.org");
  EXPECT_EQ(ExtractSni(std::string_view(split).substr(0, split.size() - 1)).kind, Kind::kNeedMore);
}

TEST(TlsSni, NoServerName) {
  SniResult r = ExtractSni(testing::ClientHelloBytes(""));
  EXPECT_EQ(r.kind, Kind::kNoSni) << r.value;
}

TEST(TlsSni, NotTls) {
  SniResult ssh = ExtractSni("SSH-2.0-OpenSSH_9.2\r\n");
  EXPECT_EQ(ssh.kind, Kind::kInvalid);
  EXPECT_EQ(ssh.value, "not a TLS handshake (first bytes 0x53 0x53 at offset 0)");
  SniResult one = ExtractSni("G");
  EXPECT_EQ(one.kind, Kind::kInvalid);
  EXPECT_EQ(one.value, "not a TLS handshake (first byte 0x47)");
  // SSLv2-style hello, application data record, TLS version major 2.
  EXPECT_EQ(ExtractSni(std::string("\x80\x2e\x01\x03\x01", 5)).kind, Kind::kInvalid);
  EXPECT_EQ(ExtractSni(std::string("\x17\x03\x03\x00\x05hello", 10)).kind, Kind::kInvalid);
  EXPECT_EQ(ExtractSni(std::string("\x16\x02\x00\x00\x05hello", 10)).kind, Kind::kInvalid);
}

TEST(TlsSni, MalformedHandshakes) {
  std::string hello = testing::ClientHelloBytes("pypi.org");
  // Not a ClientHello (ServerHello type 2).
  std::string server_hello = hello;
  server_hello[5] = 2;
  EXPECT_EQ(ExtractSni(server_hello).value, "first handshake message is not a ClientHello");
  // Zero-length record.
  EXPECT_EQ(ExtractSni(std::string("\x16\x03\x01\x00\x00", 5)).value, "bad TLS record length");
  // A handshake length far beyond the cap.
  std::string huge = hello;
  huge[6] = 0x7f;
  EXPECT_EQ(ExtractSni(huge).value, "ClientHello larger than 32768 bytes");
  // Extension block length that overruns the message.
  std::string bad = hello;
  size_t body = 5 + 4 + 2 + 32;
  size_t sid = static_cast<uint8_t>(bad[body]);
  size_t suites_at = body + 1 + sid;
  size_t suites =
      (static_cast<uint8_t>(bad[suites_at]) << 8) | static_cast<uint8_t>(bad[suites_at + 1]);
  size_t comp_at = suites_at + 2 + suites;
  size_t ext_at = comp_at + 1 + static_cast<uint8_t>(bad[comp_at]);
  bad[ext_at] = static_cast<char>(0xff);
  EXPECT_EQ(ExtractSni(bad).kind, Kind::kInvalid);
  // An endless stream of tiny records never grows past the cap without a verdict.
  std::string stream;
  while (stream.size() < kMaxClientHello + 100)
    stream += std::string("\x16\x03\x01\x00\x01\x01", 6);
  EXPECT_EQ(ExtractSni(stream).kind, Kind::kInvalid);
}

TEST(TlsSni, RandomBytesNeverCrash) {
  std::string hello = testing::ClientHelloBytes("pypi.org");
  uint32_t seed = 1;
  for (int i = 0; i < 2000; ++i) {
    std::string m = hello;
    for (int k = 0; k < 3; ++k) {
      seed = seed * 1103515245 + 12345;
      size_t pos = 5 + (seed >> 8) % (m.size() - 5);
      m[pos] = static_cast<char>(seed >> 24);
    }
    SniResult r = ExtractSni(m);
    if (r.kind == Kind::kName) {
      EXPECT_LE(r.value.size(), m.size());
    }
  }
}

}  // namespace
}  // namespace mcpcell::egress
