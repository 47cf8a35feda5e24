#include "egress/proxy.h"

#include <sys/socket.h>
#include <unistd.h>

#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "egress/connection.h"
#include "egress/intercept.h"

namespace mcpcell::egress {

std::string DenialLine(const std::string& host, uint16_t port, const std::string& reason) {
  return "mcpcell: egress to " + host + ":" + std::to_string(port) + " denied: " + reason;
}

class EgressProxy::Impl {
 public:
  explicit Impl(EgressProxyOptions options) : work_(asio::make_work_guard(io_)) {
    shared_.hosts = std::move(options.hosts);
    shared_.resolver = std::move(options.resolver);
    shared_.audit = std::move(options.audit);
    shared_.on_refusal = std::move(options.on_refusal);
    shared_.host_addresses =
        options.host_addresses ? std::move(*options.host_addresses) : HostAddresses();
    shared_.buffer_size = std::max<size_t>(options.buffer_size, 4096);
    shared_.head_timeout = options.head_timeout;
    shared_.internal_routes = std::move(options.internal_routes);
    shared_.interception = MakeInterceptionShared(
        std::move(options.interception_ca), options.upstream_ca_file, std::move(options.on_secret));
    for (int i = 0; i < std::max(1, options.threads); ++i)
      threads_.emplace_back([this] { io_.run(); });
  }

  ~Impl() {
    std::vector<EgressCellId> ids;
    {
      std::lock_guard lock(mu_);
      for (const auto& [id, cell] : cells_) ids.push_back(id);
    }
    for (EgressCellId id : ids) Remove(id);
    work_.reset();
    io_.stop();
    for (std::thread& t : threads_) t.join();
  }

  Result<EgressCellId> Add(int listen_fd, CellEgress cfg) {
    Result<tcp> protocol = ListeningProtocol(listen_fd);
    if (!protocol) {
      close(listen_fd);
      return protocol.error();
    }
    EgressCellId id;
    {
      std::lock_guard lock(mu_);
      id = next_id_++;
    }
    auto cell = std::make_shared<CellState>(io_, id, std::move(cfg), shared_);
    boost::system::error_code ec;
    cell->acceptor.assign(*protocol, listen_fd, ec);
    if (ec) {
      close(listen_fd);
      return Error::Msg("egress: adopt listening fd " + std::to_string(listen_fd) + ": " +
                        ec.message());
    }
    {
      std::lock_guard lock(mu_);
      cells_[id] = cell;
    }
    asio::post(cell->strand, [cell] { AcceptNext(cell); });
    return id;
  }

  std::optional<EgressStats> Remove(EgressCellId id) {
    std::shared_ptr<CellState> cell;
    {
      std::lock_guard lock(mu_);
      auto it = cells_.find(id);
      if (it == cells_.end()) return std::nullopt;
      cell = it->second;
      cells_.erase(it);
    }
    auto close_all = [cell] {
      cell->closed = true;
      boost::system::error_code ignored;
      cell->acceptor.close(ignored);
      cell->accept_retry.cancel();
      auto connections = cell->connections;  // Abort erases from the set
      for (const auto& c : connections) c->Abort("the cell was removed");
    };
    // Run on the cell's strand and wait, so that when this returns nothing of the cell is
    // in flight: the fd is closed and every audit event has been emitted.
    std::promise<void> done;
    asio::post(cell->strand, [&] {
      close_all();
      done.set_value();
    });
    done.get_future().wait();
    return cell->counters.Snapshot();
  }

  std::optional<EgressStats> Stats(EgressCellId id) const {
    std::lock_guard lock(mu_);
    auto it = cells_.find(id);
    if (it == cells_.end()) return std::nullopt;
    return it->second->counters.Snapshot();
  }

  bool SetPaused(EgressCellId id, bool paused) {
    std::lock_guard lock(mu_);
    auto it = cells_.find(id);
    if (it == cells_.end()) return false;
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    it->second->paused_since.store(paused ? std::max<int64_t>(now, 1) : 0);
    return true;
  }

  const InterceptionShared& interception() const { return *shared_.interception; }

 private:
  static Result<tcp> ListeningProtocol(int fd) {
    int listening = 0, type = 0;
    socklen_t len = sizeof listening;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0)
      return Error::Sys("egress: getsockopt(" + std::to_string(fd) + ", SO_ACCEPTCONN)");
    len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
      return Error::Sys("egress: getsockopt(" + std::to_string(fd) + ", SO_TYPE)");
    sockaddr_storage addr{};
    len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      return Error::Sys("egress: getsockname(" + std::to_string(fd) + ")");
    if (!listening || type != SOCK_STREAM ||
        (addr.ss_family != AF_INET && addr.ss_family != AF_INET6))
      return Error::Msg("egress: fd " + std::to_string(fd) + " is not a listening TCP socket");
    return addr.ss_family == AF_INET ? tcp::v4() : tcp::v6();
  }

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  ProxyShared shared_;
  std::vector<std::thread> threads_;
  mutable std::mutex mu_;
  std::map<EgressCellId, std::shared_ptr<CellState>> cells_;
  EgressCellId next_id_ = 1;
};

EgressProxy::EgressProxy(EgressProxyOptions options)
    : impl_(std::make_unique<Impl>(std::move(options))) {}
EgressProxy::~EgressProxy() = default;

Result<EgressCellId> EgressProxy::AddCell(int listen_fd, CellEgress cell) {
  return impl_->Add(listen_fd, std::move(cell));
}
std::optional<EgressStats> EgressProxy::RemoveCell(EgressCellId id) { return impl_->Remove(id); }
std::optional<EgressStats> EgressProxy::Stats(EgressCellId id) const { return impl_->Stats(id); }
bool EgressProxy::SetCellPaused(EgressCellId id, bool paused) {
  return impl_->SetPaused(id, paused);
}

Status EgressProxy::InterceptionReady() const {
  const std::string& error = impl_->interception().error;
  if (error.empty()) return Ok();
  return Error::Msg("egress: TLS interception for secrets unavailable: " + error);
}

std::string EgressProxy::InterceptionCaPem() const {
  const InterceptionShared& s = impl_->interception();
  return s.error.empty() ? s.ca->certificate_pem() : std::string();
}

}  // namespace mcpcell::egress
