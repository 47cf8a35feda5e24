// Captures a generated workspace (N files of random bytes, M MiB in all) into a fresh
// snapshot store, changes one file, captures again, and prints the time and the new bytes
// stored of each capture. The second capture is what the hash cache is for: only the changed
// file is read. Run as root or not; the tree's owner is the runner (uid base = its uid).
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "sandbox/snapshot_store.h"

namespace {

namespace fs = std::filesystem;
using mcpcell::sandbox::CaptureReport;
using mcpcell::sandbox::LayerSource;
using mcpcell::sandbox::SnapshotStore;

void MakeTree(const std::string& dir, int files, uint64_t total_bytes) {
  std::mt19937_64 rng(42);
  const uint64_t each = total_bytes / static_cast<uint64_t>(files);
  std::vector<uint64_t> buf(each / 8 + 1);
  for (int i = 0; i < files; ++i) {
    std::string sub = dir + "/d" + std::to_string(i % 40);
    fs::create_directories(sub);
    for (auto& w : buf) w = rng();
    std::ofstream(sub + "/f" + std::to_string(i), std::ios::binary)
        .write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(each));
  }
}

bool Capture(SnapshotStore& store, const std::string& name, const std::string& ws,
             const char* label) {
  std::vector<LayerSource> src = {{"workspace", ws, getuid(), getgid(), {}}};
  auto start = std::chrono::steady_clock::now();
  auto r = store.Capture("bench", name, src, {});
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!r) {
    std::fprintf(stderr, "capture failed: %s\n", r.error().message.c_str());
    return false;
  }
  std::printf("%-32s %9.1f ms  files hashed %5llu, from cache %5llu, new bytes stored %llu\n",
              label, ms, static_cast<unsigned long long>(r->files_hashed),
              static_cast<unsigned long long>(r->files_from_cache),
              static_cast<unsigned long long>(r->new_object_bytes));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int files = 2000;
  uint64_t mib = 100;
  std::string dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--files"))
      files = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--mib"))
      mib = std::strtoull(argv[i + 1], nullptr, 10);
    else if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
    else
      return std::fprintf(stderr, "unknown option %s\n", argv[i]), 2;
  }
  if (files <= 0 || mib == 0) return std::fprintf(stderr, "--files and --mib must be > 0\n"), 2;
  bool keep = !dir.empty();
  if (!keep) {
    char tmpl[] = "/tmp/mcpcell-snapbench-XXXXXX";
    if (!mkdtemp(tmpl)) return std::perror("mkdtemp"), 2;
    dir = tmpl;
  }
  const std::string ws = dir + "/workspace";
  MakeTree(ws, files, mib << 20);
  SnapshotStore store(dir + "/snapshots");
  std::printf("tree: %d files, %llu MiB in %s\n", files, static_cast<unsigned long long>(mib),
              ws.c_str());
  bool ok = Capture(store, "first", ws, "first capture");
  std::ofstream(ws + "/d7/f7", std::ios::binary | std::ios::app) << "one more line\n";
  ok = ok && Capture(store, "second", ws, "second, one file changed");
  ok = ok && Capture(store, "third", ws, "third, nothing changed");
  if (!keep) fs::remove_all(dir);
  return ok ? 0 : 1;
}
