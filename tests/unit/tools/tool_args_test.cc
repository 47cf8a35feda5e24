// ArgReader and the exec options run_code and run_command share: strict, and in the
// schema validator's words, so a handler refuses what the inputSchema would.
#include "tools/tool_args.h"

#include <gtest/gtest.h>

#include "tools/exec_args.h"

namespace mcpcell::tools {
namespace {

std::string Violations(const ArgReader& reader) {
  Status st = reader.Finish();
  return st ? "" : st.error().message;
}

TEST(ArgReader, ReadsTheFieldsItIsGiven) {
  const mcp::Json args{{"path", "a.txt"}, {"offset", 3}, {"append", true}};
  ArgReader reader(args, {"append", "limit", "offset", "path"});
  EXPECT_EQ(reader.String("path"), "a.txt");
  EXPECT_EQ(reader.OptionalInteger("offset"), 3);
  EXPECT_EQ(reader.OptionalInteger("limit"), std::nullopt);
  EXPECT_EQ(reader.OptionalBool("append"), true);
  EXPECT_TRUE(reader.Finish());
}

TEST(ArgReader, NamesAWrongTypeAsTheValidatorDoes) {
  const mcp::Json args{{"path", 7}};
  ArgReader reader(args, {"path"});
  EXPECT_EQ(reader.String("path"), "");
  EXPECT_EQ(Violations(reader), "arguments.path: expected string, got integer 7");
}

TEST(ArgReader, RefusesUnknownAndMissingFields) {
  const mcp::Json args{{"paht", "x"}};
  ArgReader reader(args, {"path", "recursive"});
  (void)reader.String("path");
  const std::string v = Violations(reader);
  EXPECT_NE(v.find("arguments.paht: unknown field (allowed: path, recursive)"), std::string::npos)
      << v;
  EXPECT_NE(v.find("arguments.path: is required but missing"), std::string::npos) << v;
}

TEST(ArgReader, NoFieldsAllowedSaysNone) {
  const mcp::Json args{{"x", 1}};
  ArgReader reader(args, {});
  EXPECT_EQ(Violations(reader), "arguments.x: unknown field (allowed: none)");
}

TEST(ArgReader, ChecksEachValueOfAStringMapAndArray) {
  const mcp::Json args{{"env", {{"A", "1"}, {"B", 2}}}, {"packages", {"x", false}}};
  ArgReader reader(args, {"env", "packages"});
  auto env = reader.OptionalStringMap("env");
  auto packages = reader.StringArray("packages");
  ASSERT_EQ(env.size(), 1u);
  EXPECT_EQ(env[0], (std::pair<std::string, std::string>{"A", "1"}));
  EXPECT_EQ(packages, std::vector<std::string>{"x"});
  const std::string v = Violations(reader);
  EXPECT_NE(v.find("arguments.env.B: expected string, got integer 2"), std::string::npos) << v;
  EXPECT_NE(v.find("arguments.packages[1]: expected string, got boolean false"), std::string::npos)
      << v;
}

TEST(ExecOptionArgs, RunCodeOffersNeitherCwdNorEnv) {
  const mcp::Json json{{"cwd", "/tmp"}, {"stdin", "x"}};
  ArgReader reader(json, {"stdin", "timeout_s"});
  ExecOptionArgs args = ReadExecOptionArgs(reader, /*cwd_and_env=*/false);
  EXPECT_EQ(args.stdin_data, "x");
  EXPECT_EQ(args.cwd, "");
  EXPECT_NE(Violations(reader).find("arguments.cwd: unknown field"), std::string::npos);
}

TEST(ExecOptionArgs, MakesCwdAbsoluteAndRefusesNulBytesAndBadNames) {
  ExecOptionArgs ok{.cwd = "src", .env = {{"A", "1"}}, .stdin_data = "", .timeout_s = 5};
  ASSERT_TRUE(CheckExecOptionArgs(ok));
  EXPECT_EQ(ok.cwd, "/workspace/src");
  EXPECT_EQ(EnvStrings(ok), std::vector<std::string>{"A=1"});

  ExecOptionArgs nul{.cwd = "",
                     .env = {{"A", std::string("x\0y", 3)}},
                     .stdin_data = "",
                     .timeout_s = std::nullopt};
  Status st = CheckExecOptionArgs(nul);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message.rfind("arguments.env.A: contains a NUL byte at offset 1", 0), 0u)
      << st.error().message;

  ExecOptionArgs name{
      .cwd = "", .env = {{"A=B", "1"}}, .stdin_data = "", .timeout_s = std::nullopt};
  st = CheckExecOptionArgs(name);
  ASSERT_FALSE(st);
  EXPECT_EQ(st.error().message, "arguments.env: invalid variable name \"A=B\"");

  ExecOptionArgs big{.cwd = "",
                     .env = {{"A", std::string(40 * 1024, 'x')}},
                     .stdin_data = "",
                     .timeout_s = std::nullopt};
  st = CheckExecOptionArgs(big);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("bytes in all, more than 32768"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::tools
