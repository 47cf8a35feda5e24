// Which `/bin/sh -c LINE` lines cell init may run without the shell
// (sandbox/init/simple_command.h): every rule is checked on both sides of its edge, since a
// wrong "yes" changes what a command does and a wrong "no" only costs time. The exec
// itself, against dash in a real cell, is tests/integration/exec_test.cc
// (DirectSimpleCommandDoesWhatTheShellDoes).
#include "sandbox/init/simple_command.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

namespace mcpcell::sandbox {
namespace {

using Words = std::vector<std::string>;

TEST(DashSimpleCommand, PlainWordsSeparatedByBlanksAreTheArgv) {
  struct Row {
    const char* line;
    Words words;
  } rows[] = {
      {"ls", {"ls"}},
      {"ls -la /tmp", {"ls", "-la", "/tmp"}},
      {"  python3\tx.py  --n=3 ", {"python3", "x.py", "--n=3"}},
      {"./build/run a,b c:d e+f g@h 50% -_.",
       {"./build/run", "a,b", "c:d", "e+f", "g@h", "50%", "-_."}},
      {"/usr/bin/env", {"/usr/bin/env"}},
      // Builtins whose programs do exactly the same with no arguments.
      {"true", {"true"}},
      {" false ", {"false"}},
      // A reserved word or builtin name is plain anywhere but first.
      {"env if echo cd", {"env", "if", "echo", "cd"}},
  };
  for (const Row& row : rows) {
    auto words = DashSimpleCommandWords(row.line);
    ASSERT_TRUE(words.has_value()) << row.line;
    EXPECT_EQ(*words, row.words) << row.line;
  }
}

TEST(DashSimpleCommand, AnythingTheShellWouldDoMoreWithGoesToTheShell) {
  const char* shell_lines[] = {
      "",
      "   ",
      "\t",
      // quoting, expansion, tilde, globbing
      "echo 'a'",
      "ls \"x\"",
      "ls a\\ b",
      "ls $HOME",
      "ls ${x}",
      "ls `pwd`",
      "ls ~",
      "ls ~/x",
      "ls *.py",
      "ls a?",
      "ls [ab]",
      "ls a]",
      // separators, pipes, redirections, background, grouping, comments, negation
      "true; false",
      "true && x",
      "a | b",
      "a > f",
      "a < f",
      "a 2>&1",
      "a &",
      "(a)",
      "{ a; }",
      "a # c",
      "! a",
      "a\nb",
      "a\rb",
      // assignments
      "X=1",
      "X=1 env",
      "=x",
      // reserved words first
      "if",
      "then",
      "for",
      "while",
      "until",
      "case",
      "do",
      "done",
      "fi",
      "elif",
      "else",
      "esac",
      "in",
      // builtins first, and true/false with arguments (/usr/bin/true --help prints help)
      "echo hi",
      "echo -e x",
      "printf x",
      "pwd",
      "cd /",
      "test -e x",
      "[",
      "kill -9 1",
      "exec ls",
      "exit 3",
      "export A",
      "command ls",
      "type ls",
      "umask",
      "ulimit -n",
      "wait",
      ".",
      ":",
      "read x",
      "set -e",
      "trap x",
      "times",
      "hash",
      "getopts",
      "local",
      "alias",
      "true --help",
      "false --version",
      "true x",
      // bytes outside the plain set: non-ASCII, control characters (NUL below)
      "ls caf\xc3\xa9",
      "ls \x01",
  };
  for (const char* line : shell_lines) {
    EXPECT_FALSE(DashSimpleCommandWords(line).has_value()) << "[" << line << "]";
  }
  EXPECT_FALSE(DashSimpleCommandWords(std::string_view("ls \0x", 5)).has_value());
}

TEST(DashBuiltinStandIn, OnlyBareTrueAndFalseHaveOne) {
  EXPECT_EQ(DashBuiltinStandIn("true"), "/usr/bin/true");
  EXPECT_EQ(DashBuiltinStandIn("false"), "/usr/bin/false");
  EXPECT_EQ(DashBuiltinStandIn("ls"), "");
  EXPECT_EQ(DashBuiltinStandIn("echo"), "");
  EXPECT_EQ(DashBuiltinStandIn("/usr/bin/true"), "");
}

TEST(DashKeepsEnvironment, OnlyShellNamesOnceEachAndAPathToSearch) {
  const std::string program = "ls";
  EXPECT_TRUE(DashKeepsEnvironment({"PATH=/usr/bin:/bin", "HOME=/w", "_x1=", "A=a=b"}, program));
  // dash drops names that are not shell names, and resets IFS, OPTIND and PPID.
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "A-B=1"}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "1A=1"}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "=1"}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "IFS=x"}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "OPTIND=3"}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "PPID=3"}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "NOEQUALS"}, program));
  // The same name twice: which one dash keeps is its business.
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin", "A=1", "A=2"}, program));
  // A name without '/' is searched in PATH: it must be set, non-empty, without '%'.
  EXPECT_FALSE(DashKeepsEnvironment({"HOME=/w"}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH="}, program));
  EXPECT_FALSE(DashKeepsEnvironment({"PATH=/usr/bin%builtin:/bin"}, program));
  // A path is not searched: no PATH needed.
  EXPECT_TRUE(DashKeepsEnvironment({"HOME=/w"}, "./run"));
  EXPECT_TRUE(DashKeepsEnvironment({}, "/usr/bin/env"));
}

// Against the host's dash itself: a child shell kills itself with each signal that ends a
// process, and the outer dash reports it.
TEST(DashSignalReport, SaysWhatDashSays) {
  if (!IsDash("/bin/sh")) GTEST_SKIP() << "/bin/sh here is not dash";
  for (int sig = 1; sig < 32; ++sig) {
    if (sig == SIGCHLD || sig == SIGCONT || sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN ||
        sig == SIGTTOU || sig == SIGURG || sig == SIGWINCH)
      continue;  // they do not end a process
    const std::string cmd =
        "/bin/sh -c '/bin/sh -c \"kill -" + std::to_string(sig) + " \\$\\$\"' 2>&1; echo \" $?\"";
    FILE* p = ::popen(cmd.c_str(), "r");
    ASSERT_NE(p, nullptr);
    std::string out;
    char buffer[256];
    while (size_t n = std::fread(buffer, 1, sizeof buffer, p)) out.append(buffer, n);
    ::pclose(p);
    EXPECT_EQ(out, DashSignalReport(sig, false) + " " + std::to_string(128 + sig) + "\n")
        << "signal " << sig;
  }
  EXPECT_EQ(DashSignalReport(SIGSEGV, true), "Segmentation fault (core dumped)\n");
}

TEST(IsDash, FollowsSymlinksToTheFileName) {
  char dir[] = "/tmp/mcpcell-isdash-XXXXXX";
  ASSERT_NE(::mkdtemp(dir), nullptr);
  const std::string d = dir;
  const std::string dash = d + "/dash", sh = d + "/sh", bash = d + "/bash", bsh = d + "/bsh";
  for (const std::string& f : {dash, bash}) {
    FILE* out = std::fopen(f.c_str(), "w");
    ASSERT_NE(out, nullptr);
    std::fclose(out);
  }
  ASSERT_EQ(::symlink("dash", sh.c_str()), 0);
  ASSERT_EQ(::symlink(bash.c_str(), bsh.c_str()), 0);
  EXPECT_TRUE(IsDash(dash.c_str()));
  EXPECT_TRUE(IsDash(sh.c_str()));
  EXPECT_FALSE(IsDash(bash.c_str()));
  EXPECT_FALSE(IsDash(bsh.c_str()));
  EXPECT_FALSE(IsDash((d + "/missing").c_str()));
  for (const std::string& f : {sh, bsh, dash, bash}) ::unlink(f.c_str());
  ::rmdir(dir);
}

}  // namespace
}  // namespace mcpcell::sandbox
