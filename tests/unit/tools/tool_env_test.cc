#include "tools/tool_env.h"

#include <gtest/gtest.h>

#include "tools/cell_note.h"

namespace mcpcell::tools {
namespace {

TEST(Base64, RoundTripsEveryLength) {
  std::string data;
  for (int i = 0; i < 300; ++i) {
    auto decoded = Base64Decode(Base64Encode(data));
    ASSERT_TRUE(decoded.ok()) << decoded.error().message;
    EXPECT_EQ(*decoded, data);
    data += static_cast<char>(i * 37);
  }
  EXPECT_EQ(Base64Encode("foobar"), "Zm9vYmFy");
  EXPECT_EQ(Base64Encode("fo"), "Zm8=");
}

TEST(Base64, RefusesBadInputAndSaysWhere) {
  auto bad = Base64Decode("ab*d");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("character 2"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(Base64Decode("abc").ok());   // not a multiple of 4
  EXPECT_FALSE(Base64Decode("ab=c").ok());  // data after padding
  EXPECT_FALSE(Base64Decode("a===").ok());  // too much padding
  auto ws = Base64Decode("Zm9v\nYmFy");
  ASSERT_TRUE(ws.ok());
  EXPECT_EQ(*ws, "foobar");
}

TEST(Utf8, ReplacesInvalidSequences) {
  EXPECT_EQ(ToValidUtf8("plain"), "plain");
  EXPECT_EQ(ToValidUtf8("\xC3\xA9"), "\xC3\xA9");                                  // é
  EXPECT_EQ(ToValidUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // overlong
  EXPECT_EQ(ToValidUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(ToValidUtf8("\xE2\x82"), "\xEF\xBF\xBD\xEF\xBF\xBD");                  // cut
}

TEST(Utf8, DetectsBinary) {
  EXPECT_FALSE(LooksBinary("hello\nworld\n"));
  EXPECT_FALSE(LooksBinary("caf\xC3\xA9"));
  EXPECT_TRUE(LooksBinary(std::string("a\0b", 3)));
  EXPECT_TRUE(LooksBinary("\xff\xfe text"));
}

TEST(Paths, ParentDir) {
  EXPECT_EQ(ParentDir("a/b/c.txt"), "a/b");
  EXPECT_EQ(ParentDir("/x"), "/");
  EXPECT_EQ(ParentDir("file"), "");
}

// A file tool's failure says what to do next: the caller's hint, else one that follows
// from errno, else the cause alone. Other tools' failures (a lockfile pip_install reads
// itself) get no path advice.
TEST(PathError, AddsAHintThatFollowsFromErrnoUnlessTheCallerGaveOne) {
  auto text = [](const mcp::ToolResult& r) { return r.content[0]["text"].get<std::string>(); };
  mcp::ToolResult missing =
      PathError("read_file notes.txt", Error{"no such file: notes.txt", ENOENT});
  EXPECT_TRUE(missing.is_error);
  EXPECT_EQ(text(missing),
            "read_file notes.txt failed: no such file: notes.txt. Check the path with "
            "list_files (relative paths start at /workspace).");
  EXPECT_NE(text(PathError("read_file d", Error{"is a directory", EISDIR}))
                .find("use list_files"),
            std::string::npos);
  EXPECT_NE(text(PathError("x", Error{"denied", EACCES})).find("/workspace or /tmp"),
            std::string::npos);
  EXPECT_EQ(text(PathError("x", Error{"no such file", ENOENT}, "Own hint.")),
            "x failed: no such file. Own hint.");
  EXPECT_EQ(text(PathError("x", Error{"odd", EIO})), "x failed: odd.");
  EXPECT_EQ(text(SandboxError("npm_install", Error{"no lockfile", ENOENT})),
            "npm_install failed: no lockfile.");
}

TEST(CellNote, PrependsTheNoteToAnyResultAndNothingWithoutOne) {
  mcp::ToolResult ok = mcp::ToolResult::Text("wrote 3 bytes");
  mcp::ToolResult noted = AddCellNote(ok, "the session's previous cell c1 had stopped");
  ASSERT_EQ(noted.content.size(), 2u);
  EXPECT_EQ(noted.content[0]["text"], "Note: the session's previous cell c1 had stopped");
  EXPECT_EQ(noted.content[1]["text"], "wrote 3 bytes");
  EXPECT_FALSE(noted.is_error);
  mcp::ToolResult err = AddCellNote(mcp::ToolResult::Error("no such file"), "gone");
  EXPECT_TRUE(err.is_error);
  EXPECT_EQ(err.content[0]["text"], "Note: gone");
  EXPECT_EQ(AddCellNote(ok, "").content, ok.content);
}

}  // namespace
}  // namespace mcpcell::tools
