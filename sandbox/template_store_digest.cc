// TemplateDigest (template_store.h): one line per entry of the tree, in byte order of the
// paths, hashed together. A line is "<type> <path> <mode octal> <uid>:<gid> <size> <what>",
// where <what> is the content's SHA-256 for a file and the target for a symlink; the
// path is the entry's own, so a tree and the same tree with one file renamed differ.
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "base/unique_fd.h"
#include "sandbox/snapshot_store_internal.h"
#include "sandbox/template_store.h"

namespace mcpcell::sandbox {
namespace {

struct DigestWalk {
  snapshot::Sha256 hash;
  TreeDigest out;
};

std::string Line(char type, const std::string& rel, const struct stat& st, uint64_t size,
                 const std::string& what) {
  char head[96];
  std::snprintf(head, sizeof head, " %04o %u:%u %llu ", static_cast<unsigned>(st.st_mode & 07777),
                static_cast<unsigned>(st.st_uid), static_cast<unsigned>(st.st_gid),
                static_cast<unsigned long long>(size));
  return std::string(1, type) + " " + (rel.empty() ? "." : rel) + head + what + "\n";
}

Result<std::string> FileSha256(const std::string& path) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return Error::Sys("open(\"" + path + "\")");
  auto sha = snapshot::HashFile(fd.get());
  if (!sha) return sha.error().Wrap(path);
  return sha;
}

Status Walk(const std::string& root, const std::string& rel, DigestWalk& w) {
  const std::string path = rel.empty() ? root : root + "/" + rel;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Error::Sys("lstat(\"" + path + "\")");
  if (S_ISREG(st.st_mode)) {
    auto sha = FileSha256(path);
    if (!sha) return sha.error();
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    const std::string line = Line('f', rel, st, size, *sha);
    w.hash.Update(line.data(), line.size());
    ++w.out.files;
    w.out.bytes += size;
    return Ok();
  }
  if (S_ISLNK(st.st_mode)) {
    std::string target(static_cast<size_t>(st.st_size) + 1, '\0');
    ssize_t n = readlink(path.c_str(), target.data(), target.size());
    if (n < 0) return Error::Sys("readlink(\"" + path + "\")");
    target.resize(static_cast<size_t>(n));
    const std::string line = Line('l', rel, st, target.size(), target);
    w.hash.Update(line.data(), line.size());
    return Ok();
  }
  if (!S_ISDIR(st.st_mode))
    return Error::Msg(path + ": not a file, directory or symlink (templates hold no others)");
  const std::string line = Line('d', rel, st, 0, "-");
  w.hash.Update(line.data(), line.size());
  std::vector<std::string> names;
  DIR* d = opendir(path.c_str());
  if (!d) return Error::Sys("opendir(\"" + path + "\")");
  while (dirent* de = readdir(d))
    if (std::string n = de->d_name; n != "." && n != "..") names.push_back(std::move(n));
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names)
    if (Status s = Walk(root, rel.empty() ? n : rel + "/" + n, w); !s) return s;
  return Ok();
}

}  // namespace

Result<TreeDigest> TemplateDigest(const std::string& rootfs) {
  DigestWalk w;
  if (Status s = Walk(rootfs, "", w); !s) return s.error();
  w.out.sha256 = w.hash.FinalHex();
  return w.out;
}

}  // namespace mcpcell::sandbox
