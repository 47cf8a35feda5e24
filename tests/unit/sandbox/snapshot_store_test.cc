// The snapshot store on temp dirs standing in for a cell's layers (files owned by host ids
// base + in-cell id, as in a cell): round trip, dedupe, the hash cache, tenants, quota,
// names, Verify, GC, export/import and the archives import must refuse. Needs root (chown
// to other ids, whiteouts); skips otherwise.
#include "sandbox/snapshot_store.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox {
namespace {

namespace fs = std::filesystem;
using testing::HasSubstr;
constexpr uid_t kBase = 200000;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t CountFiles(const std::string& dir) {
  if (!fs::exists(dir)) return 0;
  return static_cast<size_t>(std::distance(fs::directory_iterator(dir), fs::directory_iterator()));
}

class SnapshotStoreTest : public testing::Test {
 protected:
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root: chown to a cell's ids, mknod whiteouts";
    char tmpl[] = "/tmp/mcpcell-snap-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    tmp_ = tmpl;
    root_ = tmp_ + "/root";
    ws_ = tmp_ + "/ws";
    fs::create_directories(root_);
    fs::create_directories(ws_);
    store_ = std::make_unique<SnapshotStore>(tmp_ + "/store");
  }
  void TearDown() override {
    if (!tmp_.empty()) fs::remove_all(tmp_);
  }
  // A file owned by in-cell uid/gid `id` (host kBase + id).
  void Put(const std::string& path, const std::string& text, mode_t mode = 0644, uid_t id = 1000) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
    ASSERT_EQ(chown(path.c_str(), kBase + id, kBase + id), 0);
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }
  std::vector<LayerSource> Sources() {
    return {{"root", root_, kBase, kBase, {}}, {"workspace", ws_, kBase, kBase, {}}};
  }
  // What a cell leaves: everything owned by its ids. Entries the test made as host root
  // become the cell's root (kBase); other owners stay.
  void OwnByCell() {
    for (const std::string& top : {root_, ws_}) {
      ASSERT_EQ(lchown(top.c_str(), kBase, kBase), 0);
      for (auto& e : fs::recursive_directory_iterator(top)) {
        struct stat st;
        ASSERT_EQ(lstat(e.path().c_str(), &st), 0);
        if (st.st_uid == 0) {
          ASSERT_EQ(lchown(e.path().c_str(), kBase, kBase), 0);
        }
      }
    }
  }
  CaptureReport Capture(const std::string& name, const std::string& tenant = "acme",
                        SnapshotLimits limits = {}) {
    OwnByCell();
    auto r = store_->Capture(tenant, name, Sources(), limits);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : CaptureReport{};
  }
  std::string Layer(const std::string& id, const std::string& layer) {
    return tmp_ + "/store/snaps/" + id + "/layers/" + layer;
  }
  std::string Objects() { return tmp_ + "/store/objects"; }
  std::string Snaps() { return tmp_ + "/store/snaps"; }

  std::string tmp_, root_, ws_;
  std::unique_ptr<SnapshotStore> store_;
};

TEST_F(SnapshotStoreTest, RoundTripKeepsFilesDirsSymlinksWhiteoutsOpaqueAndModes) {
  Put(root_ + "/etc/app.conf", "conf\n", 0640);
  Put(root_ + "/usr-local/bin/tool", "#!/bin/sh\n", 04755);
  Put(root_ + "/run/secrets/token", "s3cret");
  Put(root_ + "/etc/hostowned", "x", 0644, 0);
  ASSERT_EQ(chown((root_ + "/etc/hostowned").c_str(), 5, 5), 0);  // outside the cell's range
  fs::create_directories(root_ + "/opq");
  ASSERT_EQ(lsetxattr((root_ + "/opq").c_str(), "user.overlay.opaque", "y", 1, 0), 0);
  ASSERT_EQ(symlink("/etc/app.conf", (root_ + "/link").c_str()), 0);
  ASSERT_EQ(mknod((root_ + "/gone").c_str(), S_IFCHR, makedev(0, 0)), 0);
  ASSERT_EQ(mkfifo((root_ + "/pipe").c_str(), 0600), 0);
  Put(ws_ + "/main.py", "print(1)\n", 0755);
  timespec times[2] = {{1000, 0}, {1234567, 0}};
  ASSERT_EQ(utimensat(AT_FDCWD, (ws_ + "/main.py").c_str(), times, 0), 0);

  CaptureReport r = Capture("first");
  const std::string root = Layer(r.info.id, "root"), ws = Layer(r.info.id, "workspace");
  EXPECT_EQ(Slurp(root + "/etc/app.conf"), "conf\n");
  struct stat st;
  ASSERT_EQ(stat((root + "/etc/app.conf").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
  EXPECT_EQ(st.st_uid, 1000u);  // canonical: the in-cell uid
  ASSERT_EQ(stat((root + "/usr-local/bin/tool").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0755u);
  EXPECT_THAT(r.setid_stripped, testing::ElementsAre("root:usr-local/bin/tool"));
  ASSERT_EQ(stat((root + "/etc/hostowned").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 65534u);
  EXPECT_EQ(r.mapped_to_nobody, 2u);  // its uid and its gid
  EXPECT_FALSE(fs::exists(root + "/run"));
  char v[4] = {};
  EXPECT_EQ(lgetxattr((root + "/opq").c_str(), "user.overlay.opaque", v, sizeof v), 1);
  EXPECT_EQ(fs::read_symlink(root + "/link"), "/etc/app.conf");
  ASSERT_EQ(lstat((root + "/gone").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == 0);
  EXPECT_FALSE(fs::exists(root + "/pipe"));
  EXPECT_THAT(r.skipped, testing::ElementsAre("root:pipe (fifo)"));
  ASSERT_EQ(stat((ws + "/main.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mtim.tv_sec, 1234567);
  EXPECT_EQ(Slurp(ws + "/main.py"), "print(1)\n");
  EXPECT_TRUE(store_->Verify(r.info.id).ok());

  auto got = store_->Get("acme", "first");
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->id, r.info.id);
  EXPECT_EQ(got->digest, r.info.digest);
  ASSERT_EQ(got->layers.size(), 2u);
  auto dirs = store_->LayerDirs(r.info.id);
  ASSERT_TRUE(dirs.ok());
  EXPECT_EQ((*dirs)["workspace"], ws);
}

TEST_F(SnapshotStoreTest, SymlinksAreNotFollowedAndExcludedPathsAreLeftOut) {
  Put(ws_ + "/keep", "k");
  Put(ws_ + "/cache/big/blob", "not wanted");
  ASSERT_EQ(symlink("/etc", (ws_ + "/escape").c_str()), 0);
  OwnByCell();
  std::vector<LayerSource> src = {{"workspace", ws_, kBase, kBase, {"cache/big"}}};
  auto r = store_->Capture("acme", "x", src, {});
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->files_hashed, 1u);  // keep: nothing under /etc, nothing excluded
  EXPECT_EQ(CountFiles(Objects()), 1u);
  const std::string ws = Layer(r->info.id, "workspace");
  EXPECT_TRUE(fs::is_symlink(ws + "/escape"));
  EXPECT_TRUE(fs::exists(ws + "/cache"));
  EXPECT_FALSE(fs::exists(ws + "/cache/big"));
}

// A fork gets a fresh identity: what a cell wrote as its machine id or random seed stays
// with it (the rest of /etc and /var/lib is captured).
TEST_F(SnapshotStoreTest, MachineIdAndRandomSeedAreNeverCaptured) {
  Put(root_ + "/etc/machine-id", "0123456789abcdef0123456789abcdef\n", 0444, 0);
  Put(root_ + "/etc/hostname", "cell\n", 0644, 0);
  Put(root_ + "/var/lib/dbus/machine-id", "0123456789abcdef0123456789abcdef\n", 0444, 0);
  Put(root_ + "/var/lib/systemd/random-seed", std::string(512, 'r'), 0600, 0);
  Put(root_ + "/var/lib/systemd/other", "kept", 0644, 0);
  CaptureReport r = Capture("identity");
  const std::string root = Layer(r.info.id, "root");
  EXPECT_FALSE(fs::exists(root + "/etc/machine-id"));
  EXPECT_FALSE(fs::exists(root + "/var/lib/dbus/machine-id"));
  EXPECT_FALSE(fs::exists(root + "/var/lib/systemd/random-seed"));
  EXPECT_TRUE(fs::exists(root + "/etc/hostname"));
  EXPECT_TRUE(fs::exists(root + "/var/lib/systemd/other"));
  EXPECT_TRUE(store_->Verify(r.info.id).ok());
}

TEST_F(SnapshotStoreTest, CaptureOfAMissingDirFailsAndLeavesNothing) {
  Put(ws_ + "/a", "a");
  std::vector<LayerSource> src = {{"workspace", ws_, kBase, kBase, {}},
                                  {"usr", tmp_ + "/nosuch", kBase, kBase, {}}};
  auto r = store_->Capture("acme", "x", src, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("layer usr"));
  EXPECT_THAT(r.error().message, HasSubstr("ENOENT"));
  EXPECT_EQ(CountFiles(Snaps()), 0u);
  EXPECT_EQ(CountFiles(Objects()), 0u);
}

// A cell over snapshot P: its upper holds a whiteout, a changed file, an opaque dir and a
// new file; the child snapshot is what that cell's overlay shows.
TEST_F(SnapshotStoreTest, CaptureOverAParentAppliesTheUpperAsTheOverlayShowsIt) {
  Put(ws_ + "/keep", "keep");
  Put(ws_ + "/gone", "gone");
  Put(ws_ + "/changed", "old");
  Put(ws_ + "/dir/a", "a");
  Put(ws_ + "/dir/b", "b");
  Put(ws_ + "/sub/x", "x");
  CaptureReport p = Capture("parent");
  fs::remove_all(ws_);
  fs::create_directories(ws_);
  ASSERT_EQ(mknod((ws_ + "/gone").c_str(), S_IFCHR, makedev(0, 0)), 0);
  Put(ws_ + "/changed", "new");
  Put(ws_ + "/dir/c", "c");
  ASSERT_EQ(lsetxattr((ws_ + "/dir").c_str(), "user.overlay.opaque", "y", 1, 0), 0);
  Put(ws_ + "/sub/y", "y");  // sub not opaque: x stays
  Put(ws_ + "/added", "added");
  OwnByCell();
  std::vector<LayerSource> src = {{"workspace", ws_, kBase, kBase, {}}};
  auto c = store_->Capture("acme", "child", src, {}, "parent");
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->files_hashed, 4u);  // only the upper's files are read
  const std::string ws = Layer(c->info.id, "workspace");
  EXPECT_EQ(Slurp(ws + "/keep"), "keep");
  EXPECT_EQ(Slurp(ws + "/changed"), "new");
  EXPECT_EQ(Slurp(ws + "/dir/c"), "c");
  EXPECT_FALSE(fs::exists(ws + "/dir/a"));
  EXPECT_EQ(Slurp(ws + "/sub/x"), "x");
  EXPECT_EQ(Slurp(ws + "/sub/y"), "y");
  EXPECT_EQ(Slurp(ws + "/added"), "added");
  struct stat st;
  ASSERT_EQ(lstat((ws + "/gone").c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode) && st.st_rdev == 0);
  EXPECT_TRUE(store_->Verify(c->info.id).ok());
  EXPECT_EQ(Slurp(Layer(p.info.id, "workspace") + "/changed"), "old");  // parent unchanged
  auto unknown = store_->Capture("other", "x", src, {}, "parent");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.error().message, HasSubstr("parent: snapshot \"parent\" not found"));
}

TEST_F(SnapshotStoreTest, IdenticalFilesAreStoredOnceAcrossSnapshots) {
  Put(ws_ + "/a", std::string(10000, 'a'));
  Put(ws_ + "/b", std::string(10000, 'a'));  // same content, mode and owner as a
  Put(ws_ + "/c", "c");
  CaptureReport one = Capture("one");
  EXPECT_EQ(CountFiles(Objects()), 2u);
  EXPECT_EQ(one.info.stored_bytes, 10001u);
  CaptureReport two = Capture("two");
  EXPECT_EQ(CountFiles(Objects()), 2u);
  EXPECT_EQ(two.new_object_bytes, 0u);
  auto list = store_->List("acme");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].name, "one");  // oldest first
  EXPECT_EQ((*list)[1].id, two.info.id);
  struct stat s1, s2;
  ASSERT_EQ(stat((Layer(one.info.id, "workspace") + "/a").c_str(), &s1), 0);
  ASSERT_EQ(stat((Layer(two.info.id, "workspace") + "/b").c_str(), &s2), 0);
  EXPECT_EQ(s1.st_ino, s2.st_ino);
}

TEST_F(SnapshotStoreTest, SecondSnapshotAfterOneChangeRehashesOnlyThatFile) {
  for (int i = 0; i < 20; ++i) Put(ws_ + "/f" + std::to_string(i), std::to_string(i));
  CaptureReport one = Capture("one");
  EXPECT_EQ(one.files_hashed, 20u);
  Put(ws_ + "/f7", "changed");
  CaptureReport two = Capture("two");
  EXPECT_EQ(two.files_hashed, 1u);
  EXPECT_EQ(two.files_from_cache, 19u);
  EXPECT_EQ(two.new_object_bytes, 7u);
  EXPECT_EQ(Slurp(Layer(two.info.id, "workspace") + "/f7"), "changed");
  EXPECT_EQ(Slurp(Layer(one.info.id, "workspace") + "/f7"), "7");
}

TEST_F(SnapshotStoreTest, ReadingAStoreThatDoesNotExistCreatesNothing) {
  auto list = store_->List("acme");
  ASSERT_TRUE(list.ok()) << list.error().message;
  EXPECT_TRUE(list->empty());
  auto got = store_->Get("acme", "x");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.error().message, "snapshot \"x\" not found");
  EXPECT_FALSE(store_->Delete("acme", "x").ok());
  EXPECT_FALSE(fs::exists(tmp_ + "/store"));
}

TEST_F(SnapshotStoreTest, AnotherTenantsSnapshotIsNotFoundLikeAnUnknownOne) {
  Put(ws_ + "/a", "a");
  CaptureReport r = Capture("mine", "acme");
  auto theirs = store_->Get("other", r.info.id);
  ASSERT_FALSE(theirs.ok());
  EXPECT_EQ(theirs.error().message, "snapshot \"" + r.info.id + "\" not found");
  auto unknown = store_->Get("acme", "nosuch");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.error().message, "snapshot \"nosuch\" not found");
  EXPECT_TRUE(store_->List("other")->empty());
  EXPECT_FALSE(store_->Delete("other", "mine").ok());
  EXPECT_EQ(store_->List("acme")->size(), 1u);
}

TEST_F(SnapshotStoreTest, AHibernationSnapshotKeepsItsKindAndAnUnknownKindIsRefused) {
  Put(ws_ + "/a", "a");
  OwnByCell();
  auto plain = store_->Capture("acme", "plain", Sources(), {});
  ASSERT_TRUE(plain.ok()) << plain.error().message;
  EXPECT_EQ(plain->info.kind, "");
  auto hidden = store_->Capture("acme", "", Sources(), {}, "", kSnapshotKindHibernation);
  ASSERT_TRUE(hidden.ok()) << hidden.error().message;
  EXPECT_EQ(hidden->info.kind, kSnapshotKindHibernation);
  auto got = store_->Get("acme", hidden->info.id);
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->kind, kSnapshotKindHibernation);
  auto list = store_->List("acme");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].kind + "|" + (*list)[1].kind, std::string("|") + kSnapshotKindHibernation);
  EXPECT_TRUE(store_->Verify(hidden->info.id).ok());
  auto bad = store_->Capture("acme", "", Sources(), {}, "", "secret");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.error().message, "capture: snapshot kind \"secret\" is not known");
}

TEST_F(SnapshotStoreTest, CaptureOverQuotaFailsAndLeavesNothing) {
  Put(ws_ + "/big", std::string(5000, 'x'));
  Put(ws_ + "/small", "y");
  auto r = store_->Capture("acme", "q", Sources(), SnapshotLimits{4096});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("snapshot storage quota exceeded"));
  EXPECT_EQ(CountFiles(Snaps()), 0u);
  EXPECT_EQ(CountFiles(Objects()), 0u);
  // Within the quota it works; then the tenant's usage counts against the next one.
  ASSERT_TRUE(store_->Capture("acme", "q", Sources(), SnapshotLimits{8000}).ok());
  auto again = store_->Capture("acme", "q2", Sources(), SnapshotLimits{8000});
  ASSERT_FALSE(again.ok());
  EXPECT_THAT(again.error().message, HasSubstr("quota"));
}

TEST_F(SnapshotStoreTest, BadNamesAreRefusedNamingTheRule) {
  for (std::string bad : std::vector<std::string>{"a/b", "", std::string(65, 'n'), "..", "x y"}) {
    EXPECT_FALSE(CheckSnapshotName(bad).ok()) << bad;
    if (bad.empty()) continue;  // "" means unnamed to Capture
    auto r = store_->Capture("acme", bad, Sources(), {});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.error().message, HasSubstr("snapshot name"));
  }
  EXPECT_THAT(CheckSnapshotName("a/b").error().message, HasSubstr("A-Z a-z 0-9 . _ -"));
  EXPECT_TRUE(CheckSnapshotName("v1.2_final-3").ok());
  Put(ws_ + "/a", "a");
  Capture("taken");
  auto dup = store_->Capture("acme", "taken", Sources(), {});
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(dup.error().message, HasSubstr("exists already"));
}

TEST_F(SnapshotStoreTest, VerifyNamesTheCorruptedPath) {
  Put(ws_ + "/ok", "fine");
  Put(ws_ + "/dir/victim", "original");
  CaptureReport r = Capture("v");
  ASSERT_TRUE(store_->Verify(r.info.id).ok());
  std::ofstream(Layer(r.info.id, "workspace") + "/dir/victim", std::ios::binary) << "tampered";
  Status s = store_->Verify(r.info.id);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("\"dir/victim\""));
  EXPECT_THAT(s.error().message, HasSubstr("layer workspace"));
}

// A Verify records the objects it hashed with their stat stamps, so the next one (a
// restore, a fork) reads only what changed since; a written object has a new stamp and is
// hashed again (above), and rehash_all reads every byte whatever the record says.
TEST_F(SnapshotStoreTest, VerifyRecordsWhatItHashedAndRehashAllReadsEverything) {
  Put(ws_ + "/a", "alpha");
  Put(ws_ + "/b", "bravo");
  CaptureReport r = Capture("v");
  ASSERT_TRUE(store_->Verify(r.info.id).ok());
  std::ifstream in(tmp_ + "/store/verified.json");
  std::stringstream record;
  record << in.rdbuf();
  Result<SnapshotInfo> info = store_->Get("acme", r.info.id);
  ASSERT_TRUE(info.ok()) << info.error().message;
  int files = 0;
  for (const SnapshotLayer& layer : info->layers) {
    for (const SnapshotEntry& e : layer.entries) {
      if (e.type != SnapshotEntry::Type::kFile) continue;
      EXPECT_THAT(record.str(), HasSubstr(e.sha256));
      ++files;
    }
  }
  EXPECT_EQ(files, 2);
  EXPECT_TRUE(store_->Verify(r.info.id).ok());
  std::ofstream(Layer(r.info.id, "workspace") + "/b", std::ios::binary) << "BRAVO";
  Status s = store_->Verify(r.info.id, /*rehash_all=*/true);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("\"b\""));
}

// Capture records the objects it hashed on their way in, so the first restore or fork
// after a snapshot (a Verify) reads no content; linking them into a second snapshot and
// deleting the first keep that record; a written object is still caught.
TEST_F(SnapshotStoreTest, VerifyRightAfterCaptureReadsNothingAndStillCatchesATamperedObject) {
  Put(ws_ + "/a", std::string(100000, 'a'));
  Put(ws_ + "/b", "bravo");
  Put(root_ + "/etc/empty", "");
  CaptureReport one = Capture("one");
  uint64_t hashed = 1;
  ASSERT_TRUE(store_->Verify(one.info.id, false, &hashed).ok());
  EXPECT_EQ(hashed, 0u);
  Put(ws_ + "/b", "BRAVO, changed");
  CaptureReport two = Capture("two");
  ASSERT_TRUE(store_->Verify(two.info.id, false, &hashed).ok());
  EXPECT_EQ(hashed, 0u);
  ASSERT_TRUE(store_->Verify(one.info.id, false, &hashed).ok());
  EXPECT_EQ(hashed, 0u);
  ASSERT_TRUE(store_->Delete("acme", "one").ok());
  ASSERT_TRUE(store_->Verify(two.info.id, false, &hashed).ok());
  EXPECT_EQ(hashed, 0u);
  ASSERT_TRUE(store_->Verify(two.info.id, /*rehash_all=*/true, &hashed).ok());
  EXPECT_EQ(hashed, 100000u + 14u);

  std::ofstream(Layer(two.info.id, "workspace") + "/a", std::ios::binary)
      << std::string(100000, 'A');
  Status s = store_->Verify(two.info.id, false, &hashed);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("\"a\""));
  EXPECT_EQ(hashed, 100000u);
}

TEST_F(SnapshotStoreTest, VerifyRightAfterImportReadsNothing) {
  Put(ws_ + "/data", std::string(50000, 'd'));
  CaptureReport r = Capture("out");
  const std::string archive = tmp_ + "/out.tar.gz";
  ASSERT_TRUE(store_->Export("acme", "out", archive).ok());
  SnapshotStore other(tmp_ + "/other");
  auto imported = other.Import("bob", archive, {});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  uint64_t hashed = 1;
  ASSERT_TRUE(other.Verify(imported->id, false, &hashed).ok());
  EXPECT_EQ(hashed, 0u);
}

TEST_F(SnapshotStoreTest, VerifyFindsAPathAddedToALayer) {
  Put(ws_ + "/ok", "fine");
  CaptureReport r = Capture("v");
  std::ofstream(Layer(r.info.id, "workspace") + "/planted") << "x";
  Status s = store_->Verify(r.info.id);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.error().message, HasSubstr("\"planted\": not in the manifest"));
}

TEST_F(SnapshotStoreTest, DeleteRemovesObjectsNoSnapshotLinks) {
  Put(ws_ + "/shared", "shared");
  Put(ws_ + "/only1", "first only");
  CaptureReport one = Capture("one");
  fs::remove(ws_ + "/only1");
  Put(ws_ + "/only2", "second only");
  CaptureReport two = Capture("two");
  EXPECT_EQ(CountFiles(Objects()), 3u);
  ASSERT_TRUE(store_->Delete("acme", "one").ok());
  EXPECT_EQ(CountFiles(Objects()), 2u);
  EXPECT_FALSE(fs::exists(tmp_ + "/store/snaps/" + one.info.id));
  EXPECT_TRUE(store_->Verify(two.info.id).ok());
  ASSERT_TRUE(store_->Delete("acme", two.info.id).ok());
  EXPECT_EQ(CountFiles(Objects()), 0u);
}

// The in-use mark is an flock on its own open file: another process's mark (a running
// server's) and this process's own both hold off a Delete; dropped, the Delete runs.
TEST_F(SnapshotStoreTest, DeleteIsRefusedWhileTheSnapshotIsMarkedInUse) {
  Put(ws_ + "/f", "base of a live cell");
  CaptureReport r = Capture("base");
  {
    Result<SnapshotUse> use = store_->MarkInUse(r.info.id);
    ASSERT_TRUE(use.ok()) << use.error().message;
    Result<SnapshotUse> second = store_->MarkInUse(r.info.id);  // a second session's
    ASSERT_TRUE(second.ok()) << second.error().message;
    SnapshotStore cli(tmp_ + "/store");  // as `mcpcell snapshot delete` opens it
    Status s = cli.Delete("acme", "base");
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.error().message, HasSubstr("snapshot " + r.info.id + " is in use"));
    *use = SnapshotUse();
    s = cli.Delete("acme", "base");
    ASSERT_FALSE(s.ok()) << "one mark is still held";
    EXPECT_TRUE(fs::exists(Layer(r.info.id, "workspace") + "/f"));
  }
  EXPECT_TRUE(store_->Delete("acme", "base").ok());
  EXPECT_FALSE(fs::exists(Snaps() + "/" + r.info.id));
  EXPECT_FALSE(fs::exists(tmp_ + "/store/inuse/" + r.info.id));
  Result<SnapshotUse> gone = store_->MarkInUse(r.info.id);
  ASSERT_FALSE(gone.ok());
  EXPECT_THAT(gone.error().message, HasSubstr("not found"));
  EXPECT_FALSE(store_->MarkInUse("not-an-id").ok());
}

// A mark held by another process (a server) is seen through the file alone.
TEST_F(SnapshotStoreTest, AnotherProcesssMarkHoldsOffADelete) {
  Put(ws_ + "/f", "x");
  CaptureReport r = Capture("base");
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    Result<SnapshotUse> use = SnapshotStore(tmp_ + "/store").MarkInUse(r.info.id);
    char c = use.ok() ? 'y' : 'n';
    (void)!write(ready[1], &c, 1);
    (void)!read(done[0], &c, 1);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  Status s = store_->Delete("acme", r.info.id);
  EXPECT_FALSE(s.ok());
  (void)!write(done[1], "x", 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  for (int fd : {ready[0], ready[1], done[0], done[1]}) close(fd);
  EXPECT_TRUE(store_->Delete("acme", r.info.id).ok());
}

TEST_F(SnapshotStoreTest, ExportThenImportIsTheSameSnapshotForAnotherTenant) {
  Put(root_ + "/etc/x", "x", 0600, 0);
  ASSERT_EQ(symlink("x", (root_ + "/etc/y").c_str()), 0);
  Put(ws_ + "/data", std::string(300000, 'd'));
  const std::string latin1 = "caf\xe9";  // not UTF-8: the manifest keeps the bytes anyway
  Put(ws_ + "/" + latin1, "bytes");
  ASSERT_EQ(symlink(("/tmp/" + latin1).c_str(), (ws_ + "/ln").c_str()), 0);
  CaptureReport r = Capture("exp");
  const std::string tar = tmp_ + "/exp.tar.gz";
  ASSERT_TRUE(store_->Export("acme", "exp", tar).ok());
  EXPECT_FALSE(store_->Export("other", "exp", tmp_ + "/no.tar.gz").ok());
  auto imported = store_->Import("other", tar, {});
  ASSERT_TRUE(imported.ok()) << imported.error().message;
  EXPECT_NE(imported->id, r.info.id);
  EXPECT_EQ(imported->digest, r.info.digest);
  EXPECT_EQ(imported->name, "exp");
  EXPECT_TRUE(store_->Verify(imported->id).ok());
  EXPECT_EQ(Slurp(Layer(imported->id, "workspace") + "/data"), std::string(300000, 'd'));
  EXPECT_EQ(fs::read_symlink(Layer(imported->id, "root") + "/etc/y"), "x");
  EXPECT_EQ(Slurp(Layer(imported->id, "workspace") + "/" + latin1), "bytes");
  EXPECT_EQ(fs::read_symlink(Layer(imported->id, "workspace") + "/ln").string(), "/tmp/" + latin1);
}

// --- archives Import must refuse, leaving nothing behind ---

struct TarEntry {
  TarEntry(std::string n, std::string c, mode_t t = AE_IFREG, std::string l = "")
      : name(std::move(n)), content(std::move(c)), type(t), link(std::move(l)) {}
  std::string name, content;
  mode_t type;
  std::string link;  // symlink target
};

void WriteTar(const std::string& path, const std::vector<TarEntry>& entries) {
  archive* a = archive_write_new();
  archive_write_add_filter_gzip(a);
  archive_write_set_format_pax_restricted(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const TarEntry& t : entries) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, t.name.c_str());
    archive_entry_set_filetype(e, t.type);
    archive_entry_set_perm(e, 0644);
    if (!t.link.empty() && t.type == AE_IFLNK) archive_entry_set_symlink(e, t.link.c_str());
    if (!t.link.empty() && t.type == AE_IFREG) archive_entry_set_hardlink(e, t.link.c_str());
    archive_entry_set_size(e, t.type == AE_IFREG ? static_cast<la_int64_t>(t.content.size()) : 0);
    archive_write_header(a, e);
    if (t.type == AE_IFREG) archive_write_data(a, t.content.data(), t.content.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

std::string Sha(const std::string& text) {
  snapshot::Sha256 h;
  h.Update(text.data(), text.size());
  return h.FinalHex();
}

SnapshotEntry Entry(const std::string& path, SnapshotEntry::Type type, uint32_t mode) {
  SnapshotEntry e;
  e.path = path;
  e.type = type;
  e.mode = mode;
  return e;
}

// A manifest with a workspace layer of the given entries (after its top dir).
std::string Manifest(std::vector<SnapshotEntry> entries) {
  SnapshotLayer layer;
  layer.name = "workspace";
  layer.entries.push_back(Entry("", SnapshotEntry::Type::kDir, 0755));
  for (auto& e : entries) layer.entries.push_back(std::move(e));
  SnapshotInfo info = snapshot::NewInfo("someone", "imp", {layer});
  return snapshot::ManifestToJson(info).dump();
}

SnapshotEntry File(const std::string& path, const std::string& content) {
  SnapshotEntry e = Entry(path, SnapshotEntry::Type::kFile, 0644);
  e.size = content.size();
  e.sha256 = Sha(content);
  return e;
}

class SnapshotImportTest : public SnapshotStoreTest {
 protected:
  void ExpectRefused(const std::vector<TarEntry>& entries, const std::string& why) {
    const std::string tar = tmp_ + "/bad.tar.gz";
    WriteTar(tar, entries);
    auto r = store_->Import("acme", tar, {});
    ASSERT_FALSE(r.ok());
    EXPECT_THAT(r.error().message, HasSubstr(why));
    EXPECT_EQ(CountFiles(Snaps()), 0u);
    EXPECT_EQ(CountFiles(Objects()), 0u);
  }
};

TEST_F(SnapshotImportTest, RefusesADotDotEntry) {
  ExpectRefused({{"manifest.json", Manifest({File("a", "a")})}, {"../x", "evil"}},
                "archive entry \"../x\"");
}

TEST_F(SnapshotImportTest, RefusesAnAbsoluteEntry) {
  ExpectRefused({{"manifest.json", Manifest({})}, {"/etc/cron.d/x", "evil"}},
                "archive entry \"/etc/cron.d/x\"");
}

TEST_F(SnapshotImportTest, RefusesALinkEntryInTheTar) {
  ExpectRefused({{"manifest.json", Manifest({})}, {"objects/" + Sha("a"), "", AE_IFLNK, "/etc"}},
                "not a file named manifest.json or objects/<sha256>");
}

TEST_F(SnapshotImportTest, RefusesAHardLinkEntryInTheTar) {
  ExpectRefused({{"manifest.json", Manifest({File("a", "")})},
                 {"objects/" + Sha(""), "", AE_IFREG, "/etc/shadow"}},
                "not a file named manifest.json or objects/<sha256>");
}

TEST_F(SnapshotImportTest, RefusesAManifestPathThroughASymlink) {
  SnapshotEntry link = Entry("esc", SnapshotEntry::Type::kSymlink, 0777);
  link.target = "/etc";
  ExpectRefused({{"manifest.json", Manifest({link, File("esc/passwd", "root::0:0")})},
                 {"objects/" + Sha("root::0:0"), "root::0:0"}},
                "its parent is not a dir listed before it");
}

TEST_F(SnapshotImportTest, RefusesAManifestPathWithDotDot) {
  ExpectRefused({{"manifest.json", Manifest({File("../x", "a")})}, {"objects/" + Sha("a"), "a"}},
                "path component \"..\" not allowed");
}

TEST_F(SnapshotImportTest, RefusesContentThatDoesNotMatchItsDigest) {
  ExpectRefused(
      {{"manifest.json", Manifest({File("a", "hello")})}, {"objects/" + Sha("hello"), "HELLO"}},
      "does not match its digest");
}

TEST_F(SnapshotImportTest, RefusesAnArchiveOverTheQuota) {
  const std::string tar = tmp_ + "/big.tar.gz";
  std::string big(5000, 'b');
  WriteTar(tar, {{"manifest.json", Manifest({File("big", big)})}, {"objects/" + Sha(big), big}});
  auto r = store_->Import("acme", tar, SnapshotLimits{4096});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.error().message, HasSubstr("quota exceeded"));
  EXPECT_EQ(CountFiles(Objects()), 0u);
  auto ok = store_->Import("acme", tar, {});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_TRUE(store_->Verify(ok->id).ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
