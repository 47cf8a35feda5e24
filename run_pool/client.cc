// The run pool's client (see client.h).
#include "run_pool/client.h"

#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <utility>

#include "run_pool/protocol.h"

namespace mcpcell::run_pool {
using json = nlohmann::json;

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
    if (OnEvent(exec, frame->body, started, pending_signal, out)) return out;
  }
}

bool PoolClient::OnEvent(const PoolExec& exec, const json& body, bool& started, int& pending_signal,
                         PoolOutcome& out) {
  auto event = StringField(body, "event", true);
  if (!event) {
    out.kind = PoolOutcome::kFailed;
    out.message = "the pool sent a bad frame: " + event.error().message;
    return true;
  }
  if (*event == "started") {
    started = true;
    auto cell = StringField(body, "cell", false);
    out.cell_id = cell ? *cell : "";
    if (exec.on_started) exec.on_started();
    if (pending_signal != 0) (void)Signal(std::exchange(pending_signal, 0));
    return false;
  }
  if (*event == "exited") {
    auto code = IntField(body, "exit_code", 0, 255);
    auto signo = IntField(body, "signo", 0, 64);
    if (!code || !signo) {
      out.kind = PoolOutcome::kFailed;
      out.message = "the pool sent a bad exit: " + (!code ? code : signo).error().message;
      return true;
    }
    out.kind = PoolOutcome::kRan;
    out.exit_code = static_cast<int>(*code);
    out.signo = static_cast<int>(*signo);
    out.signaled = BoolOr(body, "signaled", false);
    out.timed_out = BoolOr(body, "timed_out", false);
    out.oom_killed = BoolOr(body, "oom_killed", false);
    return true;
  }
  if (*event == "error") {
    auto message = StringField(body, "message", false);
    auto err = IntField(body, "errno", 0, 4095);
    out.kind = BoolOr(body, "fallback", false) && !started ? PoolOutcome::kNotStarted
                                                           : PoolOutcome::kFailed;
    out.message = message ? *message : "the pool sent an error without a message";
    out.err = err ? static_cast<int>(*err) : 0;
    return true;
  }
  return false;  // other events are for later versions: ignored
}

Status PoolClient::Signal(int signo) {
  return SendFrame(fd_.get(), json{{"op", "signal"}, {"signo", signo}});
}

}  // namespace mcpcell::run_pool
