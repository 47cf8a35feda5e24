// File operations of cell init, on a temp dir standing in for the cell's root. As root the
// operations run as uid/gid 1000 (so permission checks are the sandbox user's); otherwise
// as the caller's own ids, and the tests that need a second identity skip.
#include "sandbox/init/file_ops.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>

namespace mcpcell::sandbox {
namespace {

namespace fs = std::filesystem;
using control::FileType;
using testing::HasSubstr;

class FileOps : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/mcpcell-fileops-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    is_root_ = geteuid() == 0;
    ctx_.uid = is_root_ ? 1000 : geteuid();
    ctx_.gid = is_root_ ? 1000 : getegid();
    ctx_.base = "/workspace";
    fs::create_directories(root_ + "/workspace");
    fs::create_directories(root_ + "/etc");
    Put("/etc/passwd", "cell-passwd\n");
    ChownTree(root_);
    root_fd_ = open(root_.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    ASSERT_GE(root_fd_, 0);
    ctx_.root_fd = root_fd_;
  }
  void TearDown() override {
    close(root_fd_);
    fs::remove_all(root_);
  }
  void Put(const std::string& cell_path, const std::string& content) {
    std::ofstream(root_ + cell_path) << content;
  }
  void ChownTree(const std::string& top) {
    if (!is_root_) return;
    ASSERT_EQ(lchown(top.c_str(), ctx_.uid, ctx_.gid), 0);
    for (auto& e : fs::recursive_directory_iterator(top)) {
      ASSERT_EQ(lchown(e.path().c_str(), ctx_.uid, ctx_.gid), 0);
    }
  }
  Result<std::string> Read(const std::string& path, uint64_t offset = 0, uint32_t max = 65536) {
    auto r = ReadFile(ctx_, {1, path, offset, max});
    if (!r.ok()) return r.error();
    return r->data;
  }
  std::string ReadOk(const std::string& path, uint64_t offset = 0, uint32_t max = 65536) {
    auto r = Read(path, offset, max);
    EXPECT_TRUE(r.ok()) << path << ": " << (r.ok() ? "" : r.error().message);
    return r.ok() ? r.value() : "<error>";
  }
  std::string root_;
  int root_fd_ = -1;
  bool is_root_ = false;
  FileOpContext ctx_;
};

TEST_F(FileOps, WriteThenReadBackRelativeToWorkspace) {
  ASSERT_TRUE(WriteFile(ctx_, {1, "notes.txt", 0, control::kWriteCreate | control::kWriteTruncate,
                               0640, "hello world"})
                  .ok());
  EXPECT_TRUE(fs::exists(root_ + "/workspace/notes.txt"));
  EXPECT_EQ(ReadOk("/workspace/notes.txt"), "hello world");
  EXPECT_EQ(ReadOk("notes.txt", 6, 3), "wor");
  auto chunk = ReadFile(ctx_, {1, "notes.txt", 6, 100});
  ASSERT_TRUE(chunk.ok());
  EXPECT_TRUE(chunk->eof);
  EXPECT_EQ(chunk->file_size, 11u);
  struct stat st;
  ASSERT_EQ(stat((root_ + "/workspace/notes.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ctx_.uid);  // created as the sandbox user, not as init
  EXPECT_EQ(st.st_mode & 0777, 0640u);
}

TEST_F(FileOps, LaterChunksWriteAtTheirOffset) {
  ASSERT_TRUE(
      WriteFile(ctx_, {1, "f", 0, control::kWriteCreate | control::kWriteTruncate, 0644, "abc"})
          .ok());
  Status second = WriteFile(ctx_, {2, "f", 3, 0, 0644, "def"});
  ASSERT_TRUE(second.ok()) << second.error().message;
  EXPECT_EQ(ReadOk("f"), "abcdef");
  EXPECT_EQ(WriteFile(ctx_, {3, "missing", 0, 0, 0644, "x"}).error().err, ENOENT);  // no create
  EXPECT_EQ(WriteFile(ctx_, {4, "f", 0, control::kWriteExclusive, 0644, "x"}).error().err, EEXIST);
  EXPECT_THAT(WriteFile(ctx_, {5, "f", 0, 64, 0644, "x"}).error().message,
              HasSubstr("unknown bits"));
}

TEST_F(FileOps, AppendLandsAtTheEndWhateverTheOffset) {
  const uint32_t append = control::kWriteCreate | control::kWriteAppend;
  ASSERT_TRUE(WriteFile(ctx_, {1, "log", 0, append, 0644, "one "}).ok());
  // Someone else wrote meanwhile: an offset-based write would overwrite it, append does not.
  ASSERT_TRUE(WriteFile(ctx_, {2, "log", 4, 0, 0644, "two "}).ok());
  ASSERT_TRUE(WriteFile(ctx_, {3, "log", 0, append, 0644, "three"}).ok());
  EXPECT_EQ(ReadOk("log"), "one two three");
  EXPECT_THAT(
      WriteFile(ctx_, {4, "log", 0, append | control::kWriteTruncate, 0644, "x"}).error().message,
      HasSubstr("append and truncate together"));
}

TEST_F(FileOps, RenameInsideTheCellNeverFollowsTheLastComponent) {
  ASSERT_TRUE(WriteFile(ctx_, {1, "a", 0, control::kWriteCreate, 0644, "A"}).ok());
  ASSERT_TRUE(WriteFile(ctx_, {2, "b", 0, control::kWriteCreate, 0644, "B"}).ok());
  Status s = RenamePath(ctx_, {3, "a", "b", 0});
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(ReadOk("b"), "A");
  EXPECT_FALSE(fs::exists(root_ + "/workspace/a"));
  ASSERT_TRUE(WriteFile(ctx_, {4, "c", 0, control::kWriteCreate, 0644, "C"}).ok());
  EXPECT_EQ(RenamePath(ctx_, {5, "c", "b", 1}).error().err, EEXIST);  // no_replace
  // A symlink pointing out of the cell is renamed as a link; its target is untouched.
  fs::create_symlink("/etc/hostname", root_ + "/workspace/link");
  ASSERT_TRUE(RenamePath(ctx_, {6, "link", "link2", 0}).ok());
  EXPECT_TRUE(fs::is_symlink(root_ + "/workspace/link2"));
  // ".." resolves in the kernel: "../workspace/b2" is /workspace/b2.
  ASSERT_TRUE(RenamePath(ctx_, {7, "b", "../workspace/b2", 0}).ok());
  EXPECT_EQ(ReadOk("b2"), "A");
  EXPECT_THAT(RenamePath(ctx_, {9, "b2", "sub/..", 0}).error().message,
              HasSubstr("ends in \"..\""));
  EXPECT_EQ(RenamePath(ctx_, {8, "missing", "x", 0}).error().err, ENOENT);
}

// ".." is resolved by the kernel under the root, physically (after a symlink before it),
// and never climbs above the root; a path ending in ".." is never acted on as an entry.
TEST_F(FileOps, DotDotResolvesInsideTheRootAndBadPathsAreRefusedByName) {
  // Climbing past the root stops at it: the cell's /etc/passwd, never the host's.
  for (std::string up : {"../etc/passwd", "/workspace/../../etc/passwd", "./../../etc/passwd",
                         "../../../../../../../etc/passwd"}) {
    EXPECT_EQ(ReadOk(up), "cell-passwd\n") << up;
  }
  ASSERT_TRUE(MakeDirectory(ctx_, {1, "d/e/../f", 0755, 1}).ok());  // mkdir -p: d, d/e, d/f
  EXPECT_TRUE(fs::is_directory(root_ + "/workspace/d/e"));
  EXPECT_TRUE(fs::is_directory(root_ + "/workspace/d/f"));
  ASSERT_TRUE(WriteFile(ctx_, {2, "d/e/../f/x", 0, control::kWriteCreate, 0644, "X"}).ok());
  EXPECT_EQ(ReadOk("d/f/x"), "X");
  // Physically, as open(2) would: "link/.." is the link target's parent, not /workspace.
  fs::create_directories(root_ + "/elsewhere/inner");
  std::ofstream(root_ + "/elsewhere/y") << "Y";
  // Resolution is physical: through a directory that is not there, ".." finds nothing.
  EXPECT_EQ(Read("missing/../../etc/passwd").error().err, ENOENT);
  fs::create_symlink("/elsewhere/inner", root_ + "/workspace/link");
  EXPECT_EQ(ReadOk("link/../y"), "Y");
  // Ends in "..": acted on as an entry it would be the parent; refused by name. As a
  // directory to read from or make with parents, it is fine.
  EXPECT_THAT(MakeDirectory(ctx_, {4, "d/..", 0755, 0}).error().err, EEXIST);
  EXPECT_TRUE(MakeDirectory(ctx_, {5, "d/..", 0755, 1}).ok());
  EXPECT_THAT(RemovePath(ctx_, {6, "d/e/..", 1}).error().message, HasSubstr("ends in \"..\""));
  EXPECT_TRUE(fs::exists(root_ + "/workspace/d/f/x"));  // nothing of d was removed
  EXPECT_FALSE(WriteFile(ctx_, {7, "d/..", 0, control::kWriteCreate, 0644, "Z"}).ok());
  EXPECT_TRUE(ListDir(ctx_, {8, "d/e/..", 0}).ok());
  EXPECT_THAT(Read("").error().message, HasSubstr("path: empty"));
  EXPECT_THAT(Read(std::string("a\0b", 3)).error().message, HasSubstr("NUL"));
  EXPECT_THAT(Read(std::string(5000, 'a')).error().message, HasSubstr("longer than 4096"));
}

TEST_F(FileOps, AbsoluteSymlinksResolveInsideTheRoot) {
  // Inside a cell "/etc/passwd" is the cell's; a link must never reach the host's.
  ASSERT_EQ(symlink("/etc/passwd", (root_ + "/workspace/abs").c_str()), 0);
  ASSERT_EQ(symlink("../../../../../../etc/passwd", (root_ + "/workspace/rel").c_str()), 0);
  EXPECT_EQ(ReadOk("abs"), "cell-passwd\n");
  EXPECT_EQ(ReadOk("rel"), "cell-passwd\n");
  // Writing through a link that points "outside" lands inside the root as well.
  ASSERT_EQ(symlink("/outside-file", (root_ + "/workspace/out").c_str()), 0);
  ASSERT_TRUE(WriteFile(ctx_, {1, "out", 0, control::kWriteCreate, 0644, "x"}).ok());
  EXPECT_FALSE(fs::exists("/outside-file"));
  EXPECT_TRUE(fs::exists(root_ + "/outside-file") || !is_root_);
}

TEST_F(FileOps, ProcMagicLinksAreRefused) {
  // With the real "/" as root, /proc/<pid>/root|cwd|fd/N are magic links: ELOOP.
  int real_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(real_root, 0);
  FileOpContext real = ctx_;
  real.root_fd = real_root;
  real.base = "/";
  int probe = open("/etc/hostname", O_RDONLY | O_CLOEXEC);
  const std::string self = "/proc/" + std::to_string(getpid());
  for (std::string path : {self + "/root/etc/hostname", std::string("/proc/self/root/etc/hostname"),
                           self + "/cwd/x", self + "/fd/" + std::to_string(probe),
                           std::string("/proc/thread-self/root/etc/hostname")}) {
    auto r = ReadFile(real, {1, path, 0, 100});
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.error().err, ELOOP) << path << ": " << r.error().message;
    EXPECT_THAT(r.error().message, HasSubstr("magic link"));
  }
  // /proc files report size 0: a full chunk must not be taken for the end.
  auto status = ReadFile(real, {1, "/proc/meminfo", 0, 100});
  ASSERT_TRUE(status.ok()) << status.error().message;
  EXPECT_EQ(status->data.size(), 100u);
  EXPECT_FALSE(status->eof);
  // A plain symlink that leads to a magic link is refused as well.
  ASSERT_EQ(symlink("/proc/self/root", (root_ + "/workspace/to-proc-root").c_str()), 0);
  std::string via = root_.substr(1) + "/workspace/to-proc-root/etc/hostname";
  auto r = ReadFile(real, {1, via, 0, 100});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().err, ELOOP);
  close(probe);
  close(real_root);
}

// The kernel exempts a process from the access checks on its own /proc/<pid> entries;
// file operations run in cell init, so they refuse init's entries themselves (the code in
// the cell gets EACCES for /proc/1/maps, /proc/1/fd). Other processes' entries are left to
// the kernel's checks.
TEST_F(FileOps, OwnProcEntriesAreRefused) {
  int real_root = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(real_root, 0);
  FileOpContext real = ctx_;
  real.root_fd = real_root;
  real.base = "/";
  const std::string self = "/proc/" + std::to_string(getpid());
  for (std::string path : {self + "/maps", std::string("/proc/self/maps"), self + "/status",
                           std::string("/proc/thread-self/status"), self + "/fdinfo/0"}) {
    auto r = ReadFile(real, {1, path, 0, 100});
    ASSERT_FALSE(r.ok()) << path;
    EXPECT_EQ(r.error().err, EACCES) << path << ": " << r.error().message;
    EXPECT_THAT(r.error().message, HasSubstr("own /proc entries are refused"));
  }
  auto list = ListDir(real, {1, "/proc/self/fd", 0});
  ASSERT_FALSE(list.ok());
  EXPECT_EQ(list.error().err, EACCES);
  Status w = WriteFile(real, {1, "/proc/self/timerslack_ns", 0, 0, 0644, "1"});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().err, EACCES) << w.error().message;
  // Another process's entries: the kernel decides (status is world-readable).
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  auto other = ReadFile(real, {1, "/proc/" + std::to_string(child) + "/status", 0, 100});
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  ASSERT_TRUE(other.ok()) << other.error().message;
  EXPECT_THAT(other->data, HasSubstr("Name:"));
  close(real_root);
}

TEST_F(FileOps, RunsAsTheSandboxUserNotAsInit) {
  if (!is_root_) GTEST_SKIP() << "needs root to have a second identity";
  Put("/etc/shadow", "secret");
  ASSERT_EQ(chown((root_ + "/etc/shadow").c_str(), 0, 0), 0);
  ASSERT_EQ(chmod((root_ + "/etc/shadow").c_str(), 0600), 0);
  auto r = Read("/etc/shadow");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().err, EACCES);  // CAP_DAC_OVERRIDE was not in effect
  // A root-owned directory cannot be written into either.
  ASSERT_EQ(chown((root_ + "/etc").c_str(), 0, 0), 0);
  Status w = WriteFile(ctx_, {1, "/etc/new", 0, control::kWriteCreate, 0644, "x"});
  ASSERT_FALSE(w.ok());
  EXPECT_EQ(w.error().err, EACCES);
  // Identity and capabilities are restored afterwards.
  EXPECT_EQ(setfsuid(-1), 0);
  std::ifstream shadow(root_ + "/etc/shadow");
  std::string content;
  shadow >> content;
  EXPECT_EQ(content, "secret");
}

TEST_F(FileOps, NonRegularFilesAreRefusedWithoutBlocking) {
  ASSERT_EQ(mkfifo((root_ + "/workspace/fifo").c_str(), 0666), 0);
  ChownTree(root_ + "/workspace");
  auto r = Read("fifo");  // a blocking open would hang the test here
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("not a regular file"));
  EXPECT_EQ(Read("/workspace").error().err, EISDIR);
  auto big = ReadFile(ctx_, {1, "x", 0, control::kMaxFileChunkBytes + 1});
  ASSERT_FALSE(big.ok());
  EXPECT_THAT(big.error().message, HasSubstr("max_bytes"));
}

// A detached exec's output file (issue 32): made or emptied as the sandbox user, never
// through a symlink, never a FIFO (init would block on it) or a directory.
TEST_F(FileOps, OutputFileIsARegularFileEmptiedAndNeverFollowed) {
  Put("/workspace/old.log", "stale output");
  ChownTree(root_ + "/workspace");
  auto fd = CreateOutputFile(ctx_, "old.log");
  ASSERT_TRUE(fd.ok()) << fd.error().message;
  ASSERT_EQ(write(fd->get(), "new", 3), 3);
  EXPECT_EQ(ReadOk("old.log"), "new");
  auto made = CreateOutputFile(ctx_, "new.log");
  ASSERT_TRUE(made.ok()) << made.error().message;
  struct stat st;
  ASSERT_EQ(stat((root_ + "/workspace/new.log").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, ctx_.uid);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_EQ(symlink("/etc/passwd", (root_ + "/workspace/link.log").c_str()), 0);
  auto via_link = CreateOutputFile(ctx_, "link.log");
  ASSERT_FALSE(via_link.ok());
  EXPECT_EQ(via_link.error().err, ELOOP);
  ASSERT_EQ(mkfifo((root_ + "/workspace/fifo.log").c_str(), 0666), 0);
  ChownTree(root_ + "/workspace");
  // Without a reader the non-blocking open fails (ENXIO); with one, fstat refuses it.
  EXPECT_FALSE(CreateOutputFile(ctx_, "fifo.log").ok());  // a blocking open would hang here
  int reader = open((root_ + "/workspace/fifo.log").c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  auto fifo = CreateOutputFile(ctx_, "fifo.log");
  close(reader);
  ASSERT_FALSE(fifo.ok());
  EXPECT_THAT(fifo.error().message, HasSubstr("not a regular file"));
  EXPECT_FALSE(CreateOutputFile(ctx_, "/workspace").ok());
  EXPECT_FALSE(CreateOutputFile(ctx_, "no/such/dir.log").ok());
}

TEST_F(FileOps, ListDirPagesThroughLargeDirectories) {
  fs::create_directories(root_ + "/workspace/many");
  for (int i = 0; i < 2500; ++i) Put("/workspace/many/f" + std::to_string(i), "");
  ChownTree(root_ + "/workspace");
  std::set<std::string> names;
  uint64_t cookie = 0;
  int pages = 0;
  do {
    auto r = ListDir(ctx_, {1, "many", cookie});
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_LE(r->entries.size(), control::kMaxDirEntries);
    for (auto& e : r->entries) {
      EXPECT_TRUE(names.insert(e.name).second) << "duplicate " << e.name;
      EXPECT_EQ(e.stat.type, FileType::kRegular);
    }
    cookie = r->next_cookie;
    ++pages;
  } while (cookie != 0 && pages < 100);
  EXPECT_EQ(names.size(), 2500u);
  EXPECT_GE(pages, 3);
}

TEST_F(FileOps, StatDistinguishesLinksAndTargets) {
  ASSERT_EQ(symlink("/etc/passwd", (root_ + "/workspace/l").c_str()), 0);
  auto link = StatPath(ctx_, {1, "l", 0});
  ASSERT_TRUE(link.ok()) << link.error().message;
  EXPECT_EQ(link->stat.type, FileType::kSymlink);
  auto target = StatPath(ctx_, {1, "l", 1});
  ASSERT_TRUE(target.ok()) << target.error().message;
  EXPECT_EQ(target->stat.type, FileType::kRegular);
  EXPECT_EQ(target->stat.size, 12u);  // the cell's passwd, not the host's
  EXPECT_EQ(StatPath(ctx_, {1, "/", 0})->stat.type, FileType::kDirectory);
  EXPECT_EQ(StatPath(ctx_, {1, "missing", 0}).error().err, ENOENT);
}

TEST_F(FileOps, MkdirWithAndWithoutParents) {
  ASSERT_TRUE(MakeDirectory(ctx_, {1, "a/b/c", 0750, 1}).ok());
  EXPECT_TRUE(fs::is_directory(root_ + "/workspace/a/b/c"));
  EXPECT_TRUE(MakeDirectory(ctx_, {1, "a/b/c", 0750, 1}).ok());  // -p is idempotent
  EXPECT_EQ(MakeDirectory(ctx_, {1, "a/b/c", 0750, 0}).error().err, EEXIST);
  EXPECT_EQ(MakeDirectory(ctx_, {1, "x/y", 0750, 0}).error().err, ENOENT);
  Put("/workspace/file", "");
  ChownTree(root_ + "/workspace");
  EXPECT_EQ(MakeDirectory(ctx_, {1, "file/sub", 0750, 1}).error().err, ENOTDIR);
}

TEST_F(FileOps, RecursiveRemoveDoesNotFollowSymlinks) {
  fs::create_directories(root_ + "/keep");
  Put("/keep/precious", "p");
  fs::create_directories(root_ + "/workspace/tree/d1/d2");
  Put("/workspace/tree/d1/d2/f", "f");
  ChownTree(root_);
  ASSERT_EQ(symlink("/keep", (root_ + "/workspace/tree/d1/link").c_str()), 0);
  ASSERT_EQ(symlink((root_ + "/keep").c_str(), (root_ + "/workspace/tree/hostlink").c_str()), 0);
  EXPECT_EQ(RemovePath(ctx_, {1, "tree", 0}).error().err, ENOTEMPTY);
  ASSERT_TRUE(RemovePath(ctx_, {1, "tree", 1}).ok());
  EXPECT_FALSE(fs::exists(root_ + "/workspace/tree"));
  EXPECT_TRUE(fs::exists(root_ + "/keep/precious"));
  // Removing a link removes the link, not its target.
  ASSERT_EQ(symlink("/keep", (root_ + "/workspace/l").c_str()), 0);
  ASSERT_TRUE(RemovePath(ctx_, {1, "l", 1}).ok());
  EXPECT_TRUE(fs::exists(root_ + "/keep/precious"));
  EXPECT_THAT(RemovePath(ctx_, {1, "/", 1}).error().message, HasSubstr("cell root"));
}

}  // namespace
}  // namespace mcpcell::sandbox
