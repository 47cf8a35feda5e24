#include "audit/syslog.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include "test_util.h"

namespace mcpcell::audit {
namespace {

using nlohmann::json;

json Record() {
  return {{"seq", 3},
          {"time", "2026-12-02T10:00:00.250Z"},
          {"type", "exec.start"},
          {"tenant", "acme"},
          {"session", "s1"},
          {"cell", "c1"},
          {"prev", std::string(kZeroHash)},
          {"hash", std::string(64, 'b')}};
}

TEST(SyslogFormatTest, IsAnRfc5424MessageWithTheRecordAsJson) {
  json r = Record();
  EXPECT_EQ(FormatSyslog(r, "host1"),
            "<110>1 2026-12-02T10:00:00.250Z host1 mcpcell - exec.start - " + CanonicalJson(r));
  r["type"] = "auth.refused";
  EXPECT_EQ(FormatSyslog(r, "host1", 10).rfind("<85>1 ", 0), 0u);  // authpriv.notice
  EXPECT_NE(FormatSyslog(r, "").find(" - mcpcell - auth.refused - "), std::string::npos);
  r["type"] = "a type with spaces that is far longer than thirty-two characters";
  EXPECT_NE(FormatSyslog(r, "h").find(" a_type_with_spaces_that_is_far_l - "), std::string::npos);
}

TEST(SyslogSinkTest, SendsOneDatagramPerRecordOverAUnixSocket) {
  testing::TempDir dir;
  std::string path = dir.path() + "/log.sock";
  UniqueFd server(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strcpy(addr.sun_path, path.c_str());
  ASSERT_EQ(::bind(server.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  auto sink = SyslogSink::Connect("unix:" + path);
  ASSERT_TRUE(sink) << sink.error().message;
  ASSERT_TRUE((*sink)->Send(Record()));
  char buf[4096];
  ssize_t n = ::recv(server.get(), buf, sizeof buf, 0);
  ASSERT_GT(n, 0);
  std::string got(buf, static_cast<size_t>(n));
  EXPECT_EQ(got.rfind("<110>1 2026-12-02T10:00:00.250Z ", 0), 0u);
  EXPECT_EQ(got.substr(got.find(" - exec.start - ") + 16), CanonicalJson(Record()));
}

TEST(SyslogSinkTest, FramesMessagesByOctetCountOverTcp) {
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener.get(), 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  auto sink = SyslogSink::Connect("tcp:127.0.0.1:" + std::to_string(ntohs(addr.sin_port)));
  ASSERT_TRUE(sink) << sink.error().message;
  UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn.valid());
  ASSERT_TRUE((*sink)->Send(Record()));
  json second = Record();
  second["seq"] = 4;
  ASSERT_TRUE((*sink)->Send(second));
  const std::string m1 = FormatSyslog(Record(), ""), m2 = FormatSyslog(second, "");
  std::string got;
  char buf[4096];
  while (got.size() < m1.size() + m2.size() + 8) {
    ssize_t n = ::recv(conn.get(), buf, sizeof buf, 0);
    ASSERT_GT(n, 0);
    got.append(buf, static_cast<size_t>(n));
  }
  // "LEN SP MSG" twice; the host name differs from "" only in the header.
  size_t sp = got.find(' ');
  size_t len1 = std::stoul(got.substr(0, sp));
  std::string msg1 = got.substr(sp + 1, len1);
  EXPECT_EQ(msg1.substr(msg1.find(" mcpcell - ")), m1.substr(m1.find(" mcpcell - ")));
  std::string rest = got.substr(sp + 1 + len1);
  size_t sp2 = rest.find(' ');
  EXPECT_EQ(rest.size(), sp2 + 1 + std::stoul(rest.substr(0, sp2)));
  EXPECT_NE(rest.find(CanonicalJson(second)), std::string::npos);
  EXPECT_EQ((*sink)->failed_sends(), 0u);
}

TEST(SyslogSinkTest, BadTargetsAreErrorsThatNameThem) {
  auto bad = SyslogSink::Connect("udp:1.2.3.4:514");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("udp:1.2.3.4:514"), std::string::npos);
  auto gone = SyslogSink::Connect("unix:/nonexistent/log.sock");
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message.find("/nonexistent/log.sock"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::audit
