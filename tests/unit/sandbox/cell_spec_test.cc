// Unit tests of cell creation's pure parts: CellSpec validation and its wire codec, host
// names, id range slots, the host template and cell dir removal. No cells, no privileges.
#include "sandbox/cell_spec.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "sandbox/linux/hostname.h"
#include "sandbox/linux/mounts.h"
#include "sandbox/linux/overlay.h"
#include "sandbox/linux/user.h"
#include "sandbox/state_dir.h"

namespace mcpcell::sandbox {
namespace {

using ::testing::HasSubstr;

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/mcpcell-unit-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

CellSpec Valid() { return DefaultCellSpec("c1", "/var/lib/mcpcell"); }

std::string ErrorOf(const CellSpec& spec) {
  Status s = ValidateCellSpec(spec);
  return s.ok() ? "" : s.error().message;
}

TEST(CellSpecValidation, DefaultsAreValid) { EXPECT_EQ(ErrorOf(Valid()), ""); }

TEST(CellSpecValidation, EveryBadFieldIsNamed) {
  struct Case {
    void (*mutate)(CellSpec&);
    const char* expected;
  };
  const Case cases[] = {
      {[](CellSpec& s) { s.id = ""; }, "id:"},
      {[](CellSpec& s) { s.id = ".."; }, "id:"},
      {[](CellSpec& s) { s.id = "a/b"; }, "id:"},
      {[](CellSpec& s) { s.id = std::string(65, 'a'); }, "id:"},
      {[](CellSpec& s) { s.state_dir = "relative"; }, "state_dir: \"relative\" must be absolute"},
      {[](CellSpec& s) { s.state_dir = "/a/../b"; }, "state_dir:"},
      {[](CellSpec& s) { s.state_dir = "/a,b"; }, "must not contain ','"},
      {[](CellSpec& s) { s.rootfs.system_dirs = {"/"}; }, "rootfs.system_dirs[0]"},
      {[](CellSpec& s) { s.rootfs.system_dirs = {"/proc/sys"}; }, "rootfs.system_dirs[0]"},
      {[](CellSpec& s) {
         s.rootfs.system_dirs = {"/usr", "/opt:x"};
       },
       "rootfs.system_dirs[1]"},
      {[](CellSpec& s) {
         s.mounts = {{"/etc", "/proc/x", false}};
       },
       "mounts[0].cell_path"},
      {[](CellSpec& s) {
         s.mounts = {{"/etc", "/", false}};
       },
       "mounts[0].cell_path"},
      {[](CellSpec& s) {
         s.mounts = {{"/usr", "/workspace", false}};
       },
       "mounts[0].cell_path"},
      {[](CellSpec& s) {
         s.mounts = {{"/etc", "/x", false}};
       },
       "mounts[0].host_path: \"/etc\" (/etc) is a host system path"},
      {[](CellSpec& s) {
         s.mounts = {{"/", "/x", false}};
       },
       "mounts[0].host_path: \"/\" (/) is a host system path"},
      {[](CellSpec& s) {
         s.mounts = {{"etc", "/x", false}};
       },
       "mounts[0].host_path"},
      {[](CellSpec& s) {
         s.mounts = {{"/nonexistent-mcpcell", "/x", false}};
       },
       "mounts[0].host_path: stat(\"/nonexistent-mcpcell\"): ENOENT"},
      {[](CellSpec& s) { s.hostname = "-bad"; }, "hostname"},
      {[](CellSpec& s) { s.hostname = "has space"; }, "hostname"},
      {[](CellSpec& s) { s.sandbox_uid = 0; }, "sandbox_uid: must be in 1..65533, got 0"},
      {[](CellSpec& s) { s.sandbox_gid = 70000; }, "sandbox_gid"},
      {[](CellSpec& s) { s.sandbox_user = "root"; }, "sandbox_user"},
      {[](CellSpec& s) { s.sandbox_user = "Bad!"; }, "sandbox_user"},
      {[](CellSpec& s) { s.tmpfs.tmp_bytes = 100; }, "tmpfs.tmp_bytes: must be at least 1 MiB"},
      {[](CellSpec& s) { s.env = {"NOEQUALS"}; }, "env[0]"},
      {[](CellSpec& s) { s.env = {"=x"}; }, "env[0]"},
  };
  for (const Case& c : cases) {
    CellSpec spec = Valid();
    c.mutate(spec);
    EXPECT_THAT(ErrorOf(spec), HasSubstr(c.expected));
  }
}

TEST(CellSpecValidation, LayersNameTheirFieldAndRefuseAPersistentWorkspace) {
  TempDir dir;
  const std::string file = dir.path() + "/file";
  std::ofstream(file) << "x";
  struct Case {
    std::vector<CellLayer> layers;
    std::string workspace_host_dir;
    std::string expected;
  };
  const Case cases[] = {
      {{{"/opt", dir.path()}}, "", "layers[0].target: \"/opt\" is not"},
      {{{"/", dir.path()}, {"/usr", "relative"}}, "", "layers[1].host_dir: \"relative\" must be"},
      {{{"/", dir.path() + "/missing"}}, "", "layers[0].host_dir: stat("},
      {{{"/", file}}, "", "layers[0].host_dir: \"" + file + "\" is not a directory"},
      {{{"/", "/a:b"}}, "", "layers[0].host_dir: \"/a:b\" must not contain"},
      {{{"/usr", "/etc"}}, "", "layers[0].host_dir: \"/etc\" (/etc) is a host system path"},
      {{{"/", "/"}}, "", "layers[0].host_dir: \"/\" (/) is a host system path"},
      {{{"/workspace", dir.path()}}, dir.path(), "layers[0].target: a workspace layer cannot"},
      {std::vector<CellLayer>(kMaxCellLayers + 1, CellLayer{"/", dir.path()}), "",
       "layers: 17 layers, more than 16"},
  };
  for (const Case& c : cases) {
    CellSpec spec = Valid();
    spec.layers = c.layers;
    spec.workspace_host_dir = c.workspace_host_dir;
    EXPECT_THAT(ErrorOf(spec), HasSubstr(c.expected));
  }
  CellSpec ok = Valid();
  ok.layers = {{"/", dir.path()}, {"/usr", dir.path()}, {"/workspace", dir.path()}};
  EXPECT_EQ(ErrorOf(ok), "");
}

TEST(CellSpecCodec, LayersRoundTripInOrderAndTheirCountIsCapped) {
  CellSpec spec = Valid();
  spec.layers = {{"/", "/s/2/root"}, {"/", "/s/1/root"}, {"/workspace", "/s/1/ws"}};
  Result<CellSpec> back = DecodeCellSpec(EncodeCellSpec(spec));
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->layers.size(), 3u);
  EXPECT_EQ(back->layers[0].host_dir, "/s/2/root");
  EXPECT_EQ(back->layers[1].host_dir, "/s/1/root");
  EXPECT_EQ(back->layers[2].target, "/workspace");
  spec.layers.assign(kMaxCellLayers + 1, CellLayer{"/", "/s"});
  Result<CellSpec> capped = DecodeCellSpec(EncodeCellSpec(spec));
  ASSERT_FALSE(capped.ok());
  EXPECT_THAT(capped.error().message, HasSubstr("layers: more entries than the cap"));
}

TEST(CellSpecCodec, RoundTripIsExact) {
  CellSpec spec = Valid();
  spec.rootfs.skeleton_dir = "/s";
  spec.rootfs.system_dirs = {"/usr", "/opt"};
  spec.workspace_host_dir = "/home/u/project";
  spec.layers = {{"/", "/snap/root"}, {"/usr", "/snap/usr"}};
  spec.mounts = {{"/data", "/data", true}, {"/etc/hosts", "/x/hosts", false}};
  spec.limits = {1 << 30, 100, 1500};
  spec.rlimits.nofile = 4096;
  spec.tmpfs.shm_bytes = 8 << 20;
  spec.hostname = "h";
  spec.sandbox_uid = 1234;
  spec.seccomp = false;
  spec.egress_proxy_port = 3128;
  std::string wire = EncodeCellSpec(spec);
  Result<CellSpec> back = DecodeCellSpec(wire);
  ASSERT_TRUE(back.ok()) << back.error().message;
  EXPECT_EQ(EncodeCellSpec(*back), wire);
  EXPECT_EQ(back->mounts[1].cell_path, "/x/hosts");
  EXPECT_TRUE(back->mounts[0].writable);
  EXPECT_EQ(back->limits.cpu_millicores, 1500u);
  EXPECT_EQ(back->sandbox_uid, 1234u);
  EXPECT_FALSE(back->seccomp);
}

TEST(CellSpecCodec, EveryTruncationAndDamageIsRejected) {
  std::string wire = EncodeCellSpec(Valid());
  for (size_t cut = 0; cut < wire.size(); ++cut) {
    Result<CellSpec> r = DecodeCellSpec(std::string_view(wire).substr(0, cut));
    ASSERT_FALSE(r.ok()) << "accepted a spec cut at " << cut;
    EXPECT_THAT(r.error().message, HasSubstr("cell spec: "));
  }
  EXPECT_THAT(DecodeCellSpec(wire + '\0').error().message, HasSubstr("trailing bytes"));
  std::string bad_magic = wire;
  bad_magic[0] ^= 1;
  EXPECT_THAT(DecodeCellSpec(bad_magic).error().message, HasSubstr("magic"));
  std::string bad_version = wire;
  bad_version[4] = 9;
  EXPECT_THAT(DecodeCellSpec(bad_version).error().message, HasSubstr("version"));
  std::string huge = wire;
  uint32_t big = 1u << 30;
  std::memcpy(huge.data() + 8, &big, 4);  // the id's length
  EXPECT_THAT(DecodeCellSpec(huge).error().message, HasSubstr("id: string longer than the cap"));
  // A boolean that is neither 0 nor 1 (seccomp, just before the last field).
  std::string bad_bool = wire;
  bad_bool[bad_bool.size() - 8] = 2;
  EXPECT_THAT(DecodeCellSpec(bad_bool).error().message, HasSubstr("seccomp: not a boolean"));
  // The last field, egress_proxy_port, must be a port number.
  std::string bad_port = wire;
  uint32_t not_a_port = 70000;
  std::memcpy(bad_port.data() + bad_port.size() - 4, &not_a_port, 4);
  EXPECT_THAT(DecodeCellSpec(bad_port).error().message,
              HasSubstr("egress_proxy_port: not a port number"));
}

TEST(Hostname, DefaultIsDerivedFromTheIdAndValid) {
  CellSpec spec = Valid();
  spec.id = "abc_def";
  EXPECT_EQ(CellHostname(spec), "cell-abc-def");
  spec.id = std::string(64, 'x');
  EXPECT_EQ(CellHostname(spec).size(), 63u);
  EXPECT_TRUE(ValidateHostname(CellHostname(spec)).ok());
  spec.hostname = "given";
  EXPECT_EQ(CellHostname(spec), "given");
  EXPECT_FALSE(ValidateHostname(std::string(64, 'a')).ok());
}

TEST(GenerateCellId, IsValidAndUnique) {
  std::string a = GenerateCellId(), b = GenerateCellId();
  EXPECT_NE(a, b);
  CellSpec spec = Valid();
  spec.id = a;
  EXPECT_EQ(ErrorOf(spec), "");
}

TEST(IdRangeSlots, ClaimsAreExclusiveAndReleasable) {
  TempDir dir;
  std::string ranges = dir.path() + "/idranges";
  Result<int> a = ClaimIdRangeSlot(ranges, "cell-a");
  Result<int> b = ClaimIdRangeSlot(ranges, "cell-b");
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, 0);
  EXPECT_EQ(*b, 1);
  EXPECT_EQ(FindIdRangeSlot(ranges, "cell-b"), 1);
  EXPECT_EQ(FindIdRangeSlot(ranges, "cell-c"), -1);
  ASSERT_TRUE(ReleaseIdRangeSlot(ranges, *a).ok());
  Result<int> c = ClaimIdRangeSlot(ranges, "cell-c");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(*c, 0) << "a released slot is reused";
  EXPECT_TRUE(ReleaseIdRangeSlot(ranges, 77).ok()) << "a missing claim is not an error";
}

TEST(IdRangeSlots, AClaimIsASymlinkNamingItsOwnerAndOldClaimFilesStillCount) {
  TempDir dir;
  std::string ranges = dir.path() + "/idranges";
  Result<int> a = ClaimIdRangeSlot(ranges, "cell-a");
  ASSERT_TRUE(a.ok()) << a.error().message;
  char target[80] = {};
  ASSERT_EQ(::readlink((ranges + "/0").c_str(), target, sizeof target - 1), 6)
      << "the claim is made whole in one step, owner included";
  EXPECT_STREQ(target, "cell-a");
  // A claim file of an earlier version (owner as its content) holds its slot and is found.
  std::ofstream(ranges + "/1") << "cell-old";
  EXPECT_EQ(FindIdRangeSlot(ranges, "cell-old"), 1);
  Result<int> next = ClaimIdRangeSlot(ranges, "cell-b");
  ASSERT_TRUE(next.ok());
  EXPECT_EQ(*next, 2) << "an old claim file is not taken over";
  int fd = ::open(ranges.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  EXPECT_EQ(ReadIdRangeClaim(fd, "0"), "cell-a");
  EXPECT_EQ(ReadIdRangeClaim(fd, "1"), "cell-old");
  EXPECT_EQ(ReadIdRangeClaim(fd, "9"), "") << "no claim";
  ::close(fd);
  for (const std::string& bad : {std::string(), std::string("a/b"), std::string(65, 'x')}) {
    Result<int> refused = ClaimIdRangeSlot(ranges, bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_THAT(refused.error().message, HasSubstr("is not a cell id")) << bad;
  }
}

TEST(HostTemplate, HasTheLayoutAndNoSecrets) {
  TempDir dir;
  Result<std::string> t = PrepareHostTemplate(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  namespace fs = std::filesystem;
  EXPECT_TRUE(fs::is_symlink(*t + "/bin"));
  EXPECT_EQ(fs::read_symlink(*t + "/bin"), "usr/bin");
  for (const char* d : {"usr", "proc", "dev", "tmp", "run", "workspace", "etc"}) {
    EXPECT_TRUE(fs::is_directory(*t + "/" + d)) << d;
  }
  EXPECT_EQ(fs::status(*t + "/tmp").permissions() & fs::perms::sticky_bit, fs::perms::sticky_bit);
  for (const char* secret : {"shadow", "gshadow", "sudoers", "ssh", "ssl/private", "machine-id",
                             "passwd", "group", "pip.conf", "npmrc", "gitconfig"}) {
    EXPECT_FALSE(fs::exists(fs::symlink_status(*t + "/etc/" + secret))) << secret;
  }
  if (fs::exists("/etc/ld.so.cache")) {
    EXPECT_TRUE(fs::exists(*t + "/etc/ld.so.cache"));
  }
  std::ifstream resolv(*t + "/etc/resolv.conf");
  std::stringstream content;
  content << resolv.rdbuf();
  EXPECT_THAT(content.str(), HasSubstr("no DNS"));
  // A second call reuses the template instead of building another.
  Result<std::string> again = PrepareHostTemplate(dir.path());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *t);
  EXPECT_EQ(
      std::distance(fs::directory_iterator(dir.path() + "/templates"), fs::directory_iterator()),
      1);
}

// The template's name follows the host entries it copies: a host upgrade that replaces the
// loader cache or the CA certificates gives later cells a new template, not a stale copy.
TEST(HostTemplate, FingerprintFollowsTheCopiedHostEntries) {
  TempDir root;
  namespace fs = std::filesystem;
  fs::create_directories(root.path() + "/etc/ssl/certs");
  std::ofstream(root.path() + "/etc/ld.so.cache") << "cache v1";
  std::ofstream(root.path() + "/etc/ssl/certs/a.pem") << "cert a";
  const std::string first = HostTemplateFingerprint(root.path());
  EXPECT_EQ(first.size(), 16u);
  EXPECT_EQ(HostTemplateFingerprint(root.path()), first) << "stable while nothing changes";
  std::ofstream(root.path() + "/etc/ld.so.cache", std::ios::app) << " and more";
  const std::string edited = HostTemplateFingerprint(root.path());
  EXPECT_NE(edited, first) << "an edited file";
  // A directory that gains an entry (update-ca-certificates adds a link): its mtime moves.
  const struct timespec past[2] = {{1000, 0}, {1000, 0}};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root.path() + "/etc/ssl/certs").c_str(), past, 0), 0);
  const std::string before_add = HostTemplateFingerprint(root.path());
  std::ofstream(root.path() + "/etc/ssl/certs/b.pem") << "cert b";
  EXPECT_NE(HostTemplateFingerprint(root.path()), before_add) << "a directory with a new entry";
  // A file replaced by rename (ldconfig's way): a new inode, even with the same size and time.
  struct stat old_st;
  ASSERT_EQ(::stat((root.path() + "/etc/ld.so.cache").c_str(), &old_st), 0);
  const std::string before_replace = HostTemplateFingerprint(root.path());
  std::ofstream(root.path() + "/etc/ld.so.cache.new") << "cache v1 and more";
  const struct timespec same[2] = {old_st.st_atim, old_st.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, (root.path() + "/etc/ld.so.cache.new").c_str(), same, 0), 0);
  ASSERT_EQ(::rename((root.path() + "/etc/ld.so.cache.new").c_str(),
                     (root.path() + "/etc/ld.so.cache").c_str()),
            0);
  EXPECT_NE(HostTemplateFingerprint(root.path()), before_replace) << "a replaced file";
  EXPECT_NE(HostTemplateFingerprint(root.path() + "/elsewhere"), first);
  // The host's template is named after the host's fingerprint.
  TempDir state;
  Result<std::string> t = PrepareHostTemplate(state.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_THAT(*t, ::testing::EndsWith("-" + HostTemplateFingerprint("")));
}

// Copies keep the host's modification times: Python checks a cached .pyc against its
// source's mtime, and /usr/lib/python3.X/sitecustomize.py links into /etc/python3.X, so a
// fresh mtime made every interpreter start in a cell recompile it.
TEST(HostTemplate, CopiesKeepTheHostsModificationTimes) {
  TempDir dir;
  Result<std::string> t = PrepareHostTemplate(dir.path());
  ASSERT_TRUE(t.ok()) << t.error().message;
  namespace fs = std::filesystem;
  int compared = 0;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(*t + "/etc")) {
    const std::string copy = e.path().string();
    const std::string host = "/etc" + copy.substr(t->size() + 4);
    struct stat c, h;
    // What the template makes itself rather than copies.
    if (host == "/etc/resolv.conf" || host == "/etc/nsswitch.conf" || host == "/etc/ssl") continue;
    ASSERT_EQ(::lstat(copy.c_str(), &c), 0) << copy;
    if (::lstat(host.c_str(), &h) != 0) continue;
    EXPECT_EQ(c.st_mtim.tv_sec, h.st_mtim.tv_sec) << copy;
    EXPECT_EQ(c.st_mtim.tv_nsec, h.st_mtim.tv_nsec) << copy;
    ++compared;
  }
  EXPECT_GT(compared, 0) << "no copied /etc entry found";
}

TEST(RemoveCellDir, RemovesWhatTheSandboxMadeUnreadable) {
  TempDir dir;
  namespace fs = std::filesystem;
  std::string cell = dir.path() + "/cells/c1";
  fs::create_directories(cell + "/workspace/locked/inner");
  std::ofstream(cell + "/workspace/locked/inner/f") << "x";
  fs::create_symlink("/etc", cell + "/workspace/link-to-etc");
  ::chmod((cell + "/workspace/locked/inner").c_str(), 0);
  ::chmod((cell + "/workspace/locked").c_str(), 0500);
  Status s = RemoveCellDir(cell);
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_FALSE(fs::exists(cell));
  EXPECT_TRUE(fs::exists("/etc/passwd")) << "followed the symlink into /etc";
  EXPECT_TRUE(RemoveCellDir(cell).ok()) << "removing a missing dir is fine";
}

TEST(MakeDirs, MakesMissingParentsAndAcceptsWhatExists) {
  TempDir dir;
  namespace fs = std::filesystem;
  const std::string deep = dir.path() + "/a/b/c/";
  ASSERT_TRUE(MakeDirs(deep, 0750).ok());
  EXPECT_TRUE(fs::is_directory(dir.path() + "/a/b/c"));
  struct stat st;
  ASSERT_EQ(::stat((dir.path() + "/a/b").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0750u & ~static_cast<unsigned>(::umask(022)));
  EXPECT_TRUE(MakeDirs(dir.path() + "/a/b", 0755).ok()) << "an existing dir is fine";
  EXPECT_TRUE(MakeDirs(dir.path() + "/a/b/d", 0755).ok());
  EXPECT_TRUE(fs::is_directory(dir.path() + "/a/b/d"));
  std::ofstream(dir.path() + "/file") << "x";
  Status under_file = MakeDirs(dir.path() + "/file/x/y", 0755);
  ASSERT_FALSE(under_file.ok());
  EXPECT_THAT(under_file.error().message, HasSubstr("mkdir(\"" + dir.path() + "/file/x"));
}

TEST(InitRecord, RoundTripsAndMatchesStartTime) {
  TempDir dir;
  ASSERT_TRUE(WriteInitRecord(dir.path(), ::getpid()).ok());
  Result<InitRecord> r = ReadInitRecord(dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->pid, ::getpid());
  EXPECT_EQ(r->start_time, ProcStartTime(::getpid()));
  EXPECT_FALSE(r->start_time.empty());
  EXPECT_EQ(ProcStartTime(0x3fffffff), "");
}

TEST(InitRecord, IsRewrittenInPlaceAtAFixedSize) {
  TempDir dir;
  const std::string path = dir.path() + "/init";
  // A longer record of an earlier version: cut, so nothing of it follows the new one.
  std::ofstream(path) << std::string(100, '7') << " 12345\n";
  ASSERT_TRUE(WriteInitRecord(dir.path(), ::getpid()).ok());
  struct stat before;
  ASSERT_EQ(::stat(path.c_str(), &before), 0);
  EXPECT_EQ(before.st_size, 64);
  ASSERT_TRUE(WriteInitRecord(dir.path(), ::getpid()).ok());
  struct stat after;
  ASSERT_EQ(::stat(path.c_str(), &after), 0);
  EXPECT_EQ(after.st_ino, before.st_ino) << "written over in place, not replaced";
  EXPECT_EQ(after.st_size, 64);
  Result<InitRecord> r = ReadInitRecord(dir.path());
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->pid, ::getpid());
  EXPECT_EQ(r->start_time, ProcStartTime(::getpid()));
}

TEST(StateDir, RefusesADirectoryOthersCouldWriteOrASymlink) {
  char tmpl[] = "/tmp/mcpcell-statedir-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  Status st = EnsureStateDir(dir);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("writable by group or others (mode 0777)"));
  ASSERT_EQ(::chmod(dir.c_str(), 0700), 0);
  EXPECT_TRUE(EnsureStateDir(dir).ok());
  const std::string link = dir + "-link";
  ASSERT_EQ(::symlink(dir.c_str(), link.c_str()), 0);
  Status via_link = EnsureStateDir(link);
  ASSERT_FALSE(via_link.ok());
  EXPECT_THAT(via_link.error().message, HasSubstr("not a directory"));
  ::unlink(link.c_str());
  std::filesystem::remove_all(dir);
}

// Issue 24: a state dir in a `mktemp -d` dir (0700) started fine, and then every cell of a
// root server failed at mount("tmpfs", "<state>/mnt"): EACCES.
TEST(StateDir, ADirectoryAboveItThatOthersCannotSearchIsNamedWithTheFix) {
  TempDir parent;
  ASSERT_EQ(::chmod(parent.path().c_str(), 0700), 0);
  const std::string state = parent.path() + "/state";
  ASSERT_TRUE(EnsureStateDir(state).ok());
  Status st = CheckSearchableByOthers(state);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr(parent.path() + " (mode 0700, owner "));
  EXPECT_THAT(st.error().message, HasSubstr("chmod o+x " + parent.path() + ","));
  // The server refuses it exactly when its cells are other uids (a root server).
  EXPECT_EQ(CheckCellsCanReachStateDir(state).ok(), !CellsRunAsOtherUids());

  // Through a symlink, the directories above its target count too.
  const std::string link = parent.path() + "-link";
  ASSERT_EQ(::symlink(state.c_str(), link.c_str()), 0);
  Status via_link = CheckSearchableByOthers(link);
  ::unlink(link.c_str());
  ASSERT_FALSE(via_link.ok());
  EXPECT_THAT(via_link.error().message, HasSubstr("chmod o+x " + parent.path() + ","));

  ASSERT_EQ(::chmod(parent.path().c_str(), 0711), 0);  // search without listing is enough
  Status ok = CheckSearchableByOthers(state);
  EXPECT_TRUE(ok.ok()) << ok.error().message;
  ASSERT_EQ(::chmod(parent.path().c_str(), 0755), 0);
  EXPECT_TRUE(CheckCellsCanReachStateDir(state).ok());
}

TEST(StateDir, ReachCheckOfAMissingDirSaysWhy) {
  Status st = CheckSearchableByOthers("/nonexistent-mcpcell-state/x");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.error().message, HasSubstr("realpath(\"/nonexistent-mcpcell-state/x\"): ENOENT"));
}

// A state dir on a tmpfs is fine as it is; one on a disk filesystem gets a note naming it
// and the faster choice. The test takes a dir of each kind where this host has one.
TEST(StateDir, ADiskFilesystemIsNotedAndATmpfsIsNot) {
  auto type_of = [](const char* path) -> long {
    struct statfs fs;
    return ::statfs(path, &fs) == 0 ? static_cast<long>(fs.f_type) : -1;
  };
  constexpr long kTmpfs = 0x01021994, kExt = 0xEF53;
  if (type_of("/dev/shm") == kTmpfs) {
    EXPECT_EQ(StateDirFilesystemNote("/dev/shm"), "");
  }
  TempDir disk;  // under TMPDIR, /tmp by default
  if (type_of(disk.path().c_str()) == kExt) {
    const std::string note = StateDirFilesystemNote(disk.path());
    EXPECT_THAT(note,
                HasSubstr("state dir " + disk.path() + " is on a disk filesystem (ext2/3/4)"));
    EXPECT_THAT(note, HasSubstr("a tmpfs, such as one under /run"));
  }
  if (type_of("/dev/shm") != kTmpfs && type_of(disk.path().c_str()) != kExt) {
    GTEST_SKIP() << "no tmpfs /dev/shm and no ext4 temp dir here";
  }
}

}  // namespace
}  // namespace mcpcell::sandbox
