// The server under load: an mcpcell started by the load generator (its own temp state dir,
// its stderr in a log file there, stopped with SIGTERM) or one already running at a URL;
// and what /proc says about its process (CPU, threads, RSS, open fds) and the host's
// available memory. Single-threaded use.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>

namespace http_load {

// A snapshot of the server process and the host, read from /proc.
struct ProcSample {
  double cpu_ms = 0;  // utime + stime of every thread of the process so far
  uint64_t threads = 0;
  uint64_t rss_kib = 0;
  uint64_t fds = 0;
  uint64_t host_available_kib = 0;  // MemAvailable
  uint64_t host_tasks = 0;          // every task (thread) of the host, from /proc/loadavg
  bool ok = false;                  // false: the process was not readable (no pid, gone)
};
ProcSample SampleProcess(pid_t pid);

class ServerUnderTest {
 public:
  // A binary: started as `BIN serve --http 127.0.0.1:0 --state-dir TMP/state EXTRA...` (TMP a
  // new directory in `parent`, EXTRA split at spaces); waits for the URL it prints. A URL
  // (http://...): used as is, with `pid` for /proc (0: no server figures). Throws
  // std::runtime_error naming the failure.
  ServerUnderTest(const std::string& binary_or_url, pid_t pid, const std::string& extra_args,
                  const std::string& parent);
  ~ServerUnderTest();
  ServerUnderTest(const ServerUnderTest&) = delete;
  ServerUnderTest& operator=(const ServerUnderTest&) = delete;

  const std::string& url() const { return url_; }
  pid_t pid() const { return pid_; }

 private:
  // Starts `binary` with its state dir in state_dir_ and waits for the URL it prints.
  void Launch(const std::string& binary, const std::string& extra_args);
  void Stop();
  std::string url_;
  pid_t pid_ = 0;
  bool started_ = false;
  std::string state_dir_;
};

}  // namespace http_load
