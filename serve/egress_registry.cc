#include "serve/egress_registry.h"

#include <unistd.h>

namespace mcpcell::serve {

Result<egress::EgressProxyOptions> ServeEgressOptions(egress::AuditSink audit,
                                                      const std::string& hosts_file) {
  egress::EgressProxyOptions options;
  options.audit = std::move(audit);
  if (!hosts_file.empty()) {
    auto hosts = egress::LoadHostsFile(hosts_file);
    if (!hosts) return hosts.error().Wrap("--egress-hosts");
    options.hosts = std::move(*hosts);
  }
  return options;
}

EgressRegistry::EgressRegistry(egress::EgressProxyOptions options) {
  options.on_refusal = [this](const std::string& session, const std::string& line) {
    OnRefusal(session, line);
  };
  proxy_ = std::make_unique<egress::EgressProxy>(std::move(options));
}

EgressRegistry::~EgressRegistry() { proxy_.reset(); }

void EgressRegistry::SetProfile(const std::string& profile, egress::CellEgress config) {
  std::lock_guard lock(mu_);
  profiles_[profile] = std::move(config);
}

Status EgressRegistry::Bind(sandbox::CellInstance& cell, const std::string& session_key,
                            const std::string& profile) {
  egress::CellEgress config;
  {
    std::lock_guard lock(mu_);
    if (cells_.count(cell.id())) return Ok();  // already bound (idempotent)
    auto it = profiles_.find(profile);
    if (it == profiles_.end()) {
      return Error::Msg("egress: no proxy settings for cell profile \"" + profile + "\"");
    }
    config = it->second;
  }
  config.session_id = session_key;
  config.tenant = profile;
  SessionSecrets* secrets = nullptr;
  {
    std::lock_guard lock(mu_);
    secrets = secrets_;
  }
  if (secrets) {
    auto grants = secrets->Grant(cell, session_key, profile);
    if (!grants) return grants.error().Wrap("secrets for cell " + cell.id());
    config.secrets = std::move(*grants);
  }
  std::vector<std::string> allowlist;
  for (const egress::AllowEntry& e : config.allowlist.entries()) allowlist.push_back(e.text);
  const int listener = cell.TakeEgressListener();
  if (listener < 0) {
    return Error::Msg("egress: cell " + cell.id() +
                      " has no proxy listener (its spec must set egress_proxy_port)");
  }
  auto id = proxy_->AddCell(listener, std::move(config));  // owns listener from here on
  if (!id) return id.error().Wrap("egress: cell " + cell.id());
  std::lock_guard lock(mu_);
  cells_[cell.id()] = Bound{*id, session_key, std::move(allowlist)};
  return Ok();
}

void EgressRegistry::Unbind(sandbox::CellInstance& cell) {
  Bound bound;
  {
    std::lock_guard lock(mu_);
    auto it = cells_.find(cell.id());
    if (it == cells_.end()) return;
    bound = std::move(it->second);
    cells_.erase(it);
  }
  // Outside the lock: the proxy reports the cell's last connections while removing it.
  proxy_->RemoveCell(bound.id);
  SessionSecrets* secrets = nullptr;
  {
    std::lock_guard lock(mu_);
    for (const auto& [id, other] : cells_) {
      if (other.session_key == bound.session_key) return;
    }
    refusals_.erase(bound.session_key);
    secrets = secrets_;
  }
  if (secrets) secrets->Release(bound.session_key);
}

void EgressRegistry::SetSecrets(SessionSecrets* secrets) {
  std::lock_guard lock(mu_);
  secrets_ = secrets;
}

void EgressRegistry::SetPaused(const sandbox::CellInstance& cell, bool paused) {
  egress::EgressCellId id;
  {
    std::lock_guard lock(mu_);
    auto it = cells_.find(cell.id());
    if (it == cells_.end()) return;
    id = it->second.id;
  }
  proxy_->SetCellPaused(id, paused);
}

std::optional<tools::CellEgressReport> EgressRegistry::Report(const std::string& cell_id) const {
  egress::EgressCellId id;
  tools::CellEgressReport report;
  {
    std::lock_guard lock(mu_);
    auto it = cells_.find(cell_id);
    if (it == cells_.end()) return std::nullopt;
    id = it->second.id;
    report.allowlist = it->second.allowlist;
  }
  auto stats = proxy_->Stats(id);
  if (!stats) return std::nullopt;
  report.bytes_up = stats->bytes_up;
  report.bytes_down = stats->bytes_down;
  report.connections_total = stats->connections_total;
  report.connections_active = stats->connections_active;
  report.connections_refused = stats->connections_refused;
  return report;
}

void EgressRegistry::SetRefusalListener(RefusalListener listener) {
  std::lock_guard lock(mu_);
  listener_ = std::move(listener);
}

void EgressRegistry::OnRefusal(const std::string& session_key, const std::string& line) {
  // Outside the lock: the listener writes to a client, which may be slow.
  if (RefusalListener tell = Record(session_key, line))
    tell(session_key, line, RefusalSource::kEgressProxy);
}

RefusalListener EgressRegistry::Record(const std::string& session_key, const std::string& line) {
  std::lock_guard lock(mu_);
  bool bound = false;
  for (const auto& [id, cell] : cells_) bound = bound || cell.session_key == session_key;
  if (!bound) return nullptr;  // the cell is going away; nobody will ask
  Refusals& r = refusals_[session_key];
  r.emplace_back(next_refusal_++, line);
  while (r.size() > kKeptRefusals) r.pop_front();
  return listener_;
}

uint64_t EgressRegistry::RefusalCursor(const std::string&) const {
  std::lock_guard lock(mu_);
  return next_refusal_;
}

std::vector<std::string> EgressRegistry::RefusalsSince(const std::string& cell_id,
                                                       uint64_t cursor) const {
  std::vector<std::string> out;
  std::lock_guard lock(mu_);
  auto cell = cells_.find(cell_id);
  if (cell == cells_.end()) return out;
  auto it = refusals_.find(cell->second.session_key);
  if (it == refusals_.end()) return out;
  for (const auto& [seq, line] : it->second) {
    if (seq >= cursor) out.push_back(line);
  }
  return out;
}

}  // namespace mcpcell::serve
