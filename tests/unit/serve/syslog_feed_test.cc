// The trail's live feed: a bad spec is refused naming it; a good one delivers each record
// to a collector listening on a Unix datagram socket.
#include "serve/syslog_feed.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "audit/trail.h"
#include "base/unique_fd.h"

namespace mcpcell::serve {
namespace {

TEST(SyslogFeedTest, BadSpecsAreRefusedNamingThem) {
  for (const char* spec : {"", "udp:1.2.3.4:514", "unix:", "unix:dev/log", "tcp:host", "tcp::514",
                           "tcp:host:0", "tcp:host:65536", "tcp:host:x"}) {
    auto feed = MakeSyslogFeed(spec);
    ASSERT_FALSE(feed) << spec;
    EXPECT_EQ(feed.error().message.rfind("audit syslog \"" + std::string(spec) + "\": ", 0), 0u)
        << feed.error().message;
  }
  auto missing = MakeSyslogFeed("unix:/nonexistent-mcpcell-test/log");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("/nonexistent-mcpcell-test/log"), std::string::npos);
}

TEST(SyslogFeedTest, EveryTrailRecordReachesAUnixDatagramCollector) {
  std::string templ = ::testing::TempDir() + "syslog-feed-XXXXXX";
  ASSERT_TRUE(mkdtemp(templ.data()));
  const std::string dir = templ;
  const std::string socket_path = dir + "/log";
  UniqueFd collector(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  ASSERT_GE(collector.get(), 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, socket_path.c_str(), sizeof addr.sun_path - 1);
  ASSERT_EQ(::bind(collector.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);

  auto feed = MakeSyslogFeed("unix:" + socket_path);
  ASSERT_TRUE(feed) << feed.error().message;
  {
    audit::TrailOptions options;
    options.dir = dir + "/audit";
    auto trail = audit::Trail::Open(options);
    ASSERT_TRUE(trail) << trail.error().message;
    (*trail)->AddSink((*feed)->AsRecordSink());
    ASSERT_TRUE((*trail)->Append("auth.refused", "", "", "", {{"peer", "10.1.2.3:999"}}));
  }
  char buf[4096];
  ssize_t n = ::recv(collector.get(), buf, sizeof buf, MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  std::string message(buf, static_cast<size_t>(n));
  EXPECT_EQ(message.rfind("<109>1 ", 0), 0u) << message;  // log audit, notice
  EXPECT_NE(message.find(" mcpcell - auth.refused - {"), std::string::npos) << message;
  EXPECT_NE(message.find("\"peer\":\"10.1.2.3:999\""), std::string::npos) << message;
  // The trail's Close wrote a checkpoint through the feed too.
  n = ::recv(collector.get(), buf, sizeof buf, MSG_DONTWAIT);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(buf, static_cast<size_t>(n)).find(" checkpoint - "), std::string::npos);
  EXPECT_EQ((*feed)->failed_sends(), 0u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace mcpcell::serve
