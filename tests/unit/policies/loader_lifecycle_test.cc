// The pause keys (time.session_pause_idle, network.idle_connection_timeout): defaults,
// "off", the rule that a pause comes before idle expiry (in the file and after command-line
// overrides), and what the compiler passes on (the proxy's idle timeout, policy show).
#include <gtest/gtest.h>

#include <string>

#include "policies/compiler.h"
#include "policies/loader.h"

namespace mcpcell::policies {
namespace {

using std::chrono::seconds;

std::string ErrorOf(const std::string& text) {
  auto p = ParsePolicy(text, "p.toml");
  return p ? "(loaded)" : p.error().message;
}

TEST(LoaderPause, DefaultsToAMinuteAndFiveMinutesForConnections) {
  auto p = ParsePolicy("", "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->time.session_pause_idle, seconds(60));
  EXPECT_EQ(p->network.idle_connection_timeout, seconds(300));
}

TEST(LoaderPause, ReadsTheKeysAndOff) {
  auto p = ParsePolicy(
      "[time]\nsession_idle = \"10m\"\nsession_pause_idle = \"2s\"\n"
      "[network]\nidle_connection_timeout = \"30s\"\n",
      "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->time.session_pause_idle, seconds(2));
  EXPECT_EQ(p->network.idle_connection_timeout, seconds(30));
  auto off = ParsePolicy("[time]\nsession_pause_idle = \"off\"\n", "p.toml");
  ASSERT_TRUE(off) << off.error().message;
  EXPECT_EQ(off->time.session_pause_idle, seconds(0));
}

TEST(LoaderPause, TheDefaultIsOffWhenIdleExpiryComesFirst) {
  auto p = ParsePolicy("[time]\nsession_idle = \"30s\"\n", "p.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->time.session_pause_idle, seconds(0));
}

TEST(LoaderPause, APauseNotShorterThanIdleIsRefusedNamingTheKey) {
  EXPECT_EQ(ErrorOf("[time]\nsession_idle = \"1m\"\nsession_pause_idle = \"1m\"\n"),
            "p.toml:3:22: time.session_pause_idle: must be shorter than time.session_idle "
            "(1m >= 1m), or \"off\"");
  EXPECT_EQ(ErrorOf("[time]\nsession_pause_idle = \"soon\"\n"),
            "p.toml:2:22: time.session_pause_idle: expected a duration like \"30s\", \"15m\" "
            "or \"2h\", got \"soon\"");
  EXPECT_EQ(ErrorOf("[network]\nidle_connection_timeout = \"0s\"\n"),
            "p.toml:2:27: network.idle_connection_timeout: must be between 1s and 1d, got "
            "\"0s\"");
  EXPECT_EQ(ErrorOf("[time]\nsession_pause = \"1m\"\n"), ErrorOf("[time]\nsession_pause = 1\n"));
}

TEST(LoaderPause, OverridesKeepThePauseBeforeIdleExpiry) {
  Policy base;
  // --idle-timeout shorter than the policy's pause: idle expiry comes first, pause is off.
  auto shorter = ApplyOverrides(base, {.session_idle = seconds(30)}, "/tmp");
  ASSERT_TRUE(shorter) << shorter.error().message;
  EXPECT_EQ(shorter->time.session_pause_idle, seconds(0));
  // --pause-idle-timeout not shorter than the idle timeout: an error naming both.
  auto bad = ApplyOverrides(base, {.session_idle = seconds(30), .session_pause_idle = seconds(30)},
                            "/tmp");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message,
            "--pause-idle-timeout (30s) must be shorter than the idle timeout (30s)");
  auto good = ApplyOverrides(base, {.session_pause_idle = seconds(2)}, "/tmp");
  ASSERT_TRUE(good) << good.error().message;
  EXPECT_EQ(good->time.session_pause_idle, seconds(2));
}

TEST(LoaderPause, TheProxyGetsTheIdleConnectionTimeout) {
  Policy p;
  p.network.idle_connection_timeout = seconds(42);
  auto egress = CompileCellEgress(p);
  ASSERT_TRUE(egress) << egress.error().message;
  EXPECT_EQ(egress->idle_timeout, std::chrono::milliseconds(42000));
}

// What `mcpcell policy show` prints loads back to the same values ("off" included).
TEST(LoaderPause, PolicyShowRoundTrips) {
  for (seconds pause : {seconds(0), seconds(90)}) {
    Policy p;
    p.time.session_pause_idle = pause;
    p.network.idle_connection_timeout = seconds(120);
    auto back = ParsePolicy(DescribePolicy(p), "shown.toml");
    ASSERT_TRUE(back) << back.error().message;
    EXPECT_EQ(back->time.session_pause_idle, pause);
    EXPECT_EQ(back->network.idle_connection_timeout, seconds(120));
  }
}

}  // namespace
}  // namespace mcpcell::policies
