// fuzz_archive_unpack: what a model (or whoever made the archive it sends) gives
// upload_archive. The input is the archive; sandbox::UnpackArchive extracts it with small
// limits into a fresh directory under a temporary root made once per process.
//
// Beyond "no crash": nothing appears outside the extraction directory (its sibling canary
// is untouched and the root holds only the two), no extracted file is a device node, FIFO
// or socket or has a setuid/setgid bit, no symlink points to an absolute path, and every
// event is an extraction or a refusal with a reason.
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "sandbox/init/archive_unpack.h"

namespace {

using mcpcell::UniqueFd;
using namespace mcpcell::sandbox;

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "fuzz_archive_unpack: %s\n", what.c_str());
  std::abort();
}

const std::string& Root() {
  static const std::string root = [] {
    char tmpl[] = "/tmp/fuzz_archive_unpack.XXXXXX";
    if (!::mkdtemp(tmpl)) Fail("mkdtemp");
    std::string r = tmpl;
    if (::mkdir((r + "/canary").c_str(), 0755) != 0) Fail("mkdir canary");
    return r;
  }();
  return root;
}

int RemoveOne(const char* path, const struct stat*, int, FTW*) { return ::remove(path); }

// Checks what the extraction left under `dir` (nftw: no symlink is followed).
int CheckOne(const char* path, const struct stat* st, int type, FTW*) {
  if (type == FTW_SL) {
    char target[4096];
    ssize_t n = ::readlink(path, target, sizeof target);
    if (n > 0 && target[0] == '/') Fail(std::string("absolute symlink extracted: ") + path);
    return 0;
  }
  if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode) || S_ISFIFO(st->st_mode) ||
      S_ISSOCK(st->st_mode))
    Fail(std::string("special file extracted: ") + path);
  if (st->st_mode & (S_ISUID | S_ISGID)) Fail(std::string("setuid/setgid extracted: ") + path);
  return 0;
}

void CheckRootHoldsOnlyTwo() {
  DIR* d = ::opendir(Root().c_str());
  if (!d) Fail("opendir root");
  int count = 0;
  while (dirent* e = ::readdir(d)) {
    std::string_view n = e->d_name;
    if (n == "." || n == "..") continue;
    if (n != "canary" && n != "out") Fail("written outside the target: " + std::string(n));
    ++count;
  }
  ::closedir(d);
  DIR* c = ::opendir((Root() + "/canary").c_str());
  if (!c) Fail("canary gone");
  while (dirent* e = ::readdir(c)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") Fail("written into the canary: " + std::string(n));
  }
  ::closedir(c);
  (void)count;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string out = Root() + "/out";
  if (::mkdir(out.c_str(), 0755) != 0) Fail("mkdir out");
  UniqueFd dir(::open(out.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid()) Fail("open out");
  UnpackLimits limits{1 << 20, 50, 64};
  auto report = [](const UnpackEvent& e) {
    if (e.kind == "refused" ? e.reason.empty() : !e.reason.empty())
      Fail("event " + e.kind + " " + e.path + " with reason \"" + e.reason + "\"");
  };
  std::string_view input(reinterpret_cast<const char*>(data), size);
  auto summary = UnpackArchive(input, dir.get(), limits, report);
  if (summary && summary->bytes > limits.max_bytes + (1 << 20)) Fail("wrote past the byte limit");
  ::nftw(out.c_str(), CheckOne, 16, FTW_PHYS);
  CheckRootHoldsOnlyTwo();
  ::nftw(out.c_str(), RemoveOne, 16, FTW_DEPTH | FTW_PHYS);
  return 0;
}
