// The template store on temp dirs: building from a directory and from tar archives,
// versions, the digest (stable across copies, changed by content, modes and names), names
// and refs, what tar extraction must refuse, and delete. No cells (baking is in
// tests/integration/template_test.cc).
#include "sandbox/template_store.h"

#include <archive.h>
#include <archive_entry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace mcpcell::sandbox {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;

struct TarEntry {
  std::string name = {}, content = {};
  mode_t type = AE_IFREG;
  std::string link = {};  // symlink target (AE_IFLNK) or hard link target (AE_IFREG)
  mode_t perm = 0644;
};

// `filter`: "" (a plain tar), "gzip" or "zstd".
void WriteTar(const std::string& path, const std::vector<TarEntry>& entries,
              const std::string& filter) {
  archive* a = archive_write_new();
  if (!filter.empty()) {
    ASSERT_EQ(archive_write_add_filter_by_name(a, filter.c_str()), ARCHIVE_OK) << filter;
  }
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const TarEntry& t : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.name.c_str());
    archive_entry_set_filetype(e, t.type);
    archive_entry_set_perm(e, t.perm);
    if (t.type == AE_IFLNK) archive_entry_set_symlink(e, t.link.c_str());
    const bool hard = t.type == AE_IFREG && !t.link.empty();
    if (hard) archive_entry_set_hardlink(e, t.link.c_str());
    const bool data = t.type == AE_IFREG && !hard;
    archive_entry_set_size(e, data ? static_cast<la_int64_t>(t.content.size()) : 0);
    archive_write_header(a, e);
    if (data) archive_write_data(a, t.content.data(), t.content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class TemplateStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-tmpl-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    src_ = tmp_ + "/src";
    fs::create_directories(src_ + "/usr/bin");
    fs::create_directories(src_ + "/etc");
    Put(src_ + "/etc/os-release", "NAME=\"tiny\"\n");
    Put(src_ + "/usr/bin/tool", "#!/bin/sh\necho hi\n", 0755);
    fs::create_symlink("usr/bin", src_ + "/bin");
    fs::create_hard_link(src_ + "/usr/bin/tool", src_ + "/usr/bin/tool2");
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  void Put(const std::string& path, const std::string& text, mode_t mode = 0644) {
    std::ofstream(path, std::ios::binary) << text;
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }
  Result<TemplateInfo> Build(const std::string& name, const std::string& from) {
    auto build = store().Begin(name);
    if (!build) return build.error();
    if (Status s = FillTemplateRootfs(from, build->rootfs()); !s) return s.error();
    return store().Commit(*build, "from:" + from, {});
  }
  // The staging dirs left in the store (none after a failed or finished build).
  size_t StagingDirs() {
    size_t n = 0;
    if (!fs::exists(store().root())) return 0;
    for (const auto& e : fs::directory_iterator(store().root()))
      n += e.path().filename().string().rfind(".tmp-", 0) == 0;
    return n;
  }
  TemplateStore store() { return TemplateStore(tmp_ + "/state"); }
  std::string tmp_, src_;
};

TEST_F(TemplateStoreTest, BuildFromADirectoryKeepsFilesModesSymlinksAndHardLinks) {
  auto t = Build("tiny", src_);
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->version, 1u);
  EXPECT_EQ(t->ref(), "tiny@1");
  EXPECT_EQ(t->rootfs(), tmp_ + "/state/templates/built/tiny/1/rootfs");
  EXPECT_EQ(Slurp(t->rootfs() + "/etc/os-release"), "NAME=\"tiny\"\n");
  struct stat a, b;
  ASSERT_EQ(stat((t->rootfs() + "/usr/bin/tool").c_str(), &a), 0);
  ASSERT_EQ(stat((t->rootfs() + "/usr/bin/tool2").c_str(), &b), 0);
  EXPECT_EQ(a.st_mode & 07777, 0755u);
  EXPECT_EQ(a.st_ino, b.st_ino) << "hard links stay hard links";
  EXPECT_EQ(fs::read_symlink(t->rootfs() + "/bin"), "usr/bin");
  EXPECT_EQ(t->files, 3u);
  EXPECT_EQ(t->digest.size(), 64u);
  ASSERT_EQ(stat(t->rootfs().c_str(), &a), 0);
  EXPECT_EQ(a.st_mode & 0777, 0755u) << "cells' own uids enter the rootfs";
  EXPECT_EQ(StagingDirs(), 0u);
}

TEST_F(TemplateStoreTest, VersionsCountUpAndABareNameFindsTheLatest) {
  ASSERT_TRUE(Build("tiny", src_).ok());
  Put(src_ + "/etc/os-release", "NAME=\"tiny 2\"\n");
  auto second = Build("tiny", src_);
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(second->version, 2u);
  auto latest = store().Find("tiny");
  ASSERT_TRUE(latest.ok()) << latest.error().message;
  EXPECT_EQ(latest->version, 2u);
  auto first = store().Find("tiny@1");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(Slurp(first->rootfs() + "/etc/os-release"), "NAME=\"tiny\"\n") << "immutable";
  EXPECT_NE(first->digest, latest->digest);
  auto list = store().List();
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].ref(), "tiny@1");
  EXPECT_EQ((*list)[1].ref(), "tiny@2");
}

TEST_F(TemplateStoreTest, DigestIsStableAcrossCopiesAndSeesModesAndNames) {
  auto one = Build("a", src_);
  auto two = Build("b", src_);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(one->digest, two->digest) << "same tree, built twice under other names";
  auto again = TemplateDigest(one->rootfs());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->sha256, one->digest);
  ASSERT_EQ(chmod((src_ + "/etc/os-release").c_str(), 0600), 0);
  auto mode = Build("c", src_);
  ASSERT_TRUE(mode.ok());
  EXPECT_NE(mode->digest, one->digest) << "a mode change";
  ASSERT_EQ(chmod((src_ + "/etc/os-release").c_str(), 0644), 0);
  fs::rename(src_ + "/etc/os-release", src_ + "/etc/os-release2");
  auto renamed = Build("d", src_);
  ASSERT_TRUE(renamed.ok());
  EXPECT_NE(renamed->digest, one->digest) << "a rename";
}

TEST_F(TemplateStoreTest, BuildFromTarAndTarGzMatchesTheDirectory) {
  const std::vector<TarEntry> entries = {
      {.name = "./etc/", .type = AE_IFDIR, .perm = 0755},
      {.name = "./etc/os-release", .content = "NAME=\"tar\"\n"},
      {.name = "usr/bin/tool", .content = "x", .perm = 04755},  // no entry for usr/ first
      {.name = "usr/bin/tool2", .link = "usr/bin/tool"},
      {.name = "bin", .type = AE_IFLNK, .link = "usr/bin"},
      {.name = "etc/alt", .type = AE_IFLNK, .link = "/usr/bin/tool"},
  };
  struct Form {
    std::string name, filter, suffix;
  };
  for (const Form& form : {Form{"tar", "", ".tar"}, Form{"targz", "gzip", ".tar.gz"},
                           Form{"tarzst", "zstd", ".tar.zst"}}) {
    const std::string tar = tmp_ + "/root" + form.suffix;
    WriteTar(tar, entries, form.filter);
    auto t = Build(form.name, tar);
    ASSERT_TRUE(t.ok()) << t.error().message;
    EXPECT_EQ(Slurp(t->rootfs() + "/etc/os-release"), "NAME=\"tar\"\n");
    struct stat a, b;
    ASSERT_EQ(stat((t->rootfs() + "/usr/bin/tool").c_str(), &a), 0);
    ASSERT_EQ(stat((t->rootfs() + "/usr/bin/tool2").c_str(), &b), 0);
    EXPECT_EQ(a.st_ino, b.st_ino);
    EXPECT_EQ(a.st_mode & 07777, 0755u) << "setuid dropped";
    EXPECT_EQ(fs::read_symlink(t->rootfs() + "/etc/alt"), "/usr/bin/tool");
  }
  EXPECT_EQ(store().Find("tar")->digest, store().Find("targz")->digest);
  EXPECT_EQ(store().Find("tar")->digest, store().Find("tarzst")->digest);
}

// Refused before anything runs: a suite that is not a plain name (it becomes an argument
// of mmdebstrap), and a PATH without mmdebstrap.
TEST_F(TemplateStoreTest, DebianSuiteRefusesABadNameAndAMissingMmdebstrap) {
  const std::string rootfs = tmp_ + "/deb-rootfs";
  for (const char* bad : {"", "Bookworm", "bookworm/../x", "--help", "a b"}) {
    Status s = DebootstrapTemplateRootfs(bad, rootfs, tmp_);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_THAT(s.error().message, HasSubstr("not a suite name like bookworm")) << bad;
  }
  const char* saved = getenv("PATH");
  const std::string old_path = saved ? saved : "";
  const std::string empty_dir = tmp_ + "/no-tools";
  fs::create_directories(empty_dir);
  setenv("PATH", empty_dir.c_str(), 1);
  Status s = DebootstrapTemplateRootfs("bookworm", rootfs, tmp_);
  setenv("PATH", old_path.c_str(), 1);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("needs mmdebstrap, which is not in PATH (" + empty_dir));
  EXPECT_FALSE(fs::exists(rootfs));
  EXPECT_FALSE(fs::exists(tmp_ + "/debootstrap.tar"));
}

TEST_F(TemplateStoreTest, TarEscapesAreRefusedAndLeaveNothing) {
  struct Case {
    std::vector<TarEntry> entries;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{.name = "/etc/passwd", .content = "x"}}, "absolute path refused"},
      {{{.name = "a/../../x", .content = "x"}}, "\"..\" refused"},
      {{{.name = "x", .link = "../outside"}}, "leaves the tree"},
      {{{.name = "x", .type = AE_IFLNK, .link = "../../etc"}}, "symlink leaves the root"},
      {{{.name = "d", .type = AE_IFLNK, .link = "/etc"}, {.name = "d/passwd", .content = "x"}},
       "a parent is a symlink"},
      {{{.name = "null", .type = AE_IFCHR}}, "device nodes"},
      {{{.name = "fifo", .type = AE_IFIFO}}, "device nodes, fifos"},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string tar = tmp_ + "/bad" + std::to_string(i) + ".tar";
    WriteTar(tar, cases[i].entries, "");
    auto t = Build("bad", tar);
    ASSERT_FALSE(t.ok()) << "case " << i;
    EXPECT_THAT(t.error().message, HasSubstr(cases[i].expect)) << "case " << i;
    EXPECT_THAT(t.error().message, HasSubstr(tar)) << "the error names the archive";
  }
  EXPECT_FALSE(store().Find("bad").ok()) << "no version made";
  EXPECT_EQ(StagingDirs(), 0u);
}

TEST_F(TemplateStoreTest, NamesAndRefsAreChecked) {
  for (const char* bad : {"", "host", "a/b", "..", "a b", "x@", "x@0", "x@01", "x@1@2"}) {
    EXPECT_FALSE(ParseTemplateRef(bad).ok()) << bad;
  }
  EXPECT_FALSE(CheckTemplateName(std::string(65, 'a')).ok());
  EXPECT_TRUE(CheckTemplateName(std::string(64, 'a')).ok());
  auto ref = ParseTemplateRef("py-3.11_x@12");
  ASSERT_TRUE(ref.ok());
  EXPECT_EQ(ref->name, "py-3.11_x");
  EXPECT_EQ(ref->version, 12u);
  EXPECT_THAT(store().Begin("a/b").error().message, HasSubstr("only A-Z a-z 0-9 . _ -"));
}

TEST_F(TemplateStoreTest, UnknownTemplatesAndVersionsListWhatExists) {
  ASSERT_TRUE(Build("tiny", src_).ok());
  auto missing = store().Find("nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.error().message, HasSubstr("no template \"nope\""));
  EXPECT_THAT(missing.error().message, HasSubstr("\"host\", \"tiny\""));
  auto version = store().Find("tiny@7");
  ASSERT_FALSE(version.ok());
  EXPECT_THAT(version.error().message, HasSubstr("has no version 7; versions: 1"));
}

TEST_F(TemplateStoreTest, DeleteNeedsAVersionAndRemovesOnlyThatOne) {
  ASSERT_TRUE(Build("tiny", src_).ok());
  ASSERT_TRUE(Build("tiny", src_).ok());
  EXPECT_THAT(store().Delete("tiny").error().message, HasSubstr("needs NAME@VERSION"));
  ASSERT_TRUE(store().Delete("tiny@1").ok());
  EXPECT_FALSE(fs::exists(tmp_ + "/state/templates/built/tiny/1"));
  EXPECT_EQ(store().Find("tiny")->version, 2u);
  EXPECT_FALSE(store().Delete("tiny@1").ok());
  auto third = Build("tiny", src_);
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(third->version, 3u) << "a deleted version's number is not reused while others exist";
  ASSERT_TRUE(store().Delete("tiny@2").ok());
  ASSERT_TRUE(store().Delete("tiny@3").ok());
  EXPECT_FALSE(fs::exists(tmp_ + "/state/templates/built/tiny"));
  EXPECT_EQ(StagingDirs(), 0u);
}

TEST_F(TemplateStoreTest, ADirectoryWithADeviceNodeOrAFifoIsRefused) {
  ASSERT_EQ(mkfifo((src_ + "/etc/pipe").c_str(), 0600), 0);
  auto t = Build("fifo", src_);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.error().message, HasSubstr("etc/pipe"));
  EXPECT_EQ(StagingDirs(), 0u);
}

}  // namespace
}  // namespace mcpcell::sandbox
