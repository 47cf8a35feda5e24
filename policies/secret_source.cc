#include "policies/secret_source.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/unique_fd.h"

extern char** environ;

namespace mcpcell::policies {
namespace {

void TrimNewline(std::string& value) {
  if (!value.empty() && value.back() == '\n') value.pop_back();
  if (!value.empty() && value.back() == '\r') value.pop_back();
}

Result<std::string> ReadFileSource(const std::string& name, const SecretSource& source,
                                   size_t max_bytes) {
  const int fd = ::open(source.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::Sys("secret " + name + ": open(\"" + source.path + "\")");
  UniqueFd file(fd);
  std::string value;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(file.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Error::Sys("secret " + name + ": read(\"" + source.path + "\")");
    if (n == 0) break;
    value.append(buf, static_cast<size_t>(n));
    if (value.size() > max_bytes) {
      WipeSecret(value);
      return Error::Msg("secret " + name + ": " + source.path + " is larger than " +
                        std::to_string(max_bytes) + " bytes");
    }
  }
  explicit_bzero(buf, sizeof buf);
  return value;
}

// Reads the child's stdout until EOF or the deadline; false on timeout.
bool ReadUntil(int fd, std::chrono::steady_clock::time_point deadline, size_t max_bytes,
               std::string* out, bool* too_big) {
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->append(buf, static_cast<size_t>(n));
    if (out->size() > max_bytes) {
      *too_big = true;
      break;
    }
  }
  explicit_bzero(buf, sizeof buf);
  return true;
}

Result<std::string> RunCommandSource(const std::string& name, const SecretSource& source,
                                     const SecretReadOptions& options) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) return Error::Sys("secret " + name + ": pipe2");
  UniqueFd read_end(pipe_fds[0]), write_end(pipe_fds[1]);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, write_end.get(), STDOUT_FILENO);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : source.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return Error::Sys("secret " + name + ": posix_spawn(\"" + source.argv[0] + "\")", rc);
  write_end.Reset();
  std::string value;
  bool too_big = false;
  const bool done =
      ReadUntil(read_end.get(), std::chrono::steady_clock::now() + options.command_timeout,
                options.max_bytes, &value, &too_big);
  if (!done || too_big) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string why;
  if (!done) {
    why = "no answer within " + std::to_string(options.command_timeout.count()) + " ms (killed)";
  } else if (too_big) {
    why = "its output is larger than " + std::to_string(options.max_bytes) + " bytes";
  } else if (WIFSIGNALED(status)) {
    why = "killed by signal " + std::to_string(WTERMSIG(status));
  } else if (WEXITSTATUS(status) != 0) {
    why = "exit status " + std::to_string(WEXITSTATUS(status));
  }
  if (!why.empty()) {
    WipeSecret(value);
    return Error::Msg("secret " + name + ": command " + source.argv[0] + ": " + why);
  }
  return value;
}

}  // namespace

Result<SecretSource> ParseSecretSource(const std::string& text) {
  SecretSource source;
  const size_t colon = text.find(':');
  const std::string kind = colon == std::string::npos ? text : text.substr(0, colon);
  const std::string rest = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (kind == "file") {
    source.kind = SecretSource::Kind::kFile;
    if (rest.empty() || rest[0] != '/')
      return Error::Msg("\"" + text + "\": file: needs an absolute path");
    source.path = rest;
  } else if (kind == "env") {
    source.kind = SecretSource::Kind::kEnv;
    if (rest.empty() || rest.find_first_of("= \t") != std::string::npos)
      return Error::Msg("\"" + text + "\": env: needs a variable name");
    source.variable = rest;
  } else if (kind == "command") {
    source.kind = SecretSource::Kind::kCommand;
    std::istringstream words(rest);
    for (std::string w; words >> w;) source.argv.push_back(w);
    if (source.argv.empty() || source.argv[0][0] != '/')
      return Error::Msg("\"" + text + "\": command: needs an absolute program path");
  } else {
    return Error::Msg("\"" + text + "\": unknown source kind \"" + kind +
                      "\" (known: file:PATH, env:VAR, command:CMDLINE)");
  }
  return source;
}

Result<std::string> ReadSecretSource(const std::string& name, const SecretSource& source,
                                     const SecretReadOptions& options) {
  Result<std::string> value = Error::Msg("secret " + name + ": no source");
  switch (source.kind) {
    case SecretSource::Kind::kFile:
      value = ReadFileSource(name, source, options.max_bytes);
      break;
    case SecretSource::Kind::kEnv: {
      const char* v = ::getenv(source.variable.c_str());
      if (!v) {
        return Error::Msg("secret " + name + ": the server's environment has no " +
                          source.variable);
      }
      value = std::string(v);
      break;
    }
    case SecretSource::Kind::kCommand:
      value = RunCommandSource(name, source, options);
      break;
  }
  if (!value) return value;
  TrimNewline(*value);
  if (value->empty()) return Error::Msg("secret " + name + ": the source gave an empty value");
  return value;
}

void WipeSecret(std::string& value) {
  if (!value.empty()) explicit_bzero(value.data(), value.size());
  value.clear();
}

}  // namespace mcpcell::policies
