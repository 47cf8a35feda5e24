// fuzz_packages: the package service's parsers of untrusted bytes: policy rules, pip and npm
// requirements, PEP 440 and SemVer versions, upstream PEP 503 pages and file names, upstream
// npm packuments, and the tar reader of offline npm tarballs (the input as a gzip'd tar).
// The first byte picks the parser; the rest is its input.
//
// Properties checked beyond "no crash" (and the sanitizers): PEP 440 and SemVer ordering is
// antisymmetric and reflexive; every file a filtered page or packument keeps has a name the
// service may put in a URL path and a digest of the right length (guards on the filters).
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "packages/digest.h"
#include "packages/npm_directory.h"
#include "packages/npm_index.h"
#include "packages/pypi_index.h"
#include "packages/rules.h"
#include "packages/versions.h"

namespace {

using namespace mcpcell::packages;

[[noreturn]] void Fail(const std::string& what, const std::string& detail) {
  std::fprintf(stderr, "fuzz_packages: %s\n%s\n", what.c_str(), detail.c_str());
  std::abort();
}

mcpcell::packages::PackagesConfig AnyPolicy() {
  mcpcell::packages::PackagesConfig p;
  p.mode = mcpcell::packages::PackagesMode::kOnline;
  p.registries = {"pypi", "npm"};
  p.allow = {"pypi:*", "npm:*"};
  p.deny = {"pypi:evil-*", "npm:x<1"};
  return p;
}

void Versions(std::string_view text) {
  size_t cut = text.find('\n');
  if (cut == std::string_view::npos) return;
  std::string a(text.substr(0, cut)), b(text.substr(cut + 1));
  auto pa = ParsePep440(a), pb = ParsePep440(b);
  if (pa && pb) {
    int ab = ComparePep440(*pa, *pb), ba = ComparePep440(*pb, *pa);
    if ((ab > 0) != (ba < 0) || (ab == 0) != (ba == 0) || ComparePep440(*pa, *pa) != 0)
      Fail("PEP 440 order not antisymmetric", a + " vs " + b);
  }
  auto sa = ParseSemVer(a), sb = ParseSemVer(b);
  if (sa && sb) {
    int ab = CompareSemVer(*sa, *sb), ba = CompareSemVer(*sb, *sa);
    if ((ab > 0) != (ba < 0) || (ab == 0) != (ba == 0) || CompareSemVer(*sa, *sa) != 0)
      Fail("SemVer order not antisymmetric", a + " vs " + b);
  }
}

void Tarball(std::string_view bytes) {
  int fd = memfd_create("fuzz-tgz", MFD_CLOEXEC);
  if (fd < 0) return;
  if (write(fd, bytes.data(), bytes.size()) == static_cast<ssize_t>(bytes.size()))
    (void)ReadTarballPackageJson("/proc/self/fd/" + std::to_string(fd));
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  static const auto policy = AnyPolicy();
  switch (data[0] % 7) {
    case 0: {
      auto rule = ParseRule(text);
      if (rule) (void)CheckVersion(policy, rule->registry, rule->name_pattern, "1.0.0");
      break;
    }
    case 1:
    case 2: {
      Registry r = data[0] % 7 == 1 ? Registry::kPypi : Registry::kNpm;
      auto req = ParseRequirement(r, text);
      if (req) (void)CheckRequirement(policy, *req);
      break;
    }
    case 3:
      Versions(text);
      break;
    case 4: {
      auto files = ParseSimplePage(text, "https://index.example/simple/demo/");
      if (!files) break;
      for (const auto& f : *files) {
        auto dist = ParseDistFilename(f.filename, "demo");
        if (dist && !IsSafeFilename(f.filename)) Fail("unsafe file name kept", f.filename);
        if (!f.sha256.empty() && !IsLowerHex(f.sha256, 64)) Fail("bad sha256 kept", f.sha256);
      }
      (void)RenderSimplePage("demo", *files);
      break;
    }
    case 5: {
      auto doc = FilterPackument(text, "demo", policy, "http://packages.mcpcell.internal/npm/");
      if (!doc) break;
      for (const auto& t : doc->tarballs) {
        if (!IsSafeFilename(t.filename)) Fail("unsafe tarball name kept", t.filename);
        if (!IsLowerHex(t.hex, DigestHexLength(t.algo))) Fail("bad digest kept", t.hex);
      }
      break;
    }
    case 6:
      Tarball(text);
      break;
  }
  return 0;
}
