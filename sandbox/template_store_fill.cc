// FillTemplateRootfs and DebootstrapTemplateRootfs (template_store.h). Both sources, a
// directory and a tar archive (libarchive), become a stream of entries written by one
// RootfsWriter, which checks every name and creates everything relative to the rootfs's
// fd, one component at a time with O_NOFOLLOW: an entry can never write through a
// symlink, whatever came before it in the archive.
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "sandbox/template_store.h"

namespace mcpcell::sandbox {
namespace {

enum class Kind { kDir, kFile, kSymlink, kHardlink };

struct Entry {
  std::string path = {};  // normalised, relative, non-empty
  Kind kind = Kind::kFile;
  mode_t mode = 0644;
  struct timespec mtime = {};
  std::string target = {};  // symlink target, or the hard link's (normalised) existing path
};

// "./a//b/" -> "a/b"; "" for the root itself; an error for absolute paths and "..".
Result<std::string> NormalisePath(const std::string& raw) {
  if (!raw.empty() && raw[0] == '/') return Error::Msg("\"" + raw + "\": absolute path refused");
  std::string out;
  size_t pos = 0;
  while (pos <= raw.size()) {
    size_t end = raw.find('/', pos);
    if (end == std::string::npos) end = raw.size();
    std::string part = raw.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty() || part == ".") continue;
    if (part == "..") return Error::Msg("\"" + raw + "\": \"..\" refused");
    out += (out.empty() ? "" : "/") + part;
  }
  return out;
}

// A relative symlink target must not climb above the root from where the link sits
// (absolute targets are the cell's own paths and resolve inside its root).
Status CheckSymlinkTarget(const std::string& path, const std::string& target) {
  if (target.empty()) return Error::Msg("\"" + path + "\": empty symlink target");
  if (target[0] == '/') return Ok();
  long depth = static_cast<long>(std::count(path.begin(), path.end(), '/'));
  size_t pos = 0;
  while (pos <= target.size()) {
    size_t end = target.find('/', pos);
    if (end == std::string::npos) end = target.size();
    std::string part = target.substr(pos, end - pos);
    pos = end + 1;
    if (part == "..") {
      if (--depth < 0)
        return Error::Msg("\"" + path + "\" -> \"" + target + "\": symlink leaves the root");
    } else if (!part.empty() && part != ".") {
      ++depth;
    }
  }
  return Ok();
}

class RootfsWriter {
 public:
  static Result<RootfsWriter> Open(const std::string& rootfs) {
    UniqueFd fd(open(rootfs.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) return Error::Sys("open(\"" + rootfs + "\")");
    return RootfsWriter(std::move(fd));
  }
  // `data` writes a file's contents to the fd it is given.
  Status Add(const Entry& e, const std::function<Status(int)>& data);
  // Directory modes and times last: a 0555 directory would refuse its own children.
  Status Finish();

 private:
  explicit RootfsWriter(UniqueFd root) : root_(std::move(root)) {}
  // The entry's parent directory, opened component by component without following links.
  Result<UniqueFd> OpenParent(const std::string& path) const;
  UniqueFd root_;
  std::vector<Entry> dirs_;
};

Result<UniqueFd> RootfsWriter::OpenParent(const std::string& path) const {
  UniqueFd dir(fcntl(root_.get(), F_DUPFD_CLOEXEC, 0));
  if (!dir) return Error::Sys("dup(rootfs)");
  size_t pos = 0;
  for (size_t slash; (slash = path.find('/', pos)) != std::string::npos; pos = slash + 1) {
    const std::string part = path.substr(pos, slash - pos);
    const int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
    UniqueFd next(openat(dir.get(), part.c_str(), flags));
    // A tar may name "a/b/f" without an entry for "a/" or "a/b/".
    if (!next && errno == ENOENT && mkdirat(dir.get(), part.c_str(), 0755) == 0) {
      (void)fchmodat(dir.get(), part.c_str(), 0755, 0);  // whatever the umask
      next = UniqueFd(openat(dir.get(), part.c_str(), flags));
    }
    if (!next && (errno == ELOOP || errno == ENOTDIR))
      return Error::Msg("\"" + path + "\": a parent is a symlink or not a directory");
    if (!next) return Error::Sys("open(\"" + path.substr(0, slash) + "\") in the rootfs");
    dir = std::move(next);
  }
  return dir;
}

Status RootfsWriter::Add(const Entry& e, const std::function<Status(int)>& data) {
  auto parent = OpenParent(e.path);
  if (!parent) return parent.error();
  const std::string name = e.path.substr(e.path.rfind('/') + 1);
  const int pfd = parent->get();
  struct stat old;
  const bool exists = fstatat(pfd, name.c_str(), &old, AT_SYMLINK_NOFOLLOW) == 0;
  if (e.kind == Kind::kDir) {
    if (exists && !S_ISDIR(old.st_mode) && unlinkat(pfd, name.c_str(), 0) != 0)
      return Error::Sys("unlink(\"" + e.path + "\")");
    if ((!exists || !S_ISDIR(old.st_mode)) && mkdirat(pfd, name.c_str(), 0700) != 0)
      return Error::Sys("mkdir(\"" + e.path + "\")");
    dirs_.push_back(e);
    return Ok();
  }
  if (exists && unlinkat(pfd, name.c_str(), S_ISDIR(old.st_mode) ? AT_REMOVEDIR : 0) != 0)
    return Error::Sys("unlink(\"" + e.path + "\") to replace it");
  if (e.kind == Kind::kSymlink) {
    if (symlinkat(e.target.c_str(), pfd, name.c_str()) != 0)
      return Error::Sys("symlink(\"" + e.path + "\")");
    struct timespec times[2] = {e.mtime, e.mtime};
    (void)utimensat(pfd, name.c_str(), times, AT_SYMLINK_NOFOLLOW);
    return Ok();
  }
  if (e.kind == Kind::kHardlink) {
    auto tparent = OpenParent(e.target);
    if (!tparent) return tparent.error().Wrap("hard link \"" + e.path + "\"");
    const std::string tname = e.target.substr(e.target.rfind('/') + 1);
    struct stat st;
    if (fstatat(tparent->get(), tname.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      return Error::Msg("hard link \"" + e.path + "\" -> \"" + e.target +
                        "\": not a file of the tree");
    if (linkat(tparent->get(), tname.c_str(), pfd, name.c_str(), 0) != 0)
      return Error::Sys("link(\"" + e.target + "\", \"" + e.path + "\")");
    return Ok();
  }
  UniqueFd fd(
      openat(pfd, name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd) return Error::Sys("create(\"" + e.path + "\")");
  if (Status s = data(fd.get()); !s) return s.error().Wrap(e.path);
  if (fchmod(fd.get(), e.mode & 01777) != 0) return Error::Sys("chmod(\"" + e.path + "\")");
  struct timespec times[2] = {e.mtime, e.mtime};
  (void)futimens(fd.get(), times);
  return Ok();
}

Status RootfsWriter::Finish() {
  // Deepest first, so setting a parent's time is not undone by its children's.
  std::sort(dirs_.begin(), dirs_.end(),
            [](const Entry& a, const Entry& b) { return a.path > b.path; });
  for (const Entry& d : dirs_) {
    auto parent = OpenParent(d.path);
    if (!parent) return parent.error();
    const std::string name = d.path.substr(d.path.rfind('/') + 1);
    if (fchmodat(parent->get(), name.c_str(), d.mode & 01777, 0) != 0)
      return Error::Sys("chmod(\"" + d.path + "\")");
    struct timespec times[2] = {d.mtime, d.mtime};
    (void)utimensat(parent->get(), name.c_str(), times, AT_SYMLINK_NOFOLLOW);
  }
  return Ok();
}

// --- a tar archive ---

Status CopyArchiveData(struct archive* a, int fd) {
  const void* buf;
  size_t size;
  la_int64_t offset;
  for (;;) {
    int r = archive_read_data_block(a, &buf, &size, &offset);
    if (r == ARCHIVE_EOF) return Ok();
    if (r != ARCHIVE_OK) return Error::Msg(std::string("read: ") + archive_error_string(a));
    if (pwrite(fd, buf, size, offset) != static_cast<ssize_t>(size)) return Error::Sys("write");
  }
}

Result<Entry> EntryFromArchive(struct archive_entry* ae) {
  const char* raw = archive_entry_pathname(ae);
  auto path = NormalisePath(raw ? raw : "");
  if (!path) return path.error();
  Entry e{.path = *path, .mode = archive_entry_perm(ae) & 07777};
  e.mtime = {archive_entry_mtime(ae), archive_entry_mtime_nsec(ae)};
  if (const char* link = archive_entry_hardlink(ae)) {
    auto target = NormalisePath(link);
    if (!target || target->empty())
      return Error::Msg("\"" + e.path + "\": hard link to \"" + link + "\" leaves the tree");
    e.kind = Kind::kHardlink;
    e.target = *target;
    return e;
  }
  switch (archive_entry_filetype(ae)) {
    case AE_IFREG:
      e.kind = Kind::kFile;
      break;
    case AE_IFDIR:
      e.kind = Kind::kDir;
      break;
    case AE_IFLNK:
      e.kind = Kind::kSymlink;
      e.target = archive_entry_symlink(ae) ? archive_entry_symlink(ae) : "";
      if (Status s = CheckSymlinkTarget(e.path, e.target); !s) return s.error();
      break;
    default:
      return Error::Msg("\"" + e.path + "\": device nodes, fifos and sockets are refused");
  }
  return e;
}

Status FillFromArchive(const std::string& tar, RootfsWriter& out) {
  std::unique_ptr<struct archive, int (*)(struct archive*)> a(archive_read_new(),
                                                              archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_tar(a.get());
  if (archive_read_open_filename(a.get(), tar.c_str(), 1 << 16) != ARCHIVE_OK)
    return Error::Msg(tar + ": " + archive_error_string(a.get()));
  struct archive_entry* ae;
  for (;;) {
    int r = archive_read_next_header(a.get(), &ae);
    if (r == ARCHIVE_EOF) return Ok();
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
      return Error::Msg(tar + ": " + archive_error_string(a.get()));
    auto e = EntryFromArchive(ae);
    if (!e) return e.error().Wrap(tar);
    if (e->path.empty()) continue;  // "./": the rootfs itself stays 0755
    Status s = out.Add(*e, [&](int fd) { return CopyArchiveData(a.get(), fd); });
    if (!s) return s.error().Wrap(tar);
  }
}

// --- a directory ---

Status CopyFileData(const std::string& from, int to) {
  UniqueFd in(open(from.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in) return Error::Sys("open(\"" + from + "\")");
  char buf[1 << 16];
  for (;;) {
    ssize_t n = read(in.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("read(\"" + from + "\")");
    if (n == 0) return Ok();
    for (ssize_t off = 0; off < n;) {
      ssize_t w = write(to, buf + off, static_cast<size_t>(n - off));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return Error::Sys("write");
      off += w;
    }
  }
}

struct DirWalk {
  std::string src = {};
  RootfsWriter* out = nullptr;
  std::map<std::pair<dev_t, ino_t>, std::string> links = {};  // first path of each multi-link file
};

Status WalkDir(DirWalk& w, const std::string& rel) {
  const std::string path = w.src + "/" + rel;
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return Error::Sys("lstat(\"" + path + "\")");
  Entry e{.path = rel, .mode = st.st_mode & 07777, .mtime = st.st_mtim};
  if (S_ISDIR(st.st_mode)) {
    e.kind = Kind::kDir;
    if (Status s = w.out->Add(e, {}); !s) return s;
    std::vector<std::string> names;
    DIR* d = opendir(path.c_str());
    if (!d) return Error::Sys("opendir(\"" + path + "\")");
    while (dirent* de = readdir(d))
      if (std::string n = de->d_name; n != "." && n != "..") names.push_back(std::move(n));
    closedir(d);
    std::sort(names.begin(), names.end());
    for (const std::string& n : names)
      if (Status s = WalkDir(w, rel + "/" + n); !s) return s;
    return Ok();
  }
  if (S_ISLNK(st.st_mode)) {
    e.kind = Kind::kSymlink;
    e.target.resize(static_cast<size_t>(st.st_size) + 1);
    ssize_t n = readlink(path.c_str(), e.target.data(), e.target.size());
    if (n < 0) return Error::Sys("readlink(\"" + path + "\")");
    e.target.resize(static_cast<size_t>(n));
    if (Status s = CheckSymlinkTarget(rel, e.target); !s) return s;
    return w.out->Add(e, {});
  }
  if (!S_ISREG(st.st_mode))
    return Error::Msg("\"" + rel + "\": device nodes, fifos and sockets are refused");
  if (st.st_nlink > 1) {
    auto [it, first] = w.links.emplace(std::make_pair(st.st_dev, st.st_ino), rel);
    if (!first) {
      e.kind = Kind::kHardlink;
      e.target = it->second;
      return w.out->Add(e, {});
    }
  }
  return w.out->Add(e, [&](int fd) { return CopyFileData(path, fd); });
}

Status FillFromDirectory(const std::string& src, RootfsWriter& out) {
  DirWalk w{.src = src, .out = &out};
  std::vector<std::string> names;
  DIR* d = opendir(src.c_str());
  if (!d) return Error::Sys("opendir(\"" + src + "\")");
  while (dirent* de = readdir(d))
    if (std::string n = de->d_name; n != "." && n != "..") names.push_back(std::move(n));
  closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names)
    if (Status s = WalkDir(w, n); !s) return s.error().Wrap(src);
  return Ok();
}

}  // namespace

Status FillTemplateRootfs(const std::string& from, const std::string& rootfs) {
  struct stat st;
  if (stat(from.c_str(), &st) != 0) return Error::Sys("--from \"" + from + "\"");
  auto out = RootfsWriter::Open(rootfs);
  if (!out) return out.error();
  Status s = S_ISDIR(st.st_mode) ? FillFromDirectory(from, *out)
             : S_ISREG(st.st_mode)
                 ? FillFromArchive(from, *out)
                 : Status(Error::Msg("--from \"" + from + "\": not a directory or a file"));
  if (!s) return s;
  return out->Finish();
}

Status DebootstrapTemplateRootfs(const std::string& suite, const std::string& rootfs,
                                 const std::string& scratch_dir) {
  // A leading "-" would make the suite one of mmdebstrap's options ("--help" ran it).
  if (suite.empty() || suite[0] < 'a' || suite[0] > 'z' ||
      suite.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos)
    return Error::Msg("--debian-suite \"" + suite + "\": not a suite name like bookworm");
  // Looked up in PATH as a shell would (the operator's command line runs it), so that an
  // mmdebstrap outside /usr/bin works and a missing one is refused before anything is made.
  const char* env_path = getenv("PATH");
  const std::string search = env_path && *env_path ? env_path : "/usr/local/bin:/usr/bin";
  std::string tool;
  for (size_t start = 0; tool.empty() && start <= search.size();) {
    size_t end = search.find(':', start);
    if (end == std::string::npos) end = search.size();
    const std::string dir = search.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/mmdebstrap";
    if (access(candidate.c_str(), X_OK) == 0) tool = candidate;
    start = end + 1;
  }
  if (tool.empty())
    return Error::Msg("--debian-suite needs mmdebstrap, which is not in PATH (" + search +
                      "; apt-get install mmdebstrap), or build --from a rootfs dir or tar");
  const std::string tar = scratch_dir + "/debootstrap.tar";
  pid_t pid = fork();
  if (pid < 0) return Error::Sys("fork");
  if (pid == 0) {
    // Device nodes are left out of the tar: cells get their own /dev.
    execl(tool.c_str(), tool.c_str(), "--variant=minbase", "--skip=output/dev", "--quiet",
          suite.c_str(), tar.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR) return Error::Sys("waitpid(mmdebstrap)");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    return Error::Msg("mmdebstrap " + suite + " failed (status " + std::to_string(status) + ")");
  Status s = FillTemplateRootfs(tar, rootfs);
  (void)unlink(tar.c_str());
  return s;
}

}  // namespace mcpcell::sandbox
