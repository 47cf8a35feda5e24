// upload_archive and download_archive without cells: the arguments they refuse (each error
// names the field, and comes before any cell is leased), the strict reading of the archive
// helper's output (archive_report.h), and the toolset that offers them.
#include <gtest/gtest.h>

#include "base/base64.h"
#include "mcp/server.h"
#include "mcp/session.h"
#include "mcp/test_client.h"
#include "policies/policy.h"
#include "tools/archive_report.h"
#include "tools/cell_tools.h"
#include "tools/image_type.h"

namespace mcpcell::tools {
namespace {

mcp::ServerOptions Options() {
  mcp::ServerOptions o;
  o.name = "archive-tools-test";
  o.version = "1";
  return o;
}

class ArchiveToolsTest : public ::testing::Test {
 protected:
  ArchiveToolsTest() {
    env_.cells = &cells_;
    env_.config.max_write_bytes = 1024;
    EXPECT_TRUE(RegisterCellTools(server_, env_));
    client_.Initialize();
  }
  mcp::Json Call(const std::string& tool, mcp::Json args) {
    mcp::Json r = client_.Request("tools/call", {{"name", tool}, {"arguments", std::move(args)}});
    EXPECT_TRUE(r.contains("result")) << r.dump();
    return r.value("result", mcp::Json::object());
  }
  static std::string Text(const mcp::Json& result) {
    return result["content"][0]["text"].get<std::string>();
  }

  // No cell is ever made: a tool that leased one would answer "no cells in this test".
  sandbox::CellSessionManager cells_{[](const std::string&) -> Result<sandbox::CellSpec> {
                                       return Error::Msg("no cells in this test");
                                     },
                                     {}};
  ToolEnv env_;
  mcp::Server server_{Options()};
  mcp::MemoryClient client_{server_};
};

TEST_F(ArchiveToolsTest, UploadRefusesBadArgumentsNamingTheFieldBeforeAnyCell) {
  struct Case {
    mcp::Json args;
    std::string error;
  };
  const Case cases[] = {
      {{{"data", "!!notbase64"}}, "arguments.data: "},
      {{{"data", Base64Encode(std::string(2000, 'x'))}},
       "arguments.data: the archive is 2000 bytes, over the 1024 bytes cap for uploads; split it"},
      {{{"data", "AAAA"}, {"path", std::string("a\0b", 3)}}, "arguments.path: contains a NUL byte"},
      {{{"path", "x"}}, "arguments: give the archive in data (base64) or by url"},
      {{{"data", "AAAA"}, {"url", "https://example.com/a.tgz"}},
       "either in data or by url, not both"},
      {{{"url", "ftp://example.com/a.tgz"}},
       "arguments.url: \"ftp://example.com/a.tgz\" is not an http"},
      {{{"data", "AAAA"}, {"colour", "red"}}, "arguments.colour: unknown field"},
  };
  for (const Case& c : cases) {
    mcp::Json r = Call("upload_archive", c.args);
    EXPECT_TRUE(r.value("isError", false)) << r.dump();
    EXPECT_NE(Text(r).find(c.error), std::string::npos) << Text(r);
    EXPECT_EQ(Text(r).find("no cells in this test"), std::string::npos) << Text(r);
  }
  mcp::Json r = Call("download_archive", {{"path", 7}});
  EXPECT_TRUE(r.value("isError", false));
  EXPECT_NE(Text(r).find("arguments.path: expected string"), std::string::npos) << Text(r);
}

TEST_F(ArchiveToolsTest, ValidArgumentsGoOnToTheCell) {
  for (const mcp::Json& args :
       {mcp::Json{{"data", "AAAA"}}, mcp::Json{{"url", "https://example.com/a.tar.gz"}}}) {
    mcp::Json r = Call("upload_archive", args);
    EXPECT_TRUE(r.value("isError", false));
    EXPECT_NE(Text(r).find("no cells in this test"), std::string::npos) << Text(r);
  }
}

TEST(ArchiveReport, ReadsEntriesRefusalsAndTheSummary) {
  auto r = ParseUnpackReport(
      "{\"kind\":\"file\",\"path\":\"a.txt\",\"size\":3}\n"
      "{\"kind\":\"refused\",\"path\":\"/x\",\"size\":0,\"reason\":\"absolute path\"}\n"
      "{\"done\":true,\"entries\":1,\"refused\":1,\"bytes\":3,\"stopped\":false}\n");
  ASSERT_TRUE(r) << r.error().message;
  ASSERT_EQ(r->extracted.size(), 1u);
  EXPECT_EQ(r->extracted[0].path, "a.txt");
  ASSERT_EQ(r->refused.size(), 1u);
  EXPECT_EQ(r->refused[0].reason, "absolute path");
  EXPECT_EQ(r->entries, 1u);
  EXPECT_FALSE(r->stopped);
}

TEST(ArchiveReport, RefusesWhatTheHelperShouldNotPrint) {
  const std::pair<const char*, const char*> cases[] = {
      {"not json\n", "line 1: not a JSON object"},
      {"{\"kind\":\"file\",\"path\":\"a\",\"size\":1,\"owner\":0}\n", "unknown field \"owner\""},
      {"{\"kind\":\"device\",\"path\":\"a\",\"size\":0}\n", "unknown kind \"device\""},
      {"{\"kind\":\"file\",\"path\":7,\"size\":0}\n", "\"path\" is not a string"},
      {"{\"kind\":\"file\",\"path\":\"a\",\"size\":-1}\n", "\"size\" is not a count"},
      {"{\"kind\":\"refused\",\"path\":\"a\",\"size\":0}\n", "\"reason\" is not a string"},
      {"{\"kind\":\"file\",\"path\":\"a\",\"size\":1}\n", "ended without its summary line"},
      {"{\"error\":\"not a tar or zip archive: x\"}\n", "not a tar or zip archive: x"},
  };
  for (const auto& [text, error] : cases) {
    auto r = ParseUnpackReport(text);
    ASSERT_FALSE(r) << text;
    EXPECT_NE(r.error().message.find(error), std::string::npos) << r.error().message;
  }
  auto pack = ParsePackReport(
      "noise\n{\"done\":true,\"entries\":2,\"bytes\":99,"
      "\"skipped_count\":1,\"skipped\":[\"p: FIFO\"]}\n");
  ASSERT_TRUE(pack) << pack.error().message;
  EXPECT_EQ(pack->bytes, 99u);
  EXPECT_EQ(pack->skipped, std::vector<std::string>{"p: FIFO"});
  EXPECT_FALSE(ParsePackReport("{\"done\":true,\"entries\":2,\"bytes\":99}\n"));
  auto error = ParsePackReport("{\"error\":\"the tar.gz passes 10 bytes\"}\n");
  ASSERT_FALSE(error);
  EXPECT_EQ(error.error().message, "the tar.gz passes 10 bytes");
}

TEST(Toolset, CoreLeavesArchivesAndSnapshotsOffNamingTheKey) {
  CellToolsConfig config;
  config.toolset = "core";
  const auto& core = policies::ToolsetTools("core");
  config.toolset_tools.insert(core.begin(), core.end());
  EXPECT_EQ(ToolOffReason(config, "upload_archive"), "tools.toolset = \"core\"");
  EXPECT_EQ(ToolOffReason(config, "snapshot_list"), "tools.toolset = \"core\"");
  EXPECT_EQ(ToolOffReason(config, "read_file"), std::nullopt);
  config.enabled_tools = {"run_code"};
  EXPECT_EQ(ToolOffReason(config, "read_file"), "not in tools.enabled");
  CellToolsConfig full;
  full.toolset = "full";
  const auto& all = policies::ToolsetTools("full");
  full.toolset_tools.insert(all.begin(), all.end());
  EXPECT_EQ(ToolOffReason(full, "download_archive"), std::nullopt);
}

TEST(ImageType, TellsPicturesByTheirBytes) {
  using namespace std::string_view_literals;
  EXPECT_EQ(ImageMimeType("\x89PNG\r\n\x1a\n\0\0\0\rIHDR"sv), "image/png");
  EXPECT_EQ(ImageMimeType("\xff\xd8\xff\xe0"), "image/jpeg");
  EXPECT_EQ(ImageMimeType("GIF89a.."), "image/gif");
  EXPECT_EQ(ImageMimeType("RIFF\x10\0\0\0WEBPVP8 "sv), "image/webp");
  EXPECT_EQ(ImageMimeType("RIFF\x10\0\0\0WAVEfmt "sv), "");
  EXPECT_EQ(ImageMimeType("\x89PNG"), "");  // cut short
  EXPECT_EQ(ImageMimeType("hello"), "");
  EXPECT_TRUE(HasImageExtension("a/Plot.PNG"));
  EXPECT_TRUE(HasImageExtension("x.webp"));
  EXPECT_FALSE(HasImageExtension("png"));
  EXPECT_FALSE(HasImageExtension("x.pngx"));
}

}  // namespace
}  // namespace mcpcell::tools
