// The process and python tools' argument checks, and run_command's background ones: each
// refusal names the field and what to do, before any cell is made (the tests have none).
#include <gtest/gtest.h>

#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/test_client.h"
#include "tools/cell_tools.h"
#include "tools/process_output.h"
#include "tools/process_table.h"

namespace mcpcell::tools {
namespace {

mcp::ServerOptions Options() {
  mcp::ServerOptions o;
  o.name = "process-tool-test";
  o.version = "1";
  return o;
}

class ProcessToolTest : public ::testing::Test {
 protected:
  ProcessToolTest() {
    env_.cells = &cells_;
    env_.processes = &processes_;
    EXPECT_TRUE(RegisterCellTools(server_, env_));
    client_.Initialize();
  }

  // The text of a tools/call result that must be an error.
  std::string Refusal(const std::string& tool, mcp::Json args) {
    mcp::Json r = client_.Request("tools/call", {{"name", tool}, {"arguments", std::move(args)}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    mcp::Json result = r.value("result", mcp::Json::object());
    EXPECT_TRUE(result.value("isError", false)) << result.dump();
    return result["content"][0].value("text", "");
  }

  // No cell is ever made: a tool that tried to lease one would fail with this.
  sandbox::CellSessionManager cells_{[](const std::string&) -> Result<sandbox::CellSpec> {
                                       return Error::Msg("no cells in this test");
                                     },
                                     {}};
  ProcessTable processes_;
  ToolEnv env_;
  mcp::Server server_{Options()};
  mcp::MemoryClient client_{server_};
};

TEST_F(ProcessToolTest, UnknownActionIsNamedWithTheActionsThereAre) {
  // The input schema's enum answers first (the handler's own check says the same).
  EXPECT_NE(Refusal("process", {{"action", "kill"}, {"id", "p1"}})
                .find("arguments.action: must be one of [\"list\",\"output\",\"write\",\"signal\","
                      "\"wait\"], got string \"kill\""),
            std::string::npos);
}

TEST_F(ProcessToolTest, UnknownProcessIdSaysWhereTheIdsAre) {
  EXPECT_EQ(Refusal("process", {{"action", "output"}, {"id", "p42"}}),
            "arguments.id: no background process \"p42\" in this session; action=list shows "
            "the ids");
}

TEST_F(ProcessToolTest, BadCursorIsRefused) {
  EXPECT_NE(Refusal("process", {{"action", "output"}, {"id", "p1"}, {"cursor", -5}})
                .find("arguments.cursor: must be >= 0, got -5"),
            std::string::npos);
  EXPECT_NE(Refusal("process", {{"action", "output"}, {"id", "p1"}, {"cursor", "x"}})
                .find("arguments.cursor"),
            std::string::npos);
}

TEST_F(ProcessToolTest, FieldOfAnotherActionNamesTheActionsThatTakeIt) {
  EXPECT_EQ(Refusal("process", {{"action", "output"}, {"id", "p1"}, {"data", "x"}}),
            "arguments.data: not taken by action=output (only by write)");
  EXPECT_EQ(Refusal("process", {{"action", "list"}, {"id", "p1"}}),
            "arguments.id: not taken by action=list (only by output, write, signal, wait)");
}

TEST_F(ProcessToolTest, MissingIdAndEmptyWriteAndUnknownSignalAreRefused) {
  EXPECT_NE(Refusal("process", {{"action", "wait"}}).find("arguments.id: required for action=wait"),
            std::string::npos);
  EXPECT_EQ(Refusal("process", {{"action", "write"}, {"id", "p1"}}),
            "arguments.data: action=write needs data, or eof=true to close stdin");
  EXPECT_NE(Refusal("process", {{"action", "signal"}, {"id", "p1"}, {"signal", "SIGBOGUS"}})
                .find("arguments.signal: unknown signal \"SIGBOGUS\""),
            std::string::npos);
  EXPECT_NE(Refusal("process", {{"action", "list"}, {"extra", 1}}).find("extra"),
            std::string::npos);
}

TEST_F(ProcessToolTest, RunCommandBackgroundRefusesTimeoutAndStdin) {
  EXPECT_NE(Refusal("run_command", {{"command", "sleep 1"}, {"background", true}, {"timeout_s", 5}})
                .find("arguments.timeout_s: a background process has no timeout"),
            std::string::npos);
  EXPECT_NE(Refusal("run_command", {{"command", "cat"}, {"background", true}, {"stdin", "x"}})
                .find("arguments.stdin: not with background=true; start the process, then give "
                      "it input with process action=write"),
            std::string::npos);
}

TEST_F(ProcessToolTest, PythonNeedsCodeOrReset) {
  EXPECT_EQ(Refusal("python", mcp::Json::object()),
            "arguments.code: required (or reset=true alone to start afresh)");
  EXPECT_NE(Refusal("python", {{"code", "1"}, {"timeout_s", 0}})
                .find("arguments.timeout_s: must be >= 1, got 0"),
            std::string::npos);
}

TEST(IncompleteUtf8TailTest, CountsOnlyACutCharacter) {
  EXPECT_EQ(IncompleteUtf8Tail(""), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("abc"), 0u);
  EXPECT_EQ(IncompleteUtf8Tail("a\xc3\xa9"), 0u);     // é whole
  EXPECT_EQ(IncompleteUtf8Tail("a\xc3"), 1u);         // é cut after its lead byte
  EXPECT_EQ(IncompleteUtf8Tail("a\xe2\x82"), 2u);     // € cut
  EXPECT_EQ(IncompleteUtf8Tail("\xf0\x9f\x98"), 3u);  // an emoji cut
  EXPECT_EQ(IncompleteUtf8Tail("\xf0\x9f\x98\x80"), 0u);
}

}  // namespace
}  // namespace mcpcell::tools
