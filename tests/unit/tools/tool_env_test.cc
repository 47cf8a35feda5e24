#include "tools/tool_env.h"

#include <gtest/gtest.h>

#include "tools/cell_note.h"

namespace mcpcell::tools {
namespace {

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
  EXPECT_NE(text(PathError("read_file d", Error{"is a directory", EISDIR})).find("use list_files"),
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
