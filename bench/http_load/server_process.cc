// See server_process.h.
#include "bench/http_load/server_process.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <thread>
#include <vector>

extern char** environ;

namespace http_load {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// The number after `key` in a /proc "Key:   value" text; 0 when absent.
uint64_t Field(const std::string& text, const std::string& key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return 0;
  return std::strtoull(text.c_str() + at + key.size(), nullptr, 10);
}

uint64_t CountFds(pid_t pid) {
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return 0;
  uint64_t n = 0;
  while (dirent* e = ::readdir(d)) n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

}  // namespace

ProcSample SampleProcess(pid_t pid) {
  ProcSample s;
  s.host_available_kib = Field(ReadFile("/proc/meminfo"), "MemAvailable:");
  const std::string loadavg = ReadFile("/proc/loadavg");  // "0.1 0.2 0.3 running/all last"
  if (size_t slash = loadavg.find('/'); slash != std::string::npos) {
    s.host_tasks = std::strtoull(loadavg.c_str() + slash + 1, nullptr, 10);
  }
  if (pid <= 0) return s;
  const std::string dir = "/proc/" + std::to_string(pid);
  const std::string stat = ReadFile(dir + "/stat");
  const size_t paren = stat.rfind(')');
  if (paren == std::string::npos) return s;
  // After the command name: state is field 3; utime and stime are fields 14 and 15.
  std::istringstream rest(stat.substr(paren + 2));
  std::string f;
  std::vector<std::string> fields;
  while (rest >> f && fields.size() < 13) fields.push_back(f);
  if (fields.size() < 13) return s;
  const double tick_ms = 1000.0 / static_cast<double>(::sysconf(_SC_CLK_TCK));
  s.cpu_ms = (std::stod(fields[11]) + std::stod(fields[12])) * tick_ms;
  const std::string status = ReadFile(dir + "/status");
  s.threads = Field(status, "Threads:");
  s.rss_kib = Field(status, "VmRSS:");
  s.fds = CountFds(pid);
  s.ok = true;
  return s;
}

ServerUnderTest::ServerUnderTest(const std::string& binary_or_url, pid_t pid,
                                 const std::string& extra_args, const std::string& parent) {
  if (binary_or_url.rfind("http://", 0) == 0) {
    url_ = binary_or_url;
    pid_ = pid;
    return;
  }
  struct stat st;
  if (::stat(binary_or_url.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      ::access(binary_or_url.c_str(), X_OK) != 0) {
    throw std::runtime_error(binary_or_url +
                             ": neither an executable file (mcpcell) nor an "
                             "http:// URL");
  }
  std::string tmpl = parent + "/http-load-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr) {
    throw std::runtime_error("mkdtemp " + tmpl + ": " + std::strerror(errno));
  }
  state_dir_ = tmpl;
  ::chmod(tmpl.c_str(), 0711);  // a root server's cells (uids of their own) search their state dir
  try {
    Launch(binary_or_url, extra_args);
  } catch (...) {
    Stop();  // a constructor that throws gets no destructor: the temp dir goes here
    throw;
  }
}

void ServerUnderTest::Launch(const std::string& binary, const std::string& extra_args) {
  const std::string log = state_dir_ + "/server.log";
  std::vector<std::string> args = {binary,        "serve",       "--http",
                                   "127.0.0.1:0", "--state-dir", state_dir_ + "/state"};
  std::istringstream extra(extra_args);
  for (std::string a; extra >> a;) args.push_back(a);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  const int rc = ::posix_spawn(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + binary + ": " + std::strerror(rc));
  started_ = true;
  const std::regex url_re(R"((http://\S+/mcp))");
  for (int waited_ms = 0; waited_ms < 300000; waited_ms += 50) {
    std::smatch m;
    const std::string text = ReadFile(log);
    if (std::regex_search(text, m, url_re)) {
      url_ = m[1];
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      started_ = false;
      throw std::runtime_error(binary + " exited before serving; its log:\n" + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error(binary + " printed no http://.../mcp URL within 300 s");
}

ServerUnderTest::~ServerUnderTest() { Stop(); }

void ServerUnderTest::Stop() {
  if (started_) {
    started_ = false;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int waited_ms = 0; ::waitpid(pid_, &status, WNOHANG) == 0; waited_ms += 50) {
      if (waited_ms == 120000) ::kill(pid_, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!WIFEXITED(status)) {
      // Killed: its cells may not be gone, so their directories stay for a look.
      std::fprintf(stderr, "http_load: server %d did not exit on SIGTERM; %s kept\n", pid_,
                   state_dir_.c_str());
      state_dir_.clear();
    }
  }
  if (!state_dir_.empty()) {
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);  // the server removed its cells on SIGTERM
    state_dir_.clear();
  }
}

}  // namespace http_load
