// Cells over built templates (sandbox/template_store.h, issue 28): a template made from a
// small rootfs the test assembles from copies of the host's binaries and their libraries
// is the cell's whole root (the host's /usr is not there), with cell init's own /etc files
// over the template's; and a wheel baked in from a wheelhouse the test writes is imported
// offline by a cell of the baked template. Runs as root and as the unprivileged variant.
#include <archive.h>
#include <archive_entry.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "sandbox/template_store.h"
#include "tests/integration/cell_fixture.h"

namespace mcpcell::sandbox {
namespace {

using celltest::RunInCell;
using celltest::TempStateDir;
using celltest::TestCreateOptions;
using ::testing::HasSubstr;
using ::testing::Not;

namespace fs = std::filesystem;

// Copies the host file `path` (symlinks resolved) to the same path under `root`; /lib and
// /lib64 paths go under root/usr, which the rootfs's /lib and /lib64 symlinks point into.
void CopyHostFile(const std::string& path, const std::string& root) {
  std::string dest = path;
  if (dest.rfind("/lib", 0) == 0) dest = "/usr" + dest;
  dest = root + dest;
  fs::create_directories(fs::path(dest).parent_path());
  fs::copy_file(fs::canonical(path), dest, fs::copy_options::overwrite_existing);
}

// `binary` and the libraries ldd names for it.
void CopyWithLibraries(const std::string& binary, const std::string& root) {
  CopyHostFile(binary, root);
  FILE* p = popen(("ldd '" + binary + "' 2>/dev/null").c_str(), "r");
  ASSERT_NE(p, nullptr);
  char line[PATH_MAX + 128];
  while (fgets(line, sizeof line, p)) {
    std::istringstream words(line);
    std::string w;
    while (words >> w) {
      if (w[0] == '/' && fs::exists(w)) CopyHostFile(w, root);
    }
  }
  pclose(p);
}

// A rootfs with dash as /bin/sh, cat and ls, the merged-/usr symlinks and an os-release and
// passwd of its own.
void MakeTinyRootfs(const std::string& root) {
  for (const char* bin : {"/usr/bin/dash", "/usr/bin/cat", "/usr/bin/ls"})
    CopyWithLibraries(bin, root);
  fs::create_symlink("dash", root + "/usr/bin/sh");
  for (const char* link : {"bin", "lib", "lib64", "sbin"})
    fs::create_symlink(std::string("usr/") + link, root + "/" + link);
  fs::create_directories(root + "/usr/sbin");
  fs::create_directories(root + "/usr/lib64");
  fs::create_directories(root + "/etc");
  std::ofstream(root + "/etc/os-release") << "NAME=\"mcpcell tiny\"\nID=tiny\n";
  std::ofstream(root + "/etc/passwd") << "templateuser:x:4242:4242::/:/bin/sh\n";
}

// The tiny rootfs plus the host's python3.11, its standard library (and the libraries its
// extension modules need) and pip.
void MakePythonRootfs(const std::string& root) {
  MakeTinyRootfs(root);
  CopyWithLibraries("/usr/bin/python3.11", root);
  fs::create_symlink("python3.11", root + "/usr/bin/python3");
  const auto opts = fs::copy_options::recursive | fs::copy_options::copy_symlinks;
  fs::copy("/usr/lib/python3.11", root + "/usr/lib/python3.11", opts);
  fs::create_directories(root + "/usr/lib/python3/dist-packages");
  fs::copy("/usr/lib/python3/dist-packages/pip", root + "/usr/lib/python3/dist-packages/pip", opts);
  for (const auto& e : fs::directory_iterator("/usr/lib/python3.11/lib-dynload"))
    CopyWithLibraries(e.path().string(), root);
}

// A pure-Python wheel holding mcpcell_tmpl_probe/__init__.py with VALUE = `value`.
void WriteWheel(const std::string& path, const std::string& value) {
  const std::string info = "mcpcell_tmpl_probe-1.0.dist-info/";
  const std::vector<std::pair<std::string, std::string>> files = {
      {"mcpcell_tmpl_probe/__init__.py", "VALUE = \"" + value + "\"\n"},
      {info + "METADATA", "Metadata-Version: 2.1\nName: mcpcell-tmpl-probe\nVersion: 1.0\n"},
      {info + "WHEEL",
       "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"},
      {info + "RECORD", "mcpcell_tmpl_probe/__init__.py,,\n" + info + "METADATA,,\n" + info +
                            "WHEEL,,\n" + info + "RECORD,,\n"},
  };
  archive* a = archive_write_new();
  archive_write_set_format_zip(a);
  ASSERT_EQ(archive_write_open_filename(a, path.c_str()), ARCHIVE_OK);
  for (const auto& [name, text] : files) {
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, name.c_str());
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(text.size()));
    archive_write_header(a, e);
    archive_write_data(a, text.data(), text.size());
    archive_entry_free(e);
  }
  archive_write_close(a);
  archive_write_free(a);
}

class TemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(state_.path().empty());
    ASSERT_TRUE(EnsureStateDir(state_.path()).ok());
    // mkdtemp made it 0700: a root server's cells (host uids of their own) must enter it.
    ASSERT_EQ(chmod(state_.path().c_str(), 0711), 0);
    src_ = state_.path() + "/src";
  }
  Result<TemplateInfo> Build(const std::string& name, const BakeRequest* bake = nullptr) {
    TemplateStore store(state_.path());
    auto build = store.Begin(name);
    if (!build) return build.error();
    if (Status s = FillTemplateRootfs(src_, build->rootfs()); !s) return s.error();
    std::vector<std::string> packages;
    if (bake) {
      auto baked = BakePackages(build->rootfs(), *bake);
      if (!baked) return baked.error();
      packages = *baked;
    }
    return store.Commit(*build, "from:" + src_, packages);
  }
  Result<std::unique_ptr<Cell>> CellOver(const TemplateInfo& t) {
    CellSpec spec = DefaultCellSpec(GenerateCellId(), state_.path());
    spec.rootfs.skeleton_dir = t.rootfs();
    spec.rootfs.system_dirs = {};
    return Cell::Create(spec, TestCreateOptions());
  }
  BakeRequest Bake() {
    BakeRequest req;
    req.state_dir = state_.path();
    req.init_path = MCPCELL_INIT_PATH;
    return req;
  }
  TempStateDir state_;
  std::string src_;
};

TEST_F(TemplateTest, ACellOverABuiltTemplateSeesItsRootNotTheHostsUsr) {
  MakeTinyRootfs(src_);
  auto t = Build("tiny");
  ASSERT_TRUE(t.ok()) << t.error().message;
  auto cell = CellOver(*t);
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  auto r =
      RunInCell(**cell, {"/bin/sh", "-c",
                         "cat /etc/os-release; cat /etc/passwd; ls -d /proc/1 /tmp /workspace; "
                         "ls /usr/bin; pwd"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("NAME=\"mcpcell tiny\""));
  EXPECT_THAT(r.out, HasSubstr("sandbox:x:1000:1000")) << "cell init's passwd over the template's";
  EXPECT_THAT(r.out, Not(HasSubstr("templateuser")));
  EXPECT_THAT(r.out, HasSubstr("/proc/1"));
  EXPECT_THAT(r.out, Not(HasSubstr("python3"))) << "the host's /usr is not overlaid";
  EXPECT_THAT(r.out, HasSubstr("/workspace\n")) << "the default cwd exists";
  auto write = RunInCell(**cell, {"/bin/sh", "-c", "echo x > /workspace/f && cat /workspace/f"});
  EXPECT_EQ(write.out, "x\n") << write.err;
  ASSERT_TRUE((*cell)->Destroy().ok());
  auto digest = TemplateDigest(t->rootfs());
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(digest->sha256, t->digest) << "cells never change the template";
}

TEST_F(TemplateTest, BakingPipNeedsPythonInTheRootfs) {
  MakeTinyRootfs(src_);
  fs::create_directories(state_.path() + "/wheels");
  WriteWheel(state_.path() + "/wheels/mcpcell_tmpl_probe-1.0-py3-none-any.whl", "x");
  std::ofstream(state_.path() + "/req.txt") << "mcpcell-tmpl-probe==1.0\n";
  BakeRequest req = Bake();
  req.pip_wheels = state_.path() + "/wheels";
  req.pip_requirements = state_.path() + "/req.txt";
  auto t = Build("nopython", &req);
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.error().message, HasSubstr("has no python3"));
  EXPECT_FALSE(TemplateStore(state_.path()).Find("nopython").ok());
}

TEST_F(TemplateTest, ABakedWheelImportsOfflineInACellOfTheTemplate) {
  if (!fs::exists("/usr/bin/python3.11") || !fs::exists("/usr/lib/python3/dist-packages/pip"))
    GTEST_SKIP() << "needs Debian's python3.11 and python3-pip on the host to copy";
  MakePythonRootfs(src_);
  fs::create_directories(state_.path() + "/wheels");
  WriteWheel(state_.path() + "/wheels/mcpcell_tmpl_probe-1.0-py3-none-any.whl", "baked-42");
  std::ofstream(state_.path() + "/req.txt") << "mcpcell-tmpl-probe==1.0\n";
  BakeRequest req = Bake();
  req.pip_wheels = state_.path() + "/wheels";
  req.pip_requirements = state_.path() + "/req.txt";
  auto t = Build("py", &req);
  ASSERT_TRUE(t.ok()) << t.error().message;
  ASSERT_EQ(t->packages.size(), 1u);
  EXPECT_THAT(t->packages[0], HasSubstr("pip: req.txt from 1 wheels"));
  const std::string baked =
      t->rootfs() + "/usr/local/lib/python3.11/dist-packages/mcpcell_tmpl_probe/__init__.py";
  struct stat st;
  ASSERT_EQ(::stat(baked.c_str(), &st), 0) << baked;
  EXPECT_EQ(st.st_uid, ::geteuid()) << "owned by the builder, not the bake cell's uid";
  EXPECT_FALSE(fs::exists(fs::path(t->dir) / "baked")) << "the installers' tree is not kept";
  auto cell = CellOver(*t);
  ASSERT_TRUE(cell.ok()) << cell.error().message;
  auto r = RunInCell(**cell,
                     {"/usr/bin/python3", "-c", "import mcpcell_tmpl_probe as m; print(m.VALUE)"});
  ASSERT_TRUE(r.ok) << r.error;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "baked-42\n");
  ASSERT_TRUE((*cell)->Destroy().ok());
}

}  // namespace
}  // namespace mcpcell::sandbox
