// The sd_listen_fds(3) environment as `mcpcell serve` reads it: one socket for this
// process is fd 3; a parent's variables are left to it; every malformed value is refused
// with the variable, its value and what it should be.
#include "serve/socket_activation.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace mcpcell::serve {
namespace {

std::string Refusal(const char* pid, const char* fds, pid_t self = 42) {
  auto r = ParseListenEnvironment(pid, fds, self);
  EXPECT_FALSE(r.ok()) << "LISTEN_PID=" << (pid ? pid : "(unset)")
                       << " LISTEN_FDS=" << (fds ? fds : "(unset)") << " was accepted";
  return r.ok() ? "" : r.error().message;
}

TEST(SocketActivation, NoVariablesMeanNoSocket) {
  auto r = ParseListenEnvironment(nullptr, nullptr, 42);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->fd, -1);
  EXPECT_EQ(r->ignored, "");
}

TEST(SocketActivation, OneSocketForThisProcessIsFd3) {
  auto r = ParseListenEnvironment("42", "1", 42);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->fd, 3);
}

TEST(SocketActivation, AnotherProcessesSocketsAreLeftAndSaidSo) {
  auto r = ParseListenEnvironment("41", "1", 42);
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->fd, -1);
  EXPECT_NE(r->ignored.find("LISTEN_PID=41 is not this process (42)"), std::string::npos)
      << r->ignored;
}

TEST(SocketActivation, BadListenFdsValuesAreRefusedByName) {
  EXPECT_NE(Refusal("42", "").find("LISTEN_FDS=\"\": not a number"), std::string::npos);
  EXPECT_NE(Refusal("42", "one").find("LISTEN_FDS=\"one\": not a number"), std::string::npos);
  EXPECT_NE(Refusal("42", "-1").find("LISTEN_FDS=\"-1\": not a number"), std::string::npos);
  EXPECT_NE(Refusal("42", " 1").find("LISTEN_FDS=\" 1\""), std::string::npos);
  EXPECT_NE(Refusal("42", "0").find("LISTEN_FDS=0: systemd passed no socket"), std::string::npos);
  const std::string two = Refusal("42", "2");
  EXPECT_NE(two.find("LISTEN_FDS=2: mcpcell takes exactly one"), std::string::npos) << two;
  EXPECT_NE(two.find("single ListenStream="), std::string::npos) << two;
  EXPECT_NE(Refusal("42", "99999999999999999999").find("not a number"), std::string::npos);
}

TEST(SocketActivation, BadOrMissingListenPidIsRefused) {
  const std::string missing = Refusal(nullptr, "1");
  EXPECT_NE(missing.find("LISTEN_FDS=\"1\" without LISTEN_PID"), std::string::npos) << missing;
  EXPECT_NE(Refusal("abc", "1").find("LISTEN_PID=\"abc\": not a process id"), std::string::npos);
  EXPECT_NE(Refusal("0", "1").find("LISTEN_PID=\"0\": not a process id"), std::string::npos);
  EXPECT_NE(Refusal("42", nullptr).find("LISTEN_PID=42 without LISTEN_FDS"), std::string::npos);
}

TEST(SocketActivation, TakeUnsetsTheVariablesWhoeverTheyWereFor) {
  ::setenv("LISTEN_PID", "1", 1);  // pid 1: never this test
  ::setenv("LISTEN_FDS", "1", 1);
  ::setenv("LISTEN_FDNAMES", "http", 1);
  auto r = TakeActivatedSocket();
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->fd, -1);
  EXPECT_EQ(std::getenv("LISTEN_PID"), nullptr);
  EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr);
  EXPECT_EQ(std::getenv("LISTEN_FDNAMES"), nullptr);
}

}  // namespace
}  // namespace mcpcell::serve
