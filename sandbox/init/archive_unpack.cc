// Archive extraction relative to a directory fd (archive_unpack.h).
#include "sandbox/init/archive_unpack.h"

#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <vector>

#include "base/unique_fd.h"

namespace mcpcell::sandbox {
namespace {

// libarchive's message for the last error; it has none for some failures (nullptr).
std::string ArchiveErrorText(archive* a) {
  const char* text = archive_error_string(a);
  return text ? text : "unknown libarchive error (" + std::to_string(archive_errno(a)) + ")";
}

// The components of a checked archive path, without "" and "." ("./a//b" -> a, b).
std::vector<std::string> Components(std::string_view path) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view c = path.substr(pos, slash - pos);
    if (!c.empty() && c != ".") out.emplace_back(c);
    pos = slash + 1;
  }
  return out;
}

// Opens `name` under `dir` as a directory, never following a symlink and never leaving
// `dir`; with `create`, makes it first when missing.
Result<UniqueFd> OpenSubdir(int dir, const std::string& name, bool create) {
  if (create && ::mkdirat(dir, name.c_str(), 0755) != 0 && errno != EEXIST)
    return Error::Sys("mkdirat(\"" + name + "\")");
  open_how how{};
  how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
  how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  int fd = static_cast<int>(::syscall(SYS_openat2, dir, name.c_str(), &how, sizeof how));
  if (fd < 0) {
    if (errno == ELOOP) return Error::Msg("goes through the symlink \"" + name + "\"");
    if (errno == ENOTDIR) return Error::Msg("\"" + name + "\" is not a directory");
    return Error::Sys("openat2(\"" + name + "\")");
  }
  return UniqueFd(fd);
}

// The directory that holds the entry (its parents made as needed) and the entry's name.
struct Parent {
  UniqueFd fd;
  std::string name;
};

Result<Parent> OpenParent(int root, const std::vector<std::string>& parts, bool create) {
  Parent p;
  int cur = root;
  std::string walked;
  for (size_t i = 0; i + 1 < parts.size(); ++i) {
    walked += (walked.empty() ? "" : "/") + parts[i];
    Result<UniqueFd> next = OpenSubdir(cur, parts[i], create);
    if (!next && walked != parts[i])
      return Error{next.error().message + " (at \"" + walked + "\")", next.error().err};
    if (!next) return next.error();
    p.fd = std::move(*next);
    cur = p.fd.get();
  }
  if (!p.fd.valid()) p.fd = UniqueFd(::fcntl(root, F_DUPFD_CLOEXEC, 0));
  p.name = parts.back();
  return p;
}

// Removes what stands at the entry's name unless it is a directory (an archive may replace
// its own earlier entries, as tar does). The name itself is never followed.
Status ClearName(const Parent& p) {
  struct stat st;
  if (::fstatat(p.fd.get(), p.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return Ok();
  if (S_ISDIR(st.st_mode)) return Error::Msg("a directory of that name exists");
  if (::unlinkat(p.fd.get(), p.name.c_str(), 0) != 0) return Error::Sys("unlinkat");
  return Ok();
}

const char* TypeRefusal(mode_t type) {
  switch (type) {
    case AE_IFCHR:
    case AE_IFBLK:
      return "device node";
    case AE_IFIFO:
      return "FIFO";
    case AE_IFSOCK:
      return "socket";
    default:
      return nullptr;
  }
}

class Unpacker {
 public:
  Unpacker(archive* a, uint64_t archive_bytes, int root, const UnpackLimits& limits,
           const UnpackReport& report)
      : a_(a), archive_bytes_(archive_bytes), root_(root), limits_(limits), report_(report) {}

  // One entry: extracted, refused, or (a limit) the end of the extraction.
  void Entry(archive_entry* e);
  bool stopped() const { return summary_.stopped; }
  const UnpackSummary& summary() const { return summary_; }

 private:
  void Refuse(const std::string& path, const std::string& reason) {
    ++summary_.refused;
    report_(UnpackEvent{"refused", path, 0, reason});
  }
  void Stop(const std::string& path, const std::string& reason) {
    Refuse(path, reason);
    summary_.stopped = true;
  }
  void Extracted(const char* kind, const std::string& path, uint64_t size) {
    ++summary_.entries;
    report_(UnpackEvent{kind, path, size, ""});
  }
  std::string Problem(archive_entry* e, const std::string& path, mode_t type);
  Status WriteData(int fd, const std::string& path);
  Status MakeFile(const Parent& p, archive_entry* e, const std::string& path);
  Status MakeHardlink(const Parent& p, const std::string& target);

  archive* a_;
  uint64_t archive_bytes_;  // the whole archive, compressed: the ratio's base
  int root_;
  const UnpackLimits& limits_;
  const UnpackReport& report_;
  UnpackSummary summary_;
  uint64_t declared_ = 0;  // sum of the file entries' declared sizes
};

std::string Unpacker::Problem(archive_entry* e, const std::string& path, mode_t type) {
  if (std::string why = ArchivePathProblem(path); !why.empty()) return why;
  if (const char* t = TypeRefusal(type)) return t;
  if (archive_entry_mode(e) & (S_ISUID | S_ISGID)) return "setuid/setgid bit";
  const char* hard = archive_entry_hardlink(e);
  if (hard) {
    if (std::string why = ArchivePathProblem(hard); !why.empty())
      return "hard link target \"" + std::string(hard) + "\": " + why;
  } else if (type == AE_IFLNK) {
    const char* target = archive_entry_symlink(e);
    if (!target) return "symlink without a target";
    if (std::string why = SymlinkTargetProblem(path, target); !why.empty()) return why;
  } else if (type != AE_IFREG && type != AE_IFDIR) {
    return "unsupported entry type";
  }
  return "";
}

void Unpacker::Entry(archive_entry* e) {
  const char* raw = archive_entry_pathname(e);
  std::string path = raw ? raw : "";
  if (summary_.entries + summary_.refused >= limits_.max_entries)
    return Stop(path, "more than " + std::to_string(limits_.max_entries) +
                          " entries (limits.archive_entries)");
  mode_t type = archive_entry_filetype(e);
  if (std::string why = Problem(e, path, type); !why.empty()) return Refuse(path, why);
  std::vector<std::string> parts = Components(path);
  if (parts.empty()) return;  // "." or "./": the target itself
  if (type == AE_IFREG && !archive_entry_hardlink(e) && archive_entry_size_is_set(e)) {
    declared_ += static_cast<uint64_t>(archive_entry_size(e));
    if (declared_ > limits_.max_bytes)
      return Stop(path, "the files add up to more than " + std::to_string(limits_.max_bytes) +
                            " bytes (limits.archive_bytes)");
  }
  Result<Parent> parent = OpenParent(root_, parts, /*create=*/true);
  if (!parent) return Refuse(path, parent.error().message);
  const Parent& p = *parent;
  Status made = Ok();
  const char* kind = "file";
  if (const char* hard = archive_entry_hardlink(e)) {
    kind = "hardlink";
    made = MakeHardlink(p, hard);
  } else if (type == AE_IFDIR) {
    kind = "directory";
    if (::mkdirat(p.fd.get(), p.name.c_str(), 0755) != 0 && errno != EEXIST)
      made = Error::Sys("mkdirat");
    // Owner rwx always, so the entries that follow can be written into it.
    else if (Result<UniqueFd> d = OpenSubdir(p.fd.get(), p.name, false); !d)
      made = d.error();
    else if (::fchmodat(p.fd.get(), p.name.c_str(), (archive_entry_perm(e) & 0777) | 0700, 0))
      made = Error::Sys("fchmodat");
  } else if (type == AE_IFLNK) {
    kind = "symlink";
    made = ClearName(p);
    if (made && ::symlinkat(archive_entry_symlink(e), p.fd.get(), p.name.c_str()) != 0)
      made = Error::Sys("symlinkat");
  } else {
    made = MakeFile(p, e, path);
  }
  if (summary_.stopped) return;
  if (!made) return Refuse(path, made.error().message);
  Extracted(kind, path, type == AE_IFREG ? static_cast<uint64_t>(archive_entry_size(e)) : 0);
}

Status Unpacker::MakeHardlink(const Parent& p, const std::string& target) {
  std::vector<std::string> parts = Components(target);
  if (parts.empty()) return Error::Msg("hard link to the target directory");
  Result<Parent> tp = OpenParent(root_, parts, /*create=*/false);
  if (!tp) return Error::Msg("hard link target \"" + target + "\": " + tp.error().message);
  struct stat st;
  if (::fstatat(tp->fd.get(), tp->name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::Sys("hard link target \"" + target + "\": fstatat");
  if (!S_ISREG(st.st_mode))
    return Error::Msg("hard link target \"" + target + "\" is not a regular file");
  if (Status s = ClearName(p); !s) return s;
  if (::linkat(tp->fd.get(), tp->name.c_str(), p.fd.get(), p.name.c_str(), 0) != 0)
    return Error::Sys("linkat(\"" + target + "\")");
  return Ok();
}

Status Unpacker::MakeFile(const Parent& p, archive_entry* e, const std::string& path) {
  if (Status s = ClearName(p); !s) return s;
  UniqueFd fd(::openat(p.fd.get(), p.name.c_str(),
                       O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd.valid()) return Error::Sys("openat");
  Status written = WriteData(fd.get(), path);
  if (written && archive_entry_size_is_set(e) &&
      ::ftruncate(fd.get(), archive_entry_size(e)) != 0)  // a sparse file's trailing hole
    written = Error::Sys("ftruncate");
  if (written && ::fchmod(fd.get(), archive_entry_perm(e) & 0777) != 0)
    written = Error::Sys("fchmod");
  if (!written || summary_.stopped) ::unlinkat(p.fd.get(), p.name.c_str(), 0);
  return written;
}

// Copies the entry's data blocks (sparse ones at their offsets), counting every byte
// against the limits as the decompressor produces it: a header may understate a size. The
// ratio is the output so far over the whole archive's size.
Status Unpacker::WriteData(int fd, const std::string& path) {
  const void* buf;
  size_t size;
  la_int64_t offset;
  for (;;) {
    int r = archive_read_data_block(a_, &buf, &size, &offset);
    if (r == ARCHIVE_EOF) return Ok();
    if (r < ARCHIVE_WARN) return Error::Msg(std::string("reading: ") + ArchiveErrorText(a_));
    summary_.bytes += size;
    const uint64_t in = archive_bytes_;
    if (summary_.bytes > limits_.max_bytes) {
      Stop(path, "the data adds up to more than " + std::to_string(limits_.max_bytes) +
                     " bytes (limits.archive_bytes)");
      return Ok();
    }
    if (summary_.bytes > kRatioFloorBytes && summary_.bytes / limits_.max_ratio > in) {
      Stop(path, "expands more than " + std::to_string(limits_.max_ratio) +
                     " times (limits.archive_ratio): " + std::to_string(summary_.bytes) +
                     " bytes out of " + std::to_string(in));
      return Ok();
    }
    const char* p = static_cast<const char*>(buf);
    while (size > 0) {
      ssize_t n = ::pwrite(fd, p, size, offset);
      if (n < 0) return Error::Sys("write");
      p += n;
      size -= static_cast<size_t>(n);
      offset += n;
    }
  }
}

}  // namespace

std::string ArchivePathProblem(std::string_view path) {
  if (path.empty()) return "empty path";
  if (path.size() >= PATH_MAX) return "path longer than " + std::to_string(PATH_MAX) + " bytes";
  if (path.front() == '/') return "absolute path";
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t slash = path.find('/', pos);
    if (slash == std::string_view::npos) slash = path.size();
    if (path.substr(pos, slash - pos) == "..") return "\"..\" component (leaves the directory)";
    pos = slash + 1;
  }
  return "";
}

std::string SymlinkTargetProblem(std::string_view link_path, std::string_view target) {
  if (target.empty()) return "symlink with an empty target";
  if (target.front() == '/') return "symlink to an absolute path (leaves the directory)";
  // Depth of the link's directory below the target, then the target's walk from there.
  int64_t depth = static_cast<int64_t>(Components(link_path).size()) - 1;
  size_t pos = 0;
  while (pos <= target.size()) {
    size_t slash = target.find('/', pos);
    if (slash == std::string_view::npos) slash = target.size();
    std::string_view c = target.substr(pos, slash - pos);
    if (c == "..") {
      if (--depth < 0) return "symlink to \"" + std::string(target) + "\" leaves the directory";
    } else if (!c.empty() && c != ".") {
      ++depth;
    }
    pos = slash + 1;
  }
  return "";
}

Result<UnpackSummary> UnpackArchive(std::string_view data, int dir_fd, const UnpackLimits& limits,
                                    const UnpackReport& report) {
  archive* a = archive_read_new();
  if (!a) return Error::Msg("archive_read_new: out of memory");
  archive_read_support_format_tar(a);
  archive_read_support_format_zip(a);
  archive_read_support_filter_gzip(a);
  archive_read_support_filter_bzip2(a);
  archive_read_support_filter_xz(a);
  archive_read_support_filter_zstd(a);
  Result<UnpackSummary> result = UnpackSummary{};
  if (archive_read_open_memory(a, data.data(), data.size()) != ARCHIVE_OK) {
    result = Error::Msg(std::string("not a tar or zip archive: ") + ArchiveErrorText(a));
    archive_read_free(a);
    return result;
  }
  Unpacker unpacker(a, data.size(), dir_fd, limits, report);
  for (;;) {
    archive_entry* e = nullptr;
    int r = archive_read_next_header(a, &e);
    if (r == ARCHIVE_EOF) break;
    if (r < ARCHIVE_WARN) {
      result = Error::Msg(std::string("reading the archive after ") +
                          std::to_string(unpacker.summary().entries) +
                          " entries: " + ArchiveErrorText(a));
      break;
    }
    unpacker.Entry(e);
    if (unpacker.stopped()) break;
  }
  if (result) result = unpacker.summary();
  archive_read_free(a);
  return result;
}

}  // namespace mcpcell::sandbox
