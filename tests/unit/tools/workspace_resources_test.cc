// Workspace resources without a cell: the cell:///workspace URI grammar (what is refused
// and why), the window URI a read answers with, MIME guesses, and resources/list's paged
// walk over a fake directory tree (every file once, in order, across pages, while files
// come and go; bounded per page).
#include "tools/workspace_resources.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace mcpcell::tools {
namespace {

using sandbox::control::DirEntry;
using sandbox::control::FileType;

TEST(WorkspaceUri, EncodesEachSegmentAndRoundTrips) {
  const std::string path = "/workspace/out dir/a?b#c%d/é.txt";
  const std::string uri = WorkspaceUri(path);
  EXPECT_EQ(uri, "cell:///workspace/out%20dir/a%3Fb%23c%25d/%C3%A9.txt");
  auto w = ParseWorkspaceUri(uri, 1 << 20);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->path, path);
  EXPECT_EQ(w->offset, 0u);
  EXPECT_EQ(w->length, kDefaultWindowBytes);
}

TEST(WorkspaceUri, ReadsTheWindowAndIgnoresTheStatedBounds) {
  auto w = ParseWorkspaceUri("cell:///workspace/a.log?offset=10&length=20#bytes=10-30/99", 100);
  ASSERT_TRUE(w.ok()) << w.error().message;
  EXPECT_EQ(w->path, "/workspace/a.log");
  EXPECT_EQ(w->offset, 10u);
  EXPECT_EQ(w->length, 20u);
  // Without length, the default is cut to the cap.
  auto capped = ParseWorkspaceUri("cell:///workspace/a.log", 100);
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->length, 100u);
  EXPECT_EQ(WindowUri(*w, 20, 99), "cell:///workspace/a.log?offset=10&length=20#bytes=10-30/99");
}

// Each refusal names the problem.
TEST(WorkspaceUri, RefusesWhatLeavesTheWorkspaceOrIsMalformed) {
  const std::pair<const char*, const char*> cases[] = {
      {"cell:///workspace/../etc/passwd", "\"..\" segments are refused"},
      {"cell:///workspace/a/%2E%2E/%2e%2e/etc", "\"..\" segments are refused"},
      {"cell:///workspace/a%2F..%2Fb", "\"..\" segments are refused"},
      {"cell:///workspace/./a", "\".\" segments are refused"},
      {"cell:///workspace/a//b", "empty path segment"},
      {"cell:///workspace/a/", "empty path segment"},
      {"cell:///workspace/a%00b", "contains a NUL byte"},
      {"cell:///workspace/a%zz", "bad percent-escape at offset"},
      {"cell:///workspace/a%4", "bad percent-escape"},
      {"cell:///etc/passwd", "not a workspace resource"},
      {"file:///workspace/a", "not a workspace resource"},
      {"cell:///workspaceX/a", "expected '/' after cell:///workspace"},
      {"cell:///workspace", "names the workspace itself"},
      {"cell:///workspace/", "names the workspace itself"},
      {"cell:///workspace/a?offset=1&size=2", "unknown query parameter \"size\""},
      {"cell:///workspace/a?offset=1&offset=2", "offset is given twice"},
      {"cell:///workspace/a?offset=-1", "offset=\"-1\" is not a decimal byte count"},
      {"cell:///workspace/a?length=", "length=\"\" is not a decimal byte count"},
      {"cell:///workspace/a?length=0", "length must be 1 to 1000 bytes"},
      {"cell:///workspace/a?length=1001", "length must be 1 to 1000 bytes"},
      {"cell:///workspace/a?offset=99999999999999999999", "is not a decimal byte count"},
  };
  for (const auto& [uri, want] : cases) {
    auto w = ParseWorkspaceUri(uri, 1000);
    ASSERT_FALSE(w.ok()) << uri << " was accepted as " << w->path;
    EXPECT_NE(w.error().message.find(want), std::string::npos) << uri << ": " << w.error().message;
    EXPECT_EQ(w.error().message.rfind(uri, 0), 0u) << "names the uri: " << w.error().message;
  }
}

TEST(WorkspaceUri, GuessesMimeTypesByExtension) {
  EXPECT_EQ(GuessMimeType("/workspace/a.TXT"), "text/plain");
  EXPECT_EQ(GuessMimeType("/workspace/.mcpcell/run_command-1.stdout"), "text/plain");
  EXPECT_EQ(GuessMimeType("/workspace/plot.png"), "image/png");
  EXPECT_EQ(GuessMimeType("/workspace/x.tar.gz"), "application/gzip");
  EXPECT_EQ(GuessMimeType("/workspace/Makefile"), "application/octet-stream");
  EXPECT_EQ(GuessMimeType("/workspace/v1.2/README"), "application/octet-stream");
}

TEST(WorkspaceWindows, TextUnlessNulOrInvalidUtf8AndACutCharacterWaitsForTheNextWindow) {
  EXPECT_EQ(WindowTextLength("hello", false, "text/plain"), 5u);
  EXPECT_EQ(WindowTextLength("", true, "text/plain"), 0u);
  // "é" is C3 A9: a window ending after C3 leaves it for the next window...
  EXPECT_EQ(WindowTextLength("caf\xC3", false, "text/plain"), 3u);
  // ... a three-byte character cut after two bytes too ("€" is E2 82 AC) ...
  EXPECT_EQ(WindowTextLength("x\xE2\x82", false, "text/plain"), 1u);
  // ... but at the file's end the bytes are what they are: a blob.
  EXPECT_EQ(WindowTextLength("caf\xC3", true, "text/plain"), std::nullopt);
  // A stray continuation byte is not a cut character (gzip's 1F 8B).
  EXPECT_EQ(WindowTextLength("\x1F\x8B", false, "application/octet-stream"), std::nullopt);
  EXPECT_EQ(WindowTextLength(std::string("a\0b", 3), false, "text/plain"), std::nullopt);
  EXPECT_EQ(WindowTextLength("\xC3", false, "text/plain"), std::nullopt);
  // Types that are bytes stay blobs even when their bytes read as text.
  EXPECT_EQ(WindowTextLength("GIF89a", false, "image/gif"), std::nullopt);
  EXPECT_EQ(WindowTextLength("abc", false, "application/gzip"), std::nullopt);
}

TEST(WorkspaceResourceLinkItem, CarriesUriNameMimeTypeAndSize) {
  mcp::Json link = WorkspaceResourceLink("/workspace/.mcpcell/a b.stdout", "text/plain", 42, "why");
  EXPECT_EQ(link, (mcp::Json{{"type", "resource_link"},
                             {"uri", "cell:///workspace/.mcpcell/a%20b.stdout"},
                             {"name", "a b.stdout"},
                             {"mimeType", "text/plain"},
                             {"size", 42},
                             {"description", "why"}}));
}

// A directory tree in memory: absolute dir -> entries (unsorted, as readdir gives them).
class FakeTree {
 public:
  void File(const std::string& path, uint64_t size = 1) { Add(path, FileType::kRegular, size); }
  void Link(const std::string& path) { Add(path, FileType::kSymlink, 0); }
  void Remove(const std::string& path) {
    auto& list = dirs_[Parent(path)];
    std::erase_if(list, [&](const DirEntry& e) { return Parent(path) + "/" + e.name == path; });
  }
  void Unreadable(const std::string& dir) { unreadable_.insert(dir); }
  DirLister Lister() {
    return [this](const std::string& dir) -> Result<std::vector<DirEntry>> {
      ++listings;
      if (unreadable_.count(dir)) return Error::Msg("opendir " + dir + ": EACCES");
      auto it = dirs_.find(dir);
      if (it == dirs_.end()) return Error::Msg("opendir " + dir + ": ENOENT");
      std::vector<DirEntry> reversed(it->second.rbegin(), it->second.rend());
      return reversed;
    };
  }
  size_t listings = 0;

 private:
  static std::string Parent(const std::string& p) { return p.substr(0, p.rfind('/')); }
  void Add(const std::string& path, FileType type, uint64_t size) {
    const std::string parent = Parent(path);
    if (parent != "/workspace" && !Has(parent)) Add(parent, FileType::kDirectory, 0);
    dirs_["/workspace"];
    if (type == FileType::kDirectory) dirs_[path];
    DirEntry e;
    e.name = path.substr(parent.size() + 1);
    e.stat.type = type;
    e.stat.size = size;
    dirs_[parent].push_back(e);
  }
  bool Has(const std::string& path) {
    for (const auto& e : dirs_[Parent(path)])
      if (Parent(path) + "/" + e.name == path) return true;
    return false;
  }
  std::map<std::string, std::vector<DirEntry>> dirs_;
  std::set<std::string> unreadable_;
};

// Every page until the end; the files in order.
std::vector<std::string> AllPages(FakeTree& tree, size_t limit, size_t* pages = nullptr) {
  std::vector<std::string> seen;
  std::string cursor;
  for (size_t n = 1; n < 10000; ++n) {
    auto page = ListWorkspacePage(tree.Lister(), cursor, limit);
    EXPECT_TRUE(page.ok()) << page.error().message;
    if (!page.ok()) break;
    EXPECT_LE(page->files.size(), limit);
    for (const auto& f : page->files) seen.push_back(f.path);
    if (pages) *pages = n;
    if (page->next_cursor.empty()) break;
    EXPECT_NE(page->next_cursor, cursor) << "a page that makes no progress";
    cursor = page->next_cursor;
  }
  return seen;
}

TEST(WorkspacePages, ListEveryRegularFileOnceInDepthFirstNameOrder) {
  FakeTree tree;
  tree.File("/workspace/b.txt", 5);
  tree.File("/workspace/a/z.txt");
  tree.File("/workspace/a/b/c.txt");
  tree.File("/workspace/.mcpcell/run.stdout");
  tree.Link("/workspace/link-to-etc");
  tree.File("/workspace/c");
  const std::vector<std::string> want = {"/workspace/.mcpcell/run.stdout", "/workspace/a/b/c.txt",
                                         "/workspace/a/z.txt", "/workspace/b.txt", "/workspace/c"};
  for (size_t limit : {1, 2, 3, 100}) {
    size_t pages = 0;
    EXPECT_EQ(AllPages(tree, limit, &pages), want) << "limit " << limit;
    EXPECT_EQ(pages, (want.size() + limit - 1) / limit) << "limit " << limit;
  }
  auto first = ListWorkspacePage(tree.Lister(), "", 100);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->files[3].size, 5u);
}

TEST(WorkspacePages, ACursorStaysRightWhileFilesComeAndGo) {
  FakeTree tree;
  for (const char* f : {"a1", "a2", "a3", "a4", "a5", "a6"})
    tree.File(std::string("/workspace/d/") + f);
  auto first = ListWorkspacePage(tree.Lister(), "", 2);
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->next_cursor, "d/a2");
  // The cursor's own file and one before it go, one before and one after it come.
  tree.Remove("/workspace/d/a2");
  tree.Remove("/workspace/d/a1");
  tree.File("/workspace/d/a0");
  tree.File("/workspace/d/a35");
  auto second = ListWorkspacePage(tree.Lister(), first->next_cursor, 3);
  ASSERT_TRUE(second.ok());
  std::vector<std::string> names;
  for (const auto& f : second->files) names.push_back(f.path);
  EXPECT_EQ(names,
            (std::vector<std::string>{"/workspace/d/a3", "/workspace/d/a35", "/workspace/d/a4"}));
}

TEST(WorkspacePages, StopDescendingAtTheDepthBound) {
  FakeTree tree;
  std::string dir = "/workspace";
  for (size_t i = 0; i < kMaxListedDepth + 4; ++i) {
    dir += "/d" + std::to_string(i);
    tree.File(dir + "/f");
  }
  std::vector<std::string> seen = AllPages(tree, 100);
  EXPECT_EQ(seen.size(), kMaxListedDepth - 1);
  // Depth-first in name order: "d1" comes before "f", so the deepest listed comes first.
  EXPECT_EQ(seen.back(), "/workspace/d0/f");
  EXPECT_EQ(seen.front().size(), std::string("/workspace/f").size() +
                                     std::string("d0/d1/d2/d3/d4/d5/d6/d7/d8/d9/").size() +
                                     std::string("d10/d11/d12/d13/d14/").size());
}

TEST(WorkspacePages, ManyDirectoriesArePagedWithinTheListingBound) {
  FakeTree tree;
  for (int i = 0; i < 300; ++i) tree.File("/workspace/d" + std::to_string(1000 + i) + "/e/f");
  size_t pages = 0;
  std::vector<std::string> seen = AllPages(tree, 1000, &pages);
  EXPECT_EQ(seen.size(), 300u);
  EXPECT_GT(pages, 1u) << "one page may not list the whole tree";
  auto one = ListWorkspacePage(tree.Lister(), "", 1000);
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->next_cursor.empty());
  FakeTree counted;
  for (int i = 0; i < 300; ++i) counted.File("/workspace/d" + std::to_string(1000 + i) + "/e/f");
  (void)ListWorkspacePage(counted.Lister(), "", 1000);
  EXPECT_LE(counted.listings, kMaxListingsPerPage);
}

TEST(WorkspacePages, AnUnreadableSubdirectoryIsPassedOverButTheRootMustList) {
  FakeTree tree;
  tree.File("/workspace/a/secret");
  tree.File("/workspace/b");
  tree.Unreadable("/workspace/a");
  EXPECT_EQ(AllPages(tree, 10), (std::vector<std::string>{"/workspace/b"}));
  tree.Unreadable("/workspace");
  auto page = ListWorkspacePage(tree.Lister(), "", 10);
  ASSERT_FALSE(page.ok());
  EXPECT_NE(page.error().message.find("listing /workspace: opendir /workspace: EACCES"),
            std::string::npos)
      << page.error().message;
}

TEST(WorkspacePages, ACursorTheListDidNotMakeIsRefused) {
  FakeTree tree;
  tree.File("/workspace/a");
  for (const char* bad : {"../etc", "a//b", "/abs", "a/./b"}) {
    auto page = ListWorkspacePage(tree.Lister(), bad, 10);
    ASSERT_FALSE(page.ok()) << bad;
    EXPECT_EQ(page.error().message.rfind("cursor \"", 0), 0u) << page.error().message;
  }
}

}  // namespace
}  // namespace mcpcell::tools
