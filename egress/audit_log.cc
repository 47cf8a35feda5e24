#include "egress/audit_log.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>

namespace mcpcell::egress {

Result<std::shared_ptr<JsonLinesFile>> JsonLinesFile::Open(const std::string& path) {
  size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) {
    std::string dir = path.substr(0, slash);
    if (mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
      return Error::Sys("mkdir(\"" + dir + "\")");
  }
  int fd = open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Error::Sys("open(\"" + path + "\", O_APPEND)");
  return std::shared_ptr<JsonLinesFile>(new JsonLinesFile(fd));
}

JsonLinesFile::~JsonLinesFile() { close(fd_); }

void JsonLinesFile::Write(const nlohmann::json& event) {
  // Invalid UTF-8 (a host name never is, but reasons quote input) is replaced, not thrown.
  std::string line = event.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  line += '\n';
  std::lock_guard lock(mu_);
  ssize_t n;
  do {
    n = ::write(fd_, line.data(), line.size());
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(line.size())) return;
  ++failed_;
  last_error_ = n < 0 ? std::string(std::strerror(errno))
                      : "short write (" + std::to_string(n) + " of " + std::to_string(line.size()) +
                            " bytes; disk full?)";
  if (n > 0) {
    // A short write (the disk filled up mid-line) would leave half a line that the next
    // record is appended to, and that line would not parse. Cut it off again: after an
    // O_APPEND write the offset is the end of what was written. (Another process appending
    // in between, on a full disk, is the one case this can still lose a line.)
    off_t end = ::lseek(fd_, 0, SEEK_CUR);
    if (end < n || ::ftruncate(fd_, end - n) != 0) {
      last_error_ +=
          "; the partial line could not be removed: " + std::string(std::strerror(errno));
    }
  }
}

std::string JsonLinesFile::last_error() const {
  std::lock_guard lock(mu_);
  return last_error_;
}

uint64_t JsonLinesFile::failed_writes() const {
  std::lock_guard lock(mu_);
  return failed_;
}

AuditSink JsonLinesFile::Sink(std::shared_ptr<JsonLinesFile> file) {
  return [file = std::move(file)](const nlohmann::json& event) { file->Write(event); };
}

std::string EgressAuditPath(const std::string& state_dir) {
  return state_dir + "/audit/egress.jsonl";
}

std::string Rfc3339UtcNow() {
  auto now = std::chrono::system_clock::now();
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch());
  std::time_t secs = static_cast<std::time_t>(ms.count() / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms.count() % 1000));
  return buf;
}

}  // namespace mcpcell::egress
