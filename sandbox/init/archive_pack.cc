// Packing a directory tree as tar.gz by directory fds (archive_pack.h).
#include "sandbox/init/archive_pack.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "base/unique_fd.h"

namespace mcpcell::sandbox {
namespace {

// libarchive's message for the last error; it has none for some failures (nullptr).
std::string ArchiveErrorText(archive* a) {
  const char* text = archive_error_string(a);
  return text ? text : "unknown libarchive error (" + std::to_string(archive_errno(a)) + ")";
}

// libarchive's write callback: to `fd`, refusing to pass `max` bytes.
struct Sink {
  int fd;
  uint64_t max;
  uint64_t written = 0;
  bool over = false;
};

la_ssize_t WriteToSink(archive*, void* data, const void* buf, size_t size) {
  Sink* sink = static_cast<Sink*>(data);
  if (sink->written + size > sink->max) {
    sink->over = true;
    return -1;
  }
  const char* p = static_cast<const char*>(buf);
  size_t left = size;
  while (left > 0) {
    ssize_t n = ::write(sink->fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return -1;
    p += n;
    left -= static_cast<size_t>(n);
  }
  sink->written += size;
  return static_cast<la_ssize_t>(size);
}

class Packer {
 public:
  Packer(archive* a, PackSummary& summary) : a_(a), summary_(summary) {}
  // The entries of `dir` (an open directory), `prefix` their archive path's start.
  Status Walk(int dir, const std::string& prefix);

 private:
  Status Add(int dir, const std::string& name, const std::string& path);
  Status Header(archive_entry* e, const std::string& path);
  Status Data(int fd, const std::string& path);

  archive* a_;
  PackSummary& summary_;
};

Status Packer::Header(archive_entry* e, const std::string& path) {
  int r = archive_write_header(a_, e);
  archive_entry_free(e);
  if (r < ARCHIVE_WARN) return Error::Msg(path + ": " + ArchiveErrorText(a_));
  ++summary_.entries;
  return Ok();
}

Status Packer::Data(int fd, const std::string& path) {
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys(path + ": read");
    if (n == 0) return Ok();
    if (archive_write_data(a_, buf, static_cast<size_t>(n)) < 0)
      return Error::Msg(path + ": " + ArchiveErrorText(a_));
  }
}

Status Packer::Add(int dir, const std::string& name, const std::string& path) {
  struct stat st;
  if (::fstatat(dir, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return Error::Sys(path + ": fstatat");
  UniqueFd fd;
  if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)) {
    int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK;
    fd = UniqueFd(::openat(dir, name.c_str(), flags | (S_ISDIR(st.st_mode) ? O_DIRECTORY : 0)));
    if (!fd.valid()) return Error::Sys(path + ": openat");
    // What was opened is what was stat'ed (no swap between the two calls).
    if (::fstat(fd.get(), &st) != 0) return Error::Sys(path + ": fstat");
  }
  archive_entry* e = archive_entry_new();
  archive_entry_set_pathname(e, path.c_str());
  archive_entry_set_perm(e, st.st_mode & 0777);
  archive_entry_set_mtime(e, st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
  if (S_ISREG(st.st_mode)) {
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_size(e, st.st_size);
    if (Status s = Header(e, path); !s) return s;
    return Data(fd.get(), path);
  }
  if (S_ISDIR(st.st_mode)) {
    archive_entry_set_filetype(e, AE_IFDIR);
    if (Status s = Header(e, path); !s) return s;
    return Walk(fd.get(), path + "/");
  }
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = ::readlinkat(dir, name.c_str(), target, sizeof target - 1);
    if (n < 0) {
      archive_entry_free(e);
      return Error::Sys(path + ": readlinkat");
    }
    target[n] = '\0';
    archive_entry_set_filetype(e, AE_IFLNK);
    archive_entry_set_symlink(e, target);
    return Header(e, path);
  }
  archive_entry_free(e);
  summary_.skipped.push_back(path + (S_ISFIFO(st.st_mode)   ? ": FIFO"
                                     : S_ISSOCK(st.st_mode) ? ": socket"
                                                            : ": device node"));
  return Ok();
}

Status Packer::Walk(int dir, const std::string& prefix) {
  int copy = ::openat(dir, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (copy < 0) return Error::Sys((prefix.empty() ? "." : prefix) + ": open");
  DIR* d = ::fdopendir(copy);
  if (!d) {
    ::close(copy);
    return Error::Sys(prefix + ": fdopendir");
  }
  std::vector<std::string> names;
  while (dirent* entry = ::readdir(d)) {
    std::string n = entry->d_name;
    if (n != "." && n != "..") names.push_back(std::move(n));
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  for (const std::string& n : names) {
    if (Status s = Add(dir, n, prefix + n); !s) return s;
  }
  return Ok();
}

}  // namespace

Result<PackSummary> PackDirectory(int dir_fd, int out_fd, uint64_t max_bytes) {
  archive* a = archive_write_new();
  if (!a) return Error::Msg("archive_write_new: out of memory");
  archive_write_set_format_pax_restricted(a);
  archive_write_add_filter_gzip(a);
  archive_write_set_bytes_in_last_block(a, 1);
  Sink sink{out_fd, max_bytes};
  PackSummary summary;
  Result<PackSummary> result = summary;
  if (archive_write_open(a, &sink, nullptr, WriteToSink, nullptr) != ARCHIVE_OK) {
    result = Error::Msg(std::string("archive_write_open: ") + ArchiveErrorText(a));
  } else {
    Packer packer(a, summary);
    Status walked = packer.Walk(dir_fd, "");
    if (walked && archive_write_close(a) != ARCHIVE_OK && !sink.over)
      walked = Error::Msg(std::string("finishing the archive: ") + ArchiveErrorText(a));
    if (sink.over)
      result = Error::Msg("the tar.gz passes " + std::to_string(max_bytes) + " bytes");
    else if (!walked)
      result = walked.error();
  }
  archive_write_free(a);
  if (result) {
    summary.bytes = sink.written;
    result = std::move(summary);
  }
  return result;
}

}  // namespace mcpcell::sandbox
