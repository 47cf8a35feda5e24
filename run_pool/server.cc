// The run pool's server (see server.h).
#include "run_pool/server.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <list>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>
#include <utility>

#include "run_pool/client.h"
#include "run_pool/protocol.h"

namespace mcpcell::run_pool {
using json = nlohmann::json;

namespace {

constexpr size_t kMaxConnections = 64;

void Log(const std::string& line) { std::fprintf(stderr, "mcpcell pool: %s\n", line.c_str()); }

// Where two keys (DescribeCellSpec texts) first differ, for the run to see why it got no
// cell: `the run wants "LINE", the pool's cells have "LINE"`.
std::string KeyMismatch(const std::string& pool_key, const std::string& run_key) {
  auto line_at = [](const std::string& text, size_t at) {
    const size_t start = text.rfind('\n', at == 0 ? 0 : at - 1);
    const size_t begin = start == std::string::npos || at == 0 ? 0 : start + 1;
    std::string line = text.substr(begin, text.find('\n', begin) - begin);
    while (!line.empty() && line.front() == ' ') line.erase(0, 1);
    return line.substr(0, 256);
  };
  size_t at = 0;
  while (at < pool_key.size() && at < run_key.size() && pool_key[at] == run_key[at]) ++at;
  return "this pool makes cells of another spec: the run wants \"" + line_at(run_key, at) +
         "\", the pool's cells have \"" + line_at(pool_key, at) + "\"";
}

}  // namespace

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
          options_.make_spec, std::make_shared<sandbox::NamespaceBackend>(options_.create),
          options_.size,
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

// The accept side of Serve: kIdleAcceptors threads wait in accept() (idle accept threads),
// so a run's connection wakes the thread that serves it and no thread is made on its path.
struct PoolServer::Acceptors {
  static constexpr int kIdleAcceptors = 2;
  UniqueFd wake{
      ::eventfd(0, EFD_CLOEXEC)};  // Serve's loop: a thread ended or the last idle one was taken
  std::atomic<bool> stopping{false};
  std::atomic<int> idle{0};
  std::list<std::unique_ptr<Connection>> connections;  // Serve's thread only
  void Poke() {
    const uint64_t one = 1;
    ssize_t ignored = ::write(wake.get(), &one, sizeof one);
    (void)ignored;
  }
};

void PoolServer::AcceptLoop(Connection& connection, Acceptors& acceptors) {
  // An idle accept thread serves one connection after another while no other one waits, so
  // a run mostly meets a thread that has served before (stack and thread-local state warm).
  for (;;) {
    int fd;
    do {
      fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    } while (fd < 0 && errno == EINTR);
    if (acceptors.idle.fetch_sub(1) == 1) acceptors.Poke();  // the last idle one: more now
    if (fd < 0) {
      Log(Error::Sys("accept4").message);
      // Out of fds: the connection stays queued for another idle accept thread, a moment later.
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    } else if (!acceptors.stopping.load()) {
      connection.fd.Reset(fd);
      Handle(connection);
      connection.fd.Reset();
    } else {
      ::close(fd);
    }
    // Back to accept() unless enough others wait there already, or the server stops.
    if (acceptors.stopping.load() || connection.stop.stop_requested() ||
        acceptors.idle.load() >= Acceptors::kIdleAcceptors)
      break;
    acceptors.idle.fetch_add(1);
  }
  connection.done.store(true);
  acceptors.Poke();  // to be joined, and replaced
}

void PoolServer::Serve(std::stop_token stop) {
  // This thread tops the idle accept threads up when a run ended, or at once when the last
  // one was taken (runs at the same time).
  Acceptors acceptors;
  std::stop_callback on_stop(stop, [&acceptors] { acceptors.Poke(); });
  auto& connections = acceptors.connections;
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
    while (acceptors.idle.load() < Acceptors::kIdleAcceptors &&
           connections.size() < kMaxConnections) {
      auto connection = std::make_unique<Connection>();
      acceptors.idle.fetch_add(1);
      connection->thread =
          std::thread([this, raw = connection.get(), &acceptors] { AcceptLoop(*raw, acceptors); });
      connections.push_back(std::move(connection));
    }
    uint64_t v;
    pollfd p = {acceptors.wake.get(), POLLIN, 0};
    if (::poll(&p, 1, 1000) > 0) {
      ssize_t ignored = ::read(acceptors.wake.get(), &v, sizeof v);
      (void)ignored;
    }
  }
  // Stopping: every running command is killed (its handler sees the stop); each idle accept
  // thread is woken by a connection of our own and serves nothing; then the ready cells go.
  acceptors.stopping.store(true);
  for (auto& c : connections) c->stop.request_stop();
  while (acceptors.idle.load() > 0) {
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
                           {"cell", options_.key},
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
  if (parsed->key != options_.key) {
    (void)SendFrame(fd, ErrorEvent(KeyMismatch(options_.key, parsed->key), 0, true));
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
  std::unique_ptr<sandbox::CellInstance> cell = warm_pool_.Take(std::chrono::seconds(10));
  if (!cell) {
    // None ready nor being made (the warm pool stopped making them, or many runs at once):
    // one of our own, as the run would have made.
    auto spec = options_.make_spec(sandbox::GenerateCellId('p'));
    auto made = spec ? sandbox::Cell::Create(*spec, options_.create)
                     : Result<std::unique_ptr<sandbox::Cell>>(spec.error());
    if (!made) {
      Log("making a cell for a run: " + made.error().message);
      return nullptr;
    }
    cell = std::move(*made);
  }
  // No egress proxy serves a pooled cell (the policy's egress is "deny"): its listener is
  // closed, so a request to the proxy's port is refused at once instead of waiting.
  UniqueFd(cell->TakeEgressListener()).Reset();
  return cell;
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
