// JsonLinesFile: every line of the audit file parses, even when a write is cut short (disk
// full). RLIMIT_FSIZE stands in for a full disk: a write that crosses the limit is short,
// the next one fails with EFBIG (SIGXFSZ ignored), without privileges or a small tmpfs.
#include "egress/audit_log.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace mcpcell::egress {
namespace {

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

class AuditLogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-audit-test-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    path_ = dir_ + "/audit/egress.jsonl";
  }
  void TearDown() override {
    ::unlink(path_.c_str());
    ::rmdir((dir_ + "/audit").c_str());
    ::rmdir(dir_.c_str());
  }
  std::string dir_;
  std::string path_;
};

TEST_F(AuditLogTest, ShortWriteLeavesNoTornLine) {
  auto file = JsonLinesFile::Open(path_);
  ASSERT_TRUE(file) << file.error().message;
  (*file)->Write({{"host", "first.example"}, {"decision", "deny"}});
  const off_t first_size = static_cast<off_t>(Lines(path_).at(0).size() + 1);
  // In a child (the limit and the signal disposition are per process): room for 10 more
  // bytes, then a record of ~100 bytes (short write), then one that cannot start (EFBIG).
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit lim = {static_cast<rlim_t>(first_size + 10),
                         static_cast<rlim_t>(first_size + 10)};
    if (::setrlimit(RLIMIT_FSIZE, &lim) != 0) ::_exit(2);
    (*file)->Write({{"host", "second.example"}, {"reason", std::string(80, 'x')}});
    (*file)->Write({{"host", "third.example"}});
    bool reported = (*file)->failed_writes() == 2 && !(*file)->last_error().empty();
    ::_exit(reported ? 0 : 3);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "2: setrlimit failed, 3: failures not counted/reported";
  // Space again: the next record starts on a line of its own.
  (*file)->Write({{"host", "fourth.example"}});
  std::vector<std::string> lines = Lines(path_);
  ASSERT_EQ(lines.size(), 2u);
  for (const std::string& line : lines) {
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "torn line: " << line;
  }
  EXPECT_EQ(nlohmann::json::parse(lines[1])["host"], "fourth.example");
}

}  // namespace
}  // namespace mcpcell::egress
