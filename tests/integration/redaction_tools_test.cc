// Redaction at the tool level with real cells (issue 26): run_command's result, its
// progress notifications and the full output it saves in the cell show `[secret NAME]`
// where the program printed a secret's value, plain or base64-encoded.
#include <gtest/gtest.h>

#include "mcp/server.h"
#include "mcp/test_client.h"
#include "tests/integration/cell_fixture.h"
#include "tools/cell_tools.h"

namespace mcpcell::tools {
namespace {

using sandbox::CellSessionManager;
using sandbox::CellSessionOptions;
using namespace sandbox::celltest;

const std::string kValue = "tok-9f8e7d6c5b4a";
const std::string kLabel = "[secret API_TOKEN]";

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

class RedactionToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    CellSessionOptions o;
    o.create = TestCreateOptions();
    manager_ = std::make_unique<CellSessionManager>(ProbeFactory(state_), std::move(o));
    env_.cells = manager_.get();
    env_.config.keep_bytes_per_stream = 2048;  // so that a test's output gets saved
    env_.config.progress_min_interval = std::chrono::milliseconds(20);
    env_.secret_values = [this](const std::string& key) {
      asked_key_ = key;
      return SecretValues{{"API_TOKEN", kValue}};
    };
    mcp::ServerOptions so;
    so.name = "redaction-test";
    so.version = "1";
    server_ = std::make_unique<mcp::Server>(so);
    ASSERT_TRUE(RegisterCellTools(*server_, env_).ok());
    client_ = std::make_unique<mcp::MemoryClient>(*server_);
    client_->Initialize();
  }
  void TearDown() override {
    client_.reset();
    server_.reset();
    manager_.reset();
  }

  mcp::Json RunCommand(const std::string& command, mcp::Json meta = nullptr) {
    mcp::Json params = {{"name", "run_command"}, {"arguments", {{"command", command}}}};
    if (!meta.is_null()) params["_meta"] = meta;
    return client_->Request("tools/call", params, std::chrono::seconds(60));
  }

  TempStateDir state_;
  std::unique_ptr<CellSessionManager> manager_;
  ToolEnv env_;
  std::string asked_key_;
  std::unique_ptr<mcp::Server> server_;
  std::unique_ptr<mcp::MemoryClient> client_;
};

TEST_F(RedactionToolsTest, AValuePrintedPlainAndBase64ShowsTheSecretsNameTwice) {
  mcp::Json r =
      RunCommand("printf '%s\\n' \"" + kValue + "\"; printf '%s' \"" + kValue + "\" | base64");
  ASSERT_TRUE(r.contains("result")) << r.dump();
  std::string text = r["result"]["content"][0]["text"];
  std::string out = r["result"]["structuredContent"]["stdout"];
  EXPECT_EQ(Count(out, kLabel), 2u) << out;
  EXPECT_EQ(Count(text, kLabel), 2u) << text;
  EXPECT_EQ(r.dump().find(kValue), std::string::npos) << r.dump();
  EXPECT_EQ(asked_key_, client_->session()->id());
}

TEST_F(RedactionToolsTest, ProgressAndTheSavedFullOutputAreRedactedToo) {
  // The value is split across two writes (two chunks, likely two progress messages), and
  // the output outgrows what the result keeps, so it is saved in the cell.
  std::string half = kValue.substr(0, 7), rest = kValue.substr(7);
  mcp::Json r = RunCommand("printf '%s' '" + half + "'; sleep 0.3; printf '%s\\n' '" + rest +
                               "'; yes x | head -c 4000; echo; echo " + kValue,
                           {{"progressToken", "p1"}});
  ASSERT_TRUE(r.contains("result")) << r.dump();
  mcp::Json s = r["result"]["structuredContent"];
  ASSERT_TRUE(s["stdout_truncated"].get<bool>()) << s.dump();
  EXPECT_EQ(r.dump().find(kValue), std::string::npos);
  std::string progress;
  for (const mcp::Json& n : client_->Notifications("notifications/progress"))
    progress += n["params"].value("message", "");
  EXPECT_EQ(Count(progress, kLabel), 2u) << progress;
  EXPECT_EQ(progress.find(half), std::string::npos) << progress;
  // The saved copy itself: counted by grep in the cell (counts are not redacted).
  std::string path = s["full_stdout_path"];
  ASSERT_FALSE(path.empty());
  mcp::Json g =
      RunCommand("grep -c -F '" + half + "' " + path + "; grep -c -F '" + kLabel + "' " + path);
  EXPECT_EQ(g["result"]["structuredContent"]["stdout"], "0\n2\n") << g.dump();
}

}  // namespace
}  // namespace mcpcell::tools
