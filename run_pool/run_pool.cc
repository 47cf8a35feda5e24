#include "run_pool/run_pool.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "base/units.h"
#include "sandbox/cell_channel.h"
#include "sandbox/control/protocol.h"

namespace mcpcell::run_pool {
using json = nlohmann::json;

namespace {

constexpr size_t kMaxStdioFds = 3;
constexpr size_t kMaxConnections = 64;
constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxEnv = 1024;
constexpr size_t kMaxStringBytes = 64 * 1024;
constexpr int64_t kMaxTimeoutMs = 7LL * 24 * 3600 * 1000;

// One JSON object per datagram, `fds` attached. MSG_NOSIGNAL: a peer gone is EPIPE.
Status SendFrame(int fd, const json& body, std::span<const int> fds = {}) {
  std::string text;
  try {
    text = body.dump();
  } catch (const json::exception& e) {
    return Error{std::string("not UTF-8 text (the pool protocol is JSON): ") + e.what(), EILSEQ};
  }
  if (text.size() > kMaxPoolFrameBytes)
    return Error{"a frame of " + std::to_string(text.size()) + " bytes is above the limit of " +
                     std::to_string(kMaxPoolFrameBytes),
                 EMSGSIZE};
  return sandbox::control::SendDatagram(
      fd, std::span(reinterpret_cast<const uint8_t*>(text.data()), text.size()), fds,
      "to the pool socket");
}

struct Frame {
  json body;
  std::vector<UniqueFd> fds;
};

// Receives one frame with at most `max_fds` fds. End of stream: an error with err 0.
// `flags`: MSG_DONTWAIT for a poll-driven caller.
Result<Frame> ReceiveFrame(int fd, size_t max_fds, int flags = 0) {
  // The datagram's size first (MSG_PEEK | MSG_TRUNC returns it whole), so the buffer is
  // what the frame needs, not the cap: the frames of a run are a few hundred bytes.
  char probe;
  ssize_t size;
  do {
    size = ::recv(fd, &probe, 1, MSG_PEEK | MSG_TRUNC | flags);
  } while (size < 0 && errno == EINTR);
  if (size < 0) return Error::Sys("recv from the pool socket");
  std::string buf(std::min<size_t>(static_cast<size_t>(size), kMaxPoolFrameBytes) + 1, '\0');
  iovec iov{buf.data(), buf.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxStdioFds) + 64];
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC | flags);
  } while (n < 0 && errno == EINTR);
  if (n < 0) return Error::Sys("recvmsg from the pool socket");
  Frame frame;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (size_t i = 0; i < count; ++i) {
      int received;
      std::memcpy(&received, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      frame.fds.emplace_back(received);  // closed with the frame unless moved out
    }
  }
  if (n == 0 && frame.fds.empty()) return Error{"the connection was closed", 0};
  if (msg.msg_flags & MSG_CTRUNC) return Error{"a frame carried more fds than allowed", EBADMSG};
  if (msg.msg_flags & MSG_TRUNC || static_cast<size_t>(n) > kMaxPoolFrameBytes)
    return Error{"a frame above " + std::to_string(kMaxPoolFrameBytes) + " bytes", EMSGSIZE};
  if (frame.fds.size() > max_fds)
    return Error{"a frame carried " + std::to_string(frame.fds.size()) + " fds, at most " +
                     std::to_string(max_fds) + " allowed here",
                 EBADMSG};
  buf.resize(static_cast<size_t>(n));
  frame.body = json::parse(buf, nullptr, /*allow_exceptions=*/false);
  if (frame.body.is_discarded()) return Error{"a frame that is not valid JSON", EBADMSG};
  if (!frame.body.is_object()) return Error{"a frame that is not a JSON object", EBADMSG};
  return frame;
}

// Field readers that name what is wrong.
Result<std::string> StringField(const json& obj, const char* name, bool required) {
  auto it = obj.find(name);
  if (it == obj.end()) {
    if (required) return Error{std::string("\"") + name + "\" is missing", EINVAL};
    return std::string();
  }
  if (!it->is_string()) return Error{std::string("\"") + name + "\" must be a string", EINVAL};
  const std::string& s = it->get_ref<const std::string&>();
  if (s.size() > kMaxStringBytes)
    return Error{std::string("\"") + name + "\" is longer than 64 KiB", EINVAL};
  if (s.find('\0') != std::string::npos)
    return Error{std::string("\"") + name + "\" contains a NUL byte", EINVAL};
  return s;
}

Result<std::vector<std::string>> StringList(const json& obj, const char* name, size_t max) {
  auto it = obj.find(name);
  if (it == obj.end()) return std::vector<std::string>();
  if (!it->is_array()) return Error{std::string("\"") + name + "\" must be an array", EINVAL};
  if (it->size() > max)
    return Error{std::string("\"") + name + "\" has more than " + std::to_string(max) + " entries",
                 EINVAL};
  std::vector<std::string> out;
  for (const json& item : *it) {
    if (!item.is_string())
      return Error{std::string("\"") + name + "\" must hold strings only", EINVAL};
    const std::string& s = item.get_ref<const std::string&>();
    if (s.size() > kMaxStringBytes || s.find('\0') != std::string::npos)
      return Error{std::string("an entry of \"") + name + "\" is longer than 64 KiB or has a NUL",
                   EINVAL};
    out.push_back(s);
  }
  return out;
}

Result<int64_t> IntField(const json& obj, const char* name, int64_t min, int64_t max) {
  auto it = obj.find(name);
  if (it == obj.end()) return min;
  if (!it->is_number_integer())
    return Error{std::string("\"") + name + "\" must be an integer", EINVAL};
  const int64_t v = it->get<int64_t>();
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(max))
    return Error{std::string("\"") + name + "\" is out of range", EINVAL};
  if (v < min || v > max)
    return Error{std::string("\"") + name + "\" must be in " + std::to_string(min) + ".." +
                     std::to_string(max),
                 EINVAL};
  return v;
}

bool BoolOr(const json& obj, const char* name, bool fallback) {
  auto it = obj.find(name);
  return it != obj.end() && it->is_boolean() ? it->get<bool>() : fallback;
}

json ErrorEvent(const std::string& message, int err, bool fallback) {
  return json{{"event", "error"}, {"message", message}, {"errno", err}, {"fallback", fallback}};
}

// An exec request, checked: every field known, typed and within its cap; the stdio flags
// match the fds that came with it.
struct ParsedExec {
  std::string key;
  sandbox::ExecOptions exec;
};

Result<ParsedExec> ParseExec(const json& req, std::vector<UniqueFd>& fds) {
  static const char* const kKnown[] = {"op", "cell", "argv", "env", "cwd", "timeout_ms", "stdio"};
  for (auto it = req.begin(); it != req.end(); ++it) {
    bool known = false;
    for (const char* k : kKnown) known = known || it.key() == k;
    if (!known) return Error{"unknown field \"" + it.key() + "\"", EINVAL};
  }
  ParsedExec p;
  auto key = StringField(req, "cell", true);
  if (!key) return key.error();
  p.key = *key;
  auto argv = StringList(req, "argv", kMaxArgs);
  if (!argv) return argv.error();
  if (argv->empty() || (*argv)[0].empty()) return Error{"\"argv\" must name a command", EINVAL};
  p.exec.argv = std::move(*argv);
  auto env = StringList(req, "env", kMaxEnv);
  if (!env) return env.error();
  for (const std::string& e : *env) {
    if (e.find('=') == std::string::npos || e[0] == '=')
      return Error{"an \"env\" entry is not KEY=VALUE: \"" + e.substr(0, 64) + "\"", EINVAL};
  }
  p.exec.env = std::move(*env);
  auto cwd = StringField(req, "cwd", false);
  if (!cwd) return cwd.error();
  p.exec.cwd = *cwd;
  auto timeout = IntField(req, "timeout_ms", 0, kMaxTimeoutMs);
  if (!timeout) return timeout.error();
  p.exec.timeout = std::chrono::milliseconds(*timeout);
  auto stdio = req.find("stdio");
  if (stdio == req.end() || !stdio->is_array() || stdio->size() != 3)
    return Error{"\"stdio\" must be an array of three booleans (stdin, stdout, stderr)", EINVAL};
  size_t next = 0;
  int* targets[3] = {&p.exec.stdin_fd, &p.exec.stdout_fd, &p.exec.stderr_fd};
  for (size_t i = 0; i < 3; ++i) {
    if (!(*stdio)[i].is_boolean())
      return Error{"\"stdio\" must be an array of three booleans (stdin, stdout, stderr)", EINVAL};
    if (!(*stdio)[i].get<bool>()) continue;
    if (next >= fds.size()) break;
    *targets[i] = fds[next++].get();
  }
  size_t flagged = 0;
  for (size_t i = 0; i < 3; ++i) flagged += (*stdio)[i].get<bool>() ? 1 : 0;
  if (flagged != fds.size())
    return Error{"\"stdio\" flags " + std::to_string(flagged) + " fds but " +
                     std::to_string(fds.size()) + " came with the request",
                 EINVAL};
  p.exec.keep_bytes = 0;
  return p;
}

void Log(const std::string& line) { std::fprintf(stderr, "mcpcell pool: %s\n", line.c_str()); }

}  // namespace

// ---- options and spec ----

void AddCellOptions(CLI::App& command, CellOptions& o) {
  command.add_option("--state-dir", o.state_dir, "State dir for cells and the template")
      ->capture_default_str();
  command
      .add_option("--disk", o.disk,
                  "Size of the fresh /workspace, a tmpfs that counts against --memory")
      ->capture_default_str();
  command.add_option("--memory", o.memory, "Memory limit, e.g. 512M (swap off)");
  command.add_option("--pids", o.pids, "Maximum number of processes");
  command.add_option("--cpu", o.cpu_millicores, "CPU limit in millicores (1000 = one CPU)");
  command.add_flag("--no-seccomp", o.no_seccomp, "Disable the seccomp filter (debugging only)");
}

std::string CellShape::Key() const {
  return "disk=" + std::to_string(disk_bytes) + " memory=" + std::to_string(memory_bytes) +
         " pids=" + std::to_string(pids) + " cpu=" + std::to_string(cpu_millicores) +
         " seccomp=" + (seccomp ? "on" : "off");
}

Result<CellShape> ParseCellOptions(const CellOptions& o) {
  CellShape shape;
  shape.disk_bytes = ParseSize(o.disk).value_or(0);
  if (shape.disk_bytes == 0) return Error::Msg("--disk: \"" + o.disk + "\" is not a size like 1G");
  if (!o.memory.empty()) {
    shape.memory_bytes = ParseSize(o.memory).value_or(0);
    if (shape.memory_bytes == 0)
      return Error::Msg("--memory: \"" + o.memory + "\" is not a size like 512M");
  }
  shape.pids = o.pids;
  shape.cpu_millicores = o.cpu_millicores;
  shape.seccomp = !o.no_seccomp;
  return shape;
}

Result<sandbox::CellSpec> BuildCellSpec(const CellShape& shape, std::string cell_id,
                                        const std::string& state_dir,
                                        const std::string& skeleton_dir,
                                        const std::string& workspace) {
  sandbox::CellSpec spec = sandbox::DefaultCellSpec(std::move(cell_id), state_dir);
  spec.rootfs.skeleton_dir = skeleton_dir;
  spec.workspace_host_dir = workspace;
  // A fresh workspace is a tmpfs of the cell's own, as under serve's default policy: it
  // vanishes with the cell and has a real size limit, and the host keeps no directory to
  // make and remove.
  if (workspace.empty()) spec.tmpfs.workspace_bytes = shape.disk_bytes;
  if (shape.memory_bytes != 0) spec.limits.memory_max_bytes = shape.memory_bytes;
  spec.limits.pids_max = shape.pids;
  spec.limits.cpu_millicores = shape.cpu_millicores;
  spec.seccomp = shape.seccomp;
  if (Status s = sandbox::ValidateCellSpec(spec); !s.ok()) return s.error();
  return spec;
}

std::string DefaultPoolSocket(const std::string& state_dir) { return state_dir + "/pool.sock"; }

namespace {

Result<sockaddr_un> SocketAddress(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof addr.sun_path)
    return Error{"the pool socket path \"" + path + "\" is empty or longer than " +
                     std::to_string(sizeof addr.sun_path - 1) + " bytes",
                 ENAMETOOLONG};
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  return addr;
}

}  // namespace

// ---- client ----

Result<std::unique_ptr<PoolClient>> PoolClient::Connect(const std::string& socket_path) {
  auto addr = SocketAddress(socket_path);
  if (!addr) return addr.error();
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return Error::Sys("socket(AF_UNIX, SOCK_SEQPACKET)");
  if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0)
    return Error::Sys("connect(\"" + socket_path + "\")");
  return std::unique_ptr<PoolClient>(new PoolClient(std::move(fd)));
}

PoolOutcome PoolClient::Run(const PoolExec& exec) {
  PoolOutcome out;
  json req{{"op", "exec"},    {"cell", exec.key}, {"argv", exec.argv},
           {"env", exec.env}, {"cwd", exec.cwd},  {"timeout_ms", exec.timeout_ms}};
  std::vector<int> fds;
  json stdio = json::array();
  for (int fd : exec.stdio) {
    stdio.push_back(fd >= 0);
    if (fd >= 0) fds.push_back(fd);
  }
  req["stdio"] = std::move(stdio);
  if (Status s = SendFrame(fd_.get(), req, fds); !s.ok()) {
    // Too large or not UTF-8 for JSON: the run makes its own cell. A pool gone: the same.
    out.kind = PoolOutcome::kNotStarted;
    out.message = s.error().message;
    out.err = s.error().err;
    return out;
  }
  bool started = false;
  int pending_signal = 0;  // came before the command ran: sent once it does
  for (;;) {
    if (exec.signal_fd >= 0) {
      pollfd p[2] = {{fd_.get(), POLLIN, 0}, {exec.signal_fd, POLLIN, 0}};
      if (::poll(p, 2, -1) < 0 && errno != EINTR) {
        out.kind = started ? PoolOutcome::kFailed : PoolOutcome::kNotStarted;
        out.message = Error::Sys("poll").message;
        return out;
      }
      signalfd_siginfo info;
      while (::read(exec.signal_fd, &info, sizeof info) == sizeof info) {
        pending_signal = static_cast<int>(info.ssi_signo);
      }
      if (started && pending_signal != 0) (void)Signal(std::exchange(pending_signal, 0));
      if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    }
    out.unsent_signal = started ? 0 : pending_signal;
    auto frame = ReceiveFrame(fd_.get(), 0);
    if (!frame) {
      out.kind = started ? PoolOutcome::kFailed : PoolOutcome::kNotStarted;
      out.message = frame.error().err == 0
                        ? std::string("the pool closed the connection before the command ") +
                              (started ? "ended (the pool stopped or crashed)" : "started")
                        : "reading from the pool: " + frame.error().message;
      out.err = frame.error().err;
      return out;
    }
    const json& body = frame->body;
    auto event = StringField(body, "event", true);
    if (!event) {
      out.kind = PoolOutcome::kFailed;
      out.message = "the pool sent a bad frame: " + event.error().message;
      return out;
    }
    if (*event == "started") {
      started = true;
      auto cell = StringField(body, "cell", false);
      out.cell_id = cell ? *cell : "";
      if (exec.on_started) exec.on_started();
      if (pending_signal != 0) (void)Signal(std::exchange(pending_signal, 0));
    } else if (*event == "exited") {
      auto code = IntField(body, "exit_code", 0, 255);
      auto signo = IntField(body, "signo", 0, 64);
      if (!code || !signo) {
        out.kind = PoolOutcome::kFailed;
        out.message = "the pool sent a bad exit: " + (!code ? code : signo).error().message;
        return out;
      }
      out.kind = PoolOutcome::kRan;
      out.exit_code = static_cast<int>(*code);
      out.signo = static_cast<int>(*signo);
      out.signaled = BoolOr(body, "signaled", false);
      out.timed_out = BoolOr(body, "timed_out", false);
      out.oom_killed = BoolOr(body, "oom_killed", false);
      return out;
    } else if (*event == "error") {
      auto message = StringField(body, "message", false);
      auto err = IntField(body, "errno", 0, 4095);
      out.kind = BoolOr(body, "fallback", false) && !started ? PoolOutcome::kNotStarted
                                                             : PoolOutcome::kFailed;
      out.message = message ? *message : "the pool sent an error without a message";
      out.err = err ? static_cast<int>(*err) : 0;
      return out;
    }
    // Other events are for later versions: ignored.
  }
}

Status PoolClient::Signal(int signo) {
  return SendFrame(fd_.get(), json{{"op", "signal"}, {"signo", signo}});
}

// ---- server ----

// What the watcher needs of one running command.
struct PoolServer::RunWatch {
  std::mutex mu;
  int fd = -1;                            // the run's connection
  sandbox::CellInstance* cell = nullptr;  // under mu, with exec_id, once started
  uint64_t exec_id = 0;                   // under mu
  bool done = false;                      // under mu: the handler is finishing; fd is off limits
  std::stop_source kill;                  // requested: kills the command's process group
};

// One thread for every running command's connection (epoll): a `signal` frame goes to the
// command's process group, the connection closing (the run was killed) or a broken frame
// kills the group. Adding and removing a connection wakes nobody.
class PoolServer::ConnectionWatcher {
 public:
  ConnectionWatcher() : epoll_(::epoll_create1(EPOLL_CLOEXEC)), wake_(::eventfd(0, EFD_CLOEXEC)) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev);
    thread_ = std::thread([this] { Loop(); });
  }
  ~ConnectionWatcher() {
    stop_.store(true);
    const uint64_t one = 1;
    ssize_t ignored = ::write(wake_.get(), &one, sizeof one);
    (void)ignored;
    thread_.join();
  }
  void Add(const std::shared_ptr<RunWatch>& watch) {
    {
      std::lock_guard lock(mu_);
      watches_[watch.get()] = watch;
    }
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.ptr = watch.get();
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, watch->fd, &ev) != 0)
      Log(Error::Sys("epoll_ctl(ADD)").message + ": signals of this run are not forwarded");
  }
  // After it returns the watcher no longer touches the watch's fd.
  void Remove(RunWatch& watch) {
    {
      std::lock_guard lock(watch.mu);
      watch.done = true;
    }
    (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, watch.fd, nullptr);  // ENOENT: already out
    std::lock_guard lock(mu_);
    watches_.erase(&watch);
  }

 private:
  void Loop() {
    epoll_event events[16];
    while (!stop_.load()) {
      const int n = ::epoll_wait(epoll_.get(), events, 16, -1);
      if (n < 0 && errno != EINTR) {
        Log(Error::Sys("epoll_wait").message);
        return;
      }
      for (int i = 0; i < n; ++i) {
        if (events[i].data.ptr == nullptr) {
          uint64_t v;
          ssize_t ignored = ::read(wake_.get(), &v, sizeof v);
          (void)ignored;
          continue;
        }
        std::shared_ptr<RunWatch> watch;
        {
          std::lock_guard lock(mu_);
          auto it = watches_.find(static_cast<RunWatch*>(events[i].data.ptr));
          if (it == watches_.end()) continue;
          watch = it->second;
        }
        Serve(*watch);
      }
    }
  }
  void Serve(RunWatch& watch) {
    std::lock_guard lock(watch.mu);
    if (watch.done) return;
    auto next = ReceiveFrame(watch.fd, 0, MSG_DONTWAIT);
    if (!next && next.error().err == EAGAIN) return;
    if (!next) {
      // The run went away (or broke the protocol): its command must not outlive it.
      watch.kill.request_stop();
      (void)::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, watch.fd, nullptr);
      return;
    }
    auto op = StringField(next->body, "op", true);
    auto signo = IntField(next->body, "signo", 1, 64);
    if (op && *op == "signal" && signo) {
      (void)watch.cell->SignalExec(watch.exec_id, static_cast<int>(*signo));
    } else {
      Log("ignored a frame during a run: " +
          (op ? std::string("op \"") + op->substr(0, 64) + "\"" : op.error().message));
    }
  }

  UniqueFd epoll_, wake_;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::map<RunWatch*, std::shared_ptr<RunWatch>> watches_;  // under mu_
  std::thread thread_;
};

struct PoolServer::Connection {
  UniqueFd fd;
  std::stop_source stop;  // the server is stopping
  std::atomic<bool> done{false};
  std::thread thread;
};

Result<std::unique_ptr<PoolServer>> PoolServer::Listen(Options options) {
  auto addr = SocketAddress(options.socket_path);
  if (!addr) return addr.error();
  // A live pool answers a connect; a stale file (a pool that was killed) does not.
  if (auto live = PoolClient::Connect(options.socket_path); live.ok())
    return Error{"a pool already listens on " + options.socket_path, EADDRINUSE};
  UniqueFd fd(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
  if (!fd) return Error::Sys("socket(AF_UNIX, SOCK_SEQPACKET)");
  struct stat st;
  if (::lstat(options.socket_path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return Error{options.socket_path + " exists and is not a socket; not replacing it", EEXIST};
    if (::unlink(options.socket_path.c_str()) != 0)
      return Error::Sys("unlink(\"" + options.socket_path + "\") (a stale pool socket)");
  }
  if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&*addr), sizeof *addr) != 0)
    return Error::Sys("bind(\"" + options.socket_path + "\")");
  // Before listen, so that no connection is ever accepted through a wider mode.
  if (::chmod(options.socket_path.c_str(), 0600) != 0) {
    Error e = Error::Sys("chmod(\"" + options.socket_path + "\", 0600)");
    ::unlink(options.socket_path.c_str());
    return e;
  }
  if (::listen(fd.get(), 64) != 0) {
    Error e = Error::Sys("listen(\"" + options.socket_path + "\")");
    ::unlink(options.socket_path.c_str());
    return e;
  }
  return std::unique_ptr<PoolServer>(new PoolServer(std::move(options), std::move(fd)));
}

PoolServer::PoolServer(Options options, UniqueFd listener)
    : options_(std::move(options)),
      listener_(std::move(listener)),
      warm_failure_logged_(options_.warm.size(), false),
      warm_pool_(
          [this](const std::string& id) {
            return BuildCellSpec(options_.shape, id, options_.state_dir, options_.skeleton_dir);
          },
          std::make_shared<sandbox::NamespaceBackend>(options_.create), options_.size,
          options_.warm.empty()
              ? sandbox::WarmPool::Prepare{}
              : [this](sandbox::CellInstance& cell,
                       std::stop_token stop) { return Warm(cell, std::move(stop)); }),
      watcher_(std::make_unique<ConnectionWatcher>()) {}

Status PoolServer::Warm(sandbox::CellInstance& cell, std::stop_token stop) {
  for (size_t i = 0; i < options_.warm.size(); ++i) {
    sandbox::ExecOptions exec;
    exec.argv = {"/bin/sh", "-c", options_.warm[i]};
    exec.timeout = std::chrono::seconds(10);
    exec.keep_bytes = 512;
    exec.stop = stop;
    Result<sandbox::ExecResult> result = cell.Exec(exec);
    if (!result) return result.error().Wrap("warm-up \"" + options_.warm[i] + "\"");
    if (stop.stop_requested()) return Error{"the pool is stopping", ECANCELED};
    if (result->exit_code == 0 && !result->signaled) continue;
    if (warm_failure_logged_[i]) continue;
    warm_failure_logged_[i] = true;
    std::string how = result->timed_out  ? "timed out (10 s)"
                      : result->signaled ? "was killed by signal " + std::to_string(result->signo)
                                         : "exited " + std::to_string(result->exit_code);
    std::string said = result->err.data.empty() ? "" : ": " + result->err.data;
    while (!said.empty() && said.back() == '\n') said.pop_back();
    Log("warm-up \"" + options_.warm[i] + "\" " + how + said +
        "; cells are still handed out (said once)");
  }
  return Ok();
}

PoolServer::~PoolServer() {
  warm_pool_.Stop();
  listener_.Reset();
  ::unlink(options_.socket_path.c_str());
}

void PoolServer::Serve(std::stop_token stop) {
  // kIdleAcceptors threads wait in accept() (idle accept threads): a run's connection
  // wakes the thread that serves it, and no thread is made on its path. This thread tops
  // the idle accept threads up when a run ended, or at once when the last one was taken
  // (runs at the same time).
  constexpr int kIdleAcceptors = 2;
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC));
  auto poke = [&wake] {
    const uint64_t one = 1;
    ssize_t ignored = ::write(wake.get(), &one, sizeof one);
    (void)ignored;
  };
  std::stop_callback on_stop(stop, poke);
  std::atomic<bool> stopping{false};
  std::atomic<int> idle_acceptors{0};
  std::list<std::unique_ptr<Connection>> connections;
  // An idle accept thread serves one connection after another while no other one waits, so a run
  // mostly meets a thread that has served before (stack and thread-local state warm).
  auto start_idle_acceptor = [&] {
    auto connection = std::make_unique<Connection>();
    Connection* raw = connection.get();
    idle_acceptors.fetch_add(1);
    raw->thread = std::thread([this, raw, &stopping, &idle_acceptors, poke] {
      for (;;) {
        int fd;
        do {
          fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        } while (fd < 0 && errno == EINTR);
        if (idle_acceptors.fetch_sub(1) == 1) poke();  // the last idle one: more now
        if (fd < 0) {
          Log(Error::Sys("accept4").message);
          // Out of fds: the connection stays queued for another idle accept thread, a moment later.
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        } else if (!stopping.load()) {
          raw->fd.Reset(fd);
          Handle(*raw);
          raw->fd.Reset();
        } else {
          ::close(fd);
        }
        // Back to accept() unless enough others wait there already, or the server stops.
        if (stopping.load() || raw->stop.stop_requested() ||
            idle_acceptors.load() >= kIdleAcceptors)
          break;
        idle_acceptors.fetch_add(1);
      }
      raw->done.store(true);
      poke();  // to be joined, and replaced
    });
    connections.push_back(std::move(connection));
  };
  while (!stop.stop_requested()) {
    for (auto it = connections.begin(); it != connections.end();) {
      if ((*it)->done.load()) {
        (*it)->thread.join();
        it = connections.erase(it);
      } else {
        ++it;
      }
    }
    // At the limit, further runs wait in the listen backlog until one ends.
    while (idle_acceptors.load() < kIdleAcceptors && connections.size() < kMaxConnections)
      start_idle_acceptor();
    uint64_t v;
    pollfd p = {wake.get(), POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) {
      ssize_t ignored = ::read(wake.get(), &v, sizeof v);
      (void)ignored;
    }
  }
  // Stopping: every running command is killed (its handler sees the stop); each idle accept
  // thread is woken by a connection of our own and serves nothing; then the ready cells go.
  stopping.store(true);
  for (auto& c : connections) c->stop.request_stop();
  while (idle_acceptors.load() > 0) {
    if (!PoolClient::Connect(options_.socket_path)) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  for (auto& c : connections) c->thread.join();
  warm_pool_.Stop();
}

namespace {

// Reads a run's request, then checks who sent it. The request is read before anything is
// answered, even to a peer that is refused: a reply followed by a close with the request
// still unread would reset the connection, and the peer could lose the reply. A peer that
// connects and says nothing is dropped after 10 s. nullopt when answered or dropped.
std::optional<Frame> ReadRunRequest(int fd) {
  const timeval first_frame{10, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &first_frame, sizeof first_frame);
  auto frame = ReceiveFrame(fd, kMaxStdioFds);
  ucred peer{};
  socklen_t len = sizeof peer;
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &len) != 0) {
    (void)SendFrame(fd, ErrorEvent(Error::Sys("getsockopt(SO_PEERCRED)").message, errno, true));
    return std::nullopt;
  }
  if (peer.uid != ::geteuid()) {
    (void)SendFrame(fd, ErrorEvent("refused: this pool serves uid " + std::to_string(::geteuid()) +
                                       " only, and the run is uid " + std::to_string(peer.uid),
                                   EACCES, true));
    return std::nullopt;
  }
  if (!frame) {
    if (frame.error().err != 0)
      (void)SendFrame(
          fd, ErrorEvent("bad request: " + frame.error().message, frame.error().err, false));
    return std::nullopt;
  }
  const timeval none{0, 0};
  (void)::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none);
  return std::move(*frame);
}

// The command's end (or why it did not run) to the run.
void SendOutcome(int fd, const Result<sandbox::ExecResult>& result, bool started,
                 bool without_cell) {
  if (result) {
    (void)SendFrame(fd, json{{"event", "exited"},
                             {"exit_code", result->exit_code},
                             {"signaled", result->signaled},
                             {"signo", result->signo},
                             {"timed_out", result->timed_out},
                             {"oom_killed", result->oom_killed}});
  } else {
    (void)SendFrame(
        fd, ErrorEvent(result.error().message, result.error().err, !started && without_cell));
  }
}

}  // namespace

void PoolServer::Handle(Connection& connection) {
  const int fd = connection.fd.get();
  auto frame = ReadRunRequest(fd);
  if (!frame) return;
  auto op = StringField(frame->body, "op", true);
  if (!op) {
    (void)SendFrame(fd, ErrorEvent("bad request: " + op.error().message, EINVAL, false));
    return;
  }
  if (*op == "status") {
    SendStatus(fd);
  } else if (*op == "exec") {
    ServeExec(connection, frame->body, frame->fds);
  } else {
    (void)SendFrame(
        fd, ErrorEvent("bad request: unknown op \"" + op->substr(0, 64) + "\" (exec, status)",
                       EINVAL, false));
  }
}

void PoolServer::SendStatus(int fd) {
  (void)SendFrame(fd, json{{"event", "status"},
                           {"ready", warm_pool_.ready()},
                           {"size", options_.size},
                           {"cell", options_.shape.Key()},
                           {"served", served_.load()},
                           {"problem", warm_pool_.status()}});
}

void PoolServer::ServeExec(Connection& connection, const json& request,
                           std::vector<UniqueFd>& fds) {
  const int fd = connection.fd.get();
  // From here to the cell's end, no new cell is started: on a small host it would take
  // the CPUs the command and its round trip want. The refill follows the destroy.
  warm_pool_.PauseRefill();
  struct Resume {
    sandbox::WarmPool& pool;
    ~Resume() { pool.ResumeRefill(); }
  } resume{warm_pool_};
  auto parsed = ParseExec(request, fds);
  if (!parsed) {
    (void)SendFrame(fd, ErrorEvent("bad request: " + parsed.error().message, EINVAL, false));
    return;
  }
  const std::string wanted = options_.shape.Key();
  if (parsed->key != wanted) {
    (void)SendFrame(fd, ErrorEvent("this pool makes cells of \"" + wanted + "\"; the run wants \"" +
                                       parsed->key.substr(0, 256) + "\"",
                                   0, true));
    return;
  }
  // From the start of the command, the watcher thread reads the run's later frames
  // (signals) and sees it go away; the server's stop kills the command too.
  auto watch = std::make_shared<RunWatch>();
  watch->fd = fd;
  std::stop_callback server_stop(connection.stop.get_token(),
                                 [&watch] { watch->kill.request_stop(); });
  std::unique_ptr<sandbox::CellInstance> cell = TakeOrMakeCell();
  bool started = false;
  Result<sandbox::ExecResult> result = RunCommand(cell.get(), parsed->exec, watch, started);
  fds.clear();  // the run's stdio: ours no longer
  // The answer first: nothing else is on the way from the command's exit to the run's.
  SendOutcome(fd, result, started, cell == nullptr);
  if (started) watcher_->Remove(*watch);  // before the connection closes
  if (cell) {
    if (Status s = cell->Destroy(); !s.ok())
      Log("destroying cell " + cell->id() + ": " + s.error().message);
  }
  served_.fetch_add(1);
}

std::unique_ptr<sandbox::CellInstance> PoolServer::TakeOrMakeCell() {
  std::unique_ptr<sandbox::CellInstance> taken = warm_pool_.Take(std::chrono::seconds(10));
  if (taken) return taken;
  // None ready nor being made (the warm pool stopped making them, or many runs at once):
  // one of our own, as the run would have made.
  auto spec = BuildCellSpec(options_.shape, sandbox::GenerateCellId('p'), options_.state_dir,
                            options_.skeleton_dir);
  auto made = spec ? sandbox::Cell::Create(*spec, options_.create)
                   : Result<std::unique_ptr<sandbox::Cell>>(spec.error());
  if (made) return std::move(*made);
  Log("making a cell for a run: " + made.error().message);
  return nullptr;
}

Result<sandbox::ExecResult> PoolServer::RunCommand(sandbox::CellInstance* cell,
                                                   sandbox::ExecOptions& exec,
                                                   const std::shared_ptr<RunWatch>& watch,
                                                   bool& started) {
  if (!cell) return Error{"the pool could not make a cell (see its log)", EAGAIN};
  if (watch->kill.stop_requested()) {
    return Error{"the command was not started: the run went away or the pool is stopping",
                 ECANCELED};
  }
  const int fd = watch->fd;
  exec.stop = watch->kill.get_token();
  exec.on_started = [&, cell, fd](uint64_t id, pid_t) {
    {
      std::lock_guard lock(watch->mu);
      watch->cell = cell;
      watch->exec_id = id;
    }
    started = true;
    (void)SendFrame(fd, json{{"event", "started"}, {"cell", cell->id()}});
    watcher_->Add(watch);
  };
  return cell->Exec(exec);
}

}  // namespace mcpcell::run_pool
