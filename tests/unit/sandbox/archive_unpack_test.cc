// Archive extraction (sandbox/init/archive_unpack.h) into a temp dir on the host: the path
// and symlink checks, every refusal of a hostile tar made here with libarchive's writer,
// the limits, and packing (archive_pack.h) read back by the unpacker.
#include "sandbox/init/archive_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>

#include "base/unique_fd.h"
#include "sandbox/init/archive_pack.h"

namespace mcpcell::sandbox {
namespace {

namespace fs = std::filesystem;

// Builds a tar (optionally gzip) in memory, entry by entry.
class TarBuilder {
 public:
  explicit TarBuilder(bool gzip = false) : a_(archive_write_new()) {
    archive_write_set_format_pax_restricted(a_);
    if (gzip) archive_write_add_filter_gzip(a_);
    archive_write_open_memory(a_, buf_.data(), buf_.size(), &used_);
  }
  ~TarBuilder() { archive_write_free(a_); }
  TarBuilder& Add(const std::string& path, mode_t type, mode_t perm, const std::string& data = "",
                  const char* symlink = nullptr, const char* hardlink = nullptr) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, path.c_str());
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_size(e, type == AE_IFREG && !hardlink ? data.size() : 0);
    if (symlink) archive_entry_set_symlink(e, symlink);
    if (hardlink) archive_entry_set_hardlink(e, hardlink);
    archive_write_header(a_, e);
    if (!data.empty()) archive_write_data(a_, data.data(), data.size());
    archive_entry_free(e);
    return *this;
  }
  std::string Finish() {
    archive_write_close(a_);
    return std::string(buf_.data(), used_);
  }

 private:
  archive* a_;
  std::string buf_ = std::string(32 << 20, '\0');
  size_t used_ = 0;
};

class ArchiveUnpackTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/archive_unpack_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    fs::create_directory(root_ / "out");
    dir_ = UniqueFd(::open((root_ / "out").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  void TearDown() override { fs::remove_all(root_); }

  Result<UnpackSummary> Unpack(const std::string& data, UnpackLimits limits = {}) {
    refused_.clear();
    extracted_.clear();
    return UnpackArchive(data, dir_.get(), limits, [this](const UnpackEvent& e) {
      if (e.kind == "refused")
        refused_[e.path] = e.reason;
      else
        extracted_[e.path] = e.kind;
    });
  }

  fs::path root_;
  UniqueFd dir_;
  std::map<std::string, std::string> refused_, extracted_;
};

TEST(ArchivePaths, RefusesAbsoluteDotDotAndEmpty) {
  EXPECT_EQ(ArchivePathProblem("a/b.txt"), "");
  EXPECT_EQ(ArchivePathProblem("./a//b/"), "");
  EXPECT_EQ(ArchivePathProblem("a..b/..c"), "");
  EXPECT_EQ(ArchivePathProblem("/etc/passwd"), "absolute path");
  EXPECT_EQ(ArchivePathProblem("a/../../b"), "\"..\" component (leaves the directory)");
  EXPECT_EQ(ArchivePathProblem(".."), "\"..\" component (leaves the directory)");
  EXPECT_EQ(ArchivePathProblem(""), "empty path");
}

TEST(ArchivePaths, SymlinkTargetsMustStayInside) {
  EXPECT_EQ(SymlinkTargetProblem("a/link", "../b"), "");
  EXPECT_EQ(SymlinkTargetProblem("a/b/link", "../../c"), "");
  EXPECT_EQ(SymlinkTargetProblem("link", "x/../y"), "");
  EXPECT_NE(SymlinkTargetProblem("link", "../x"), "");
  EXPECT_NE(SymlinkTargetProblem("a/link", "x/../../../y"), "");
  EXPECT_NE(SymlinkTargetProblem("a/link", "/etc"), "");
}

TEST_F(ArchiveUnpackTest, ExtractsTheSafeEntriesAndRefusesEveryTrick) {
  std::string tar = TarBuilder(/*gzip=*/true)
                        .Add("ok.txt", AE_IFREG, 0640, "fine\n")
                        .Add("/abs", AE_IFREG, 0644, "x")
                        .Add("../up", AE_IFREG, 0644, "x")
                        .Add("out", AE_IFLNK, 0777, "", "/etc")
                        .Add("in", AE_IFLNK, 0777, "", "sub")
                        .Add("sub/", AE_IFDIR, 0755)
                        .Add("in/through", AE_IFREG, 0644, "x")
                        .Add("hard", AE_IFREG, 0644, "", nullptr, "../../etc/passwd")
                        .Add("hardok", AE_IFREG, 0644, "", nullptr, "ok.txt")
                        .Add("dev", AE_IFCHR, 0644)
                        .Add("fifo", AE_IFIFO, 0644)
                        .Add("suid", AE_IFREG, 04755, "#!/bin/sh\n")
                        .Finish();
  auto r = Unpack(tar);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->stopped);
  EXPECT_EQ(refused_["/abs"], "absolute path");
  EXPECT_EQ(refused_["../up"], "\"..\" component (leaves the directory)");
  EXPECT_EQ(refused_["out"], "symlink to an absolute path (leaves the directory)");
  EXPECT_EQ(refused_["in/through"], "goes through the symlink \"in\"");
  EXPECT_NE(refused_["hard"].find("hard link target \"../../etc/passwd\""), std::string::npos);
  EXPECT_EQ(refused_["dev"], "device node");
  EXPECT_EQ(refused_["fifo"], "FIFO");
  EXPECT_EQ(refused_["suid"], "setuid/setgid bit");
  EXPECT_EQ(refused_.size(), 8u);
  EXPECT_EQ(extracted_["ok.txt"], "file");
  EXPECT_EQ(extracted_["in"], "symlink");
  EXPECT_EQ(extracted_["hardok"], "hardlink");
  struct stat st;
  ASSERT_EQ(::stat((root_ / "out/ok.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_nlink, 2u);
  EXPECT_FALSE(fs::exists(root_ / "up"));
  EXPECT_FALSE(fs::exists(root_ / "out/sub/through"));
}

TEST_F(ArchiveUnpackTest, StopsAtTheByteRatioAndEntryLimits) {
  std::string zeros(4 << 20, '\0');
  std::string bomb =
      TarBuilder(true).Add("a", AE_IFREG, 0644, "a").Add("z", AE_IFREG, 0644, zeros).Finish();
  auto r = Unpack(bomb, {.max_bytes = 1 << 20, .max_ratio = 200, .max_entries = 10});
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(refused_["z"], "the files add up to more than 1048576 bytes (limits.archive_bytes)");
  r = Unpack(bomb, {.max_bytes = 1 << 30, .max_ratio = 50, .max_entries = 10});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(refused_["z"].rfind("expands more than 50 times (limits.archive_ratio)", 0), 0u)
      << refused_["z"];
  EXPECT_FALSE(fs::exists(root_ / "out/z")) << "the entry in progress is removed";
  r = Unpack(bomb, {.max_bytes = 1 << 30, .max_ratio = 200, .max_entries = 1});
  ASSERT_TRUE(r);
  EXPECT_TRUE(r->stopped);
  EXPECT_EQ(refused_["z"], "more than 1 entries (limits.archive_entries)");
}

TEST_F(ArchiveUnpackTest, RefusesWhatIsNoArchive) {
  auto r = Unpack("just some text, no archive");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not a tar or zip archive"), std::string::npos)
      << r.error().message;
}

TEST_F(ArchiveUnpackTest, PackedTreeUnpacksToTheSameTree) {
  fs::create_directories(root_ / "src/a/b");
  {
    std::FILE* f = std::fopen((root_ / "src/a/b/x.txt").c_str(), "w");
    std::fputs("hello", f);
    std::fclose(f);
  }
  fs::permissions(root_ / "src/a/b/x.txt", fs::perms(0600));
  fs::create_symlink("b/x.txt", root_ / "src/a/link");
  ASSERT_EQ(::mkfifo((root_ / "src/pipe").c_str(), 0644), 0);
  UniqueFd src(::open((root_ / "src").c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  auto packed = PackDirectory(src.get(), pipefd[1], 1 << 20);
  ::close(pipefd[1]);
  ASSERT_TRUE(packed) << packed.error().message;
  EXPECT_EQ(packed->skipped, std::vector<std::string>{"pipe: FIFO"});
  std::string tgz(packed->bytes, '\0');
  ASSERT_EQ(::read(pipefd[0], tgz.data(), tgz.size()), static_cast<ssize_t>(tgz.size()));
  ::close(pipefd[0]);
  auto r = Unpack(tgz);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(refused_.empty());
  EXPECT_EQ(fs::read_symlink(root_ / "out/a/link"), "b/x.txt");
  EXPECT_EQ(fs::status(root_ / "out/a/b/x.txt").permissions(), fs::perms(0600));
  EXPECT_EQ(fs::file_size(root_ / "out/a/b/x.txt"), 5u);
  int p2[2];
  ASSERT_EQ(::pipe(p2), 0);
  auto over = PackDirectory(src.get(), p2[1], 16);
  ::close(p2[0]);
  ::close(p2[1]);
  ASSERT_FALSE(over);
  EXPECT_EQ(over.error().message, "the tar.gz passes 16 bytes");
}

}  // namespace
}  // namespace mcpcell::sandbox
