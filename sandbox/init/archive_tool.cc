// The unpack and pack modes of cell init's binary (archive_tool.h).
#include "sandbox/init/archive_tool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "base/unique_fd.h"
#include "base/utf8.h"
#include "sandbox/init/archive_pack.h"
#include "sandbox/init/archive_unpack.h"

namespace mcpcell::sandbox {
namespace {

std::string Quote(std::string_view raw) {
  std::string s = ToValidUtf8(raw);
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char esc[8];
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

void WriteAll(int fd, const std::string& text) {
  const char* p = text.data();
  size_t left = text.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    left -= static_cast<size_t>(n);
  }
}

int Fail(int fd, const std::string& message) {
  WriteAll(fd, "{\"error\":" + Quote(message) + "}\n");
  return 1;
}

int Usage(const std::string& problem) {
  WriteAll(STDERR_FILENO, "mcpcell-init archive helper: " + problem +
                              "\nusage: unpack DIR MAX_BYTES MAX_RATIO MAX_ENTRIES MAX_INPUT"
                              " | pack DIR MAX_BYTES\n");
  return 2;
}

// A positive decimal count, or 0 when `text` is not one.
uint64_t Count(const char* text) {
  if (!text || !*text) return 0;
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(text, &end, 10);
  if (errno != 0 || *end != '\0' || text[0] == '-') return 0;
  return v;
}

// Makes DIR and its missing parents (as `mkdir -p`), then opens it.
Result<UniqueFd> MakeAndOpenDir(const std::string& dir) {
  for (size_t pos = 1; pos <= dir.size(); ++pos) {
    if (pos != dir.size() && dir[pos] != '/') continue;
    std::string prefix = dir.substr(0, pos);
    if (::mkdir(prefix.c_str(), 0755) != 0 && errno != EEXIST)
      return Error::Sys("mkdir(\"" + prefix + "\")");
  }
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid()) return Error::Sys("open(\"" + dir + "\")");
  return fd;
}

// stdin to its end, refusing to pass `max` bytes.
Result<std::string> ReadInput(uint64_t max) {
  std::string data;
  char buf[64 * 1024];
  for (;;) {
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("read(stdin)");
    if (n == 0) return data;
    if (data.size() + static_cast<size_t>(n) > max)
      return Error::Msg("the archive passes " + std::to_string(max) + " bytes");
    data.append(buf, static_cast<size_t>(n));
  }
}

int Unpack(int argc, char** argv) {
  if (argc != 7) return Usage("unpack takes 5 arguments");
  UnpackLimits limits{Count(argv[3]), Count(argv[4]), Count(argv[5])};
  uint64_t max_input = Count(argv[6]);
  if (!limits.max_bytes || !limits.max_ratio || !limits.max_entries || !max_input)
    return Usage("the limits must be positive integers");
  Result<std::string> data = ReadInput(max_input);
  if (!data) return Fail(STDOUT_FILENO, data.error().message);
  Result<UniqueFd> dir = MakeAndOpenDir(argv[2]);
  if (!dir) return Fail(STDOUT_FILENO, dir.error().message);
  auto report = [](const UnpackEvent& e) {
    std::string line = "{\"kind\":" + Quote(e.kind) + ",\"path\":" + Quote(e.path) +
                       ",\"size\":" + std::to_string(e.size);
    if (!e.reason.empty()) line += ",\"reason\":" + Quote(e.reason);
    WriteAll(STDOUT_FILENO, line + "}\n");
  };
  Result<UnpackSummary> done = UnpackArchive(*data, dir->get(), limits, report);
  if (!done) return Fail(STDOUT_FILENO, done.error().message);
  WriteAll(STDOUT_FILENO, "{\"done\":true,\"entries\":" + std::to_string(done->entries) +
                              ",\"refused\":" + std::to_string(done->refused) +
                              ",\"bytes\":" + std::to_string(done->bytes) +
                              ",\"stopped\":" + (done->stopped ? "true" : "false") + "}\n");
  return 0;
}

int Pack(int argc, char** argv) {
  if (argc != 4) return Usage("pack takes 2 arguments");
  uint64_t max_bytes = Count(argv[3]);
  if (!max_bytes) return Usage("MAX_BYTES must be a positive integer");
  UniqueFd dir(::open(argv[2], O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dir.valid())
    return Fail(STDERR_FILENO, Error::Sys("open(\"" + std::string(argv[2]) + "\")").message);
  Result<PackSummary> done = PackDirectory(dir.get(), STDOUT_FILENO, max_bytes);
  if (!done) return Fail(STDERR_FILENO, done.error().message);
  std::string skipped = "[";
  for (size_t i = 0; i < done->skipped.size() && i < 100; ++i)
    skipped += (i ? "," : "") + Quote(done->skipped[i]);
  WriteAll(STDERR_FILENO, "{\"done\":true,\"entries\":" + std::to_string(done->entries) +
                              ",\"bytes\":" + std::to_string(done->bytes) +
                              ",\"skipped_count\":" + std::to_string(done->skipped.size()) +
                              ",\"skipped\":" + skipped + "]}\n");
  return 0;
}

}  // namespace

bool IsArchiveToolMode(const char* mode) {
  return mode && (std::strcmp(mode, "unpack") == 0 || std::strcmp(mode, "pack") == 0);
}

int ArchiveToolMain(int argc, char** argv) {
  if (argc < 2 || !IsArchiveToolMode(argv[1])) return Usage("no mode");
  return std::strcmp(argv[1], "unpack") == 0 ? Unpack(argc, argv) : Pack(argc, argv);
}

}  // namespace mcpcell::sandbox
