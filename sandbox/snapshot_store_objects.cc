// The store's object files and the layer trees built from them. Everything here works in
// the store's own 0700 directory, which no cell and no host user but root can reach, so
// paths there are trusted; the cell's side (untrusted) is snapshot_store_walk.cc.
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox::snapshot {
namespace {

using Type = SnapshotEntry::Type;

timespec ToTimespec(int64_t ns) {
  return timespec{static_cast<time_t>(ns / 1000000000), static_cast<long>(ns % 1000000000)};
}

Status SetMtime(const std::string& path, int64_t mtime_ns) {
  timespec times[2] = {{0, UTIME_OMIT}, ToTimespec(mtime_ns)};
  if (utimensat(AT_FDCWD, path.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::Sys("utimensat(\"" + path + "\")");
  return Ok();
}

Status SetOwnerAndMode(const std::string& path, const SnapshotEntry& e) {
  if (lchown(path.c_str(), e.uid, e.gid) != 0) return Error::Sys("lchown(\"" + path + "\")");
  if (e.type != Type::kSymlink && chmod(path.c_str(), e.mode) != 0)
    return Error::Sys("chmod(\"" + path + "\")");
  return Ok();
}

// The copy of `fd` into the open temp file `out`, hashed on the way.
Result<std::string> CopyHashed(int fd, int out, uint64_t* bytes) {
  char* buf = CopyBuffer();
  Sha256 h;
  *bytes = 0;
  for (;;) {
    ssize_t n = read(fd, buf, kCopyBlock);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("read");
    if (n == 0) break;
    h.Update(buf, static_cast<size_t>(n));
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(out, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Error::Sys("write (object)");
      off += w;
    }
    *bytes += static_cast<uint64_t>(n);
  }
  return h.FinalHex();
}

// A copy of the object at `path` with its owner, mode and mtime: for an object that has as
// many links as the filesystem allows (an empty file shared by many snapshots).
Status CopyObject(const std::string& object, const std::string& path) {
  UniqueFd in(open(object.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return Error::Sys("open(\"" + object + "\")");
  struct stat st;
  if (fstat(in.get(), &st) != 0) return Error::Sys("fstat(\"" + object + "\")");
  UniqueFd out(open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!out) return Error::Sys("open(\"" + path + "\")");
  uint64_t bytes = 0;
  if (auto sha = CopyHashed(in.get(), out.get(), &bytes); !sha) return sha.error();
  timespec times[2] = {st.st_atim, st.st_mtim};
  if (fchown(out.get(), st.st_uid, st.st_gid) != 0 || fchmod(out.get(), st.st_mode & 07777) != 0 ||
      futimens(out.get(), times) != 0)
    return Error::Sys("set owner, mode and mtime of \"" + path + "\"");
  return Ok();
}

Status MakeEntry(const ObjectStore& objects, const SnapshotEntry& e, const std::string& path) {
  switch (e.type) {
    case Type::kFile: {
      std::string object = objects.dir() + "/" + ObjectName(e.sha256, e.mode, e.uid, e.gid);
      if (link(object.c_str(), path.c_str()) == 0) return Ok();  // owner, mode, mtime: its own
      if (errno == EMLINK) return CopyObject(object, path);
      return Error::Sys("link(\"" + object + "\", \"" + path + "\")");
    }
    case Type::kDir:
      if (mkdir(path.c_str(), 0700) != 0) return Error::Sys("mkdir(\"" + path + "\")");
      if (e.opaque && lsetxattr(path.c_str(), "user.overlay.opaque", "y", 1, 0) != 0)
        return Error::Sys("setxattr(\"" + path + "\", user.overlay.opaque)");
      return SetOwnerAndMode(path, e);
    case Type::kSymlink:
      if (symlink(e.target.c_str(), path.c_str()) != 0)
        return Error::Sys("symlink(\"" + path + "\")");
      if (Status s = SetOwnerAndMode(path, e); !s) return s;
      return SetMtime(path, e.mtime_ns);
    case Type::kWhiteout:
      if (mknod(path.c_str(), S_IFCHR | 0, makedev(0, 0)) != 0)
        return Error::Sys("mknod(\"" + path + "\", whiteout)");
      if (Status s = SetOwnerAndMode(path, e); !s) return s;
      return SetMtime(path, e.mtime_ns);
  }
  return Ok();
}

}  // namespace

Sha256::Sha256() : ctx_(EVP_MD_CTX_new()) {
  EVP_DigestInit_ex(static_cast<EVP_MD_CTX*>(ctx_), EVP_sha256(), nullptr);
}
Sha256::~Sha256() { EVP_MD_CTX_free(static_cast<EVP_MD_CTX*>(ctx_)); }
void Sha256::Update(const void* data, size_t size) {
  EVP_DigestUpdate(static_cast<EVP_MD_CTX*>(ctx_), data, size);
}
std::string Sha256::FinalHex() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(static_cast<EVP_MD_CTX*>(ctx_), md, &len);
  static const char* kHex = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += kHex[md[i] >> 4], hex += kHex[md[i] & 15];
  return hex;
}

char* CopyBuffer() {
  thread_local std::unique_ptr<char[]> buffer(new char[kCopyBlock]);
  return buffer.get();
}

Result<std::string> HashFile(int fd) {
  char* buf = CopyBuffer();
  Sha256 h;
  for (;;) {
    ssize_t n = read(fd, buf, kCopyBlock);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("read");
    if (n == 0) return h.FinalHex();
    h.Update(buf, static_cast<size_t>(n));
  }
}

std::string ObjectName(const std::string& sha256, uint32_t mode, uint32_t uid, uint32_t gid) {
  char tail[48];
  std::snprintf(tail, sizeof tail, "-%04o-%u-%u", mode, uid, gid);
  return sha256 + tail;
}

bool ObjectStore::Has(const std::string& name) const {
  struct stat st;
  return fstatat(AT_FDCWD, (dir_ + "/" + name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISREG(st.st_mode);
}

Result<std::string> ObjectStore::Put(int fd, uint32_t mode, uint32_t uid, uint32_t gid,
                                     int64_t mtime_ns, uint64_t* size, uint64_t* added,
                                     bool* created) {
  *added = 0;
  if (created) *created = false;
  std::string tmp = dir_ + "/.tmp-" + RandomId();
  UniqueFd out(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!out) return Error::Sys("open(\"" + tmp + "\")");
  uint64_t bytes = 0;
  auto sha = CopyHashed(fd, out.get(), &bytes);
  timespec times[2] = {ToTimespec(mtime_ns), ToTimespec(mtime_ns)};
  Status s = Ok();
  *size = bytes;
  if (!sha)
    s = sha.error();
  else if (fchown(out.get(), uid, gid) != 0)
    s = Error::Sys("fchown(\"" + tmp + "\")");
  else if (fchmod(out.get(), mode) != 0)
    s = Error::Sys("fchmod(\"" + tmp + "\")");
  else if (futimens(out.get(), times) != 0)
    s = Error::Sys("futimens(\"" + tmp + "\")");
  if (s) {
    // link, not rename: an object that exists is never replaced (snapshots link it).
    std::string name = dir_ + "/" + ObjectName(*sha, mode, uid, gid);
    if (link(tmp.c_str(), name.c_str()) == 0) {
      *added = bytes;
      if (created) *created = true;
    } else if (errno != EEXIST)
      s = Error::Sys("link(\"" + tmp + "\", \"" + name + "\")");
  }
  unlink(tmp.c_str());
  if (!s) return s.error();
  return *sha;
}

Status ObjectStore::CollectGarbage(uint64_t* removed_bytes) {
  DIR* d = opendir(dir_.c_str());
  if (!d) return Error::Sys("opendir(\"" + dir_ + "\")");
  uint64_t removed = 0;
  Status result = Ok();
  while (dirent* de = readdir(d)) {
    std::string name = de->d_name;
    if (name == "." || name == "..") continue;
    struct stat st;
    if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    bool stale_tmp = name.rfind(".tmp-", 0) == 0;
    if (!stale_tmp && !(S_ISREG(st.st_mode) && st.st_nlink == 1)) continue;
    if (unlinkat(dirfd(d), de->d_name, 0) != 0 && result)
      result = Error::Sys("unlink(\"" + dir_ + "/" + name + "\")");
    else
      removed += static_cast<uint64_t>(st.st_size);
  }
  closedir(d);
  if (removed_bytes) *removed_bytes = removed;
  return result;
}

Status MaterialiseLayers(const ObjectStore& objects, const std::vector<SnapshotLayer>& layers,
                         const std::string& layers_dir) {
  if (mkdir(layers_dir.c_str(), 0700) != 0) return Error::Sys("mkdir(\"" + layers_dir + "\")");
  for (const SnapshotLayer& layer : layers) {
    const std::string top = layers_dir + "/" + layer.name;
    for (const SnapshotEntry& e : layer.entries) {
      std::string path = e.path.empty() ? top : top + "/" + e.path;
      if (Status s = MakeEntry(objects, e, path); !s)
        return s.error().Wrap("layer " + layer.name + ": \"" + e.path + "\"");
    }
    // Dirs' mtimes last, children first: making an entry changes its parent's mtime.
    for (auto it = layer.entries.rbegin(); it != layer.entries.rend(); ++it) {
      if (it->type != Type::kDir) continue;
      if (Status s = SetMtime(it->path.empty() ? top : top + "/" + it->path, it->mtime_ns); !s)
        return s;
    }
  }
  return Ok();
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0)
    return errno == ENOENT ? Ok() : Error::Sys("lstat(\"" + path + "\")");
  if (S_ISDIR(st.st_mode)) {
    DIR* d = opendir(path.c_str());
    if (!d) return Error::Sys("opendir(\"" + path + "\")");
    std::vector<std::string> names;
    while (dirent* de = readdir(d))
      if (std::string n = de->d_name; n != "." && n != "..") names.push_back(n);
    closedir(d);
    for (const std::string& n : names)
      if (Status s = RemoveTree(path + "/" + n); !s) return s;
    if (rmdir(path.c_str()) != 0) return Error::Sys("rmdir(\"" + path + "\")");
    return Ok();
  }
  if (unlink(path.c_str()) != 0) return Error::Sys("unlink(\"" + path + "\")");
  return Ok();
}

Status WriteFileAtomic(const std::string& path, const std::string& text) {
  std::string tmp = path + ".tmp-" + RandomId();
  UniqueFd fd(open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600));
  if (!fd) return Error::Sys("open(\"" + tmp + "\")");
  for (size_t off = 0; off < text.size();) {
    ssize_t w = write(fd.get(), text.data() + off, text.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      Error e = Error::Sys("write(\"" + tmp + "\")");
      unlink(tmp.c_str());
      return e;
    }
    off += static_cast<size_t>(w);
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    Error e = Error::Sys("rename(\"" + tmp + "\", \"" + path + "\")");
    unlink(tmp.c_str());
    return e;
  }
  return Ok();
}

Result<std::string> ReadSmallFile(const std::string& path, size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
  if (!fd) return Error::Sys("open(\"" + path + "\")");
  std::string text;
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("read(\"" + path + "\")");
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (text.size() > max_bytes)
      return Error::Msg(path + ": larger than " + std::to_string(max_bytes) + " bytes");
  }
}

}  // namespace mcpcell::sandbox::snapshot
