#include "serve/session_secrets.h"

#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "egress/allowlist.h"
#include "policies/compiler.h"

namespace mcpcell::serve {
namespace {

using Clock = std::chrono::steady_clock;
using policies::SecretMode;

std::string CellPath(const std::string& name) { return std::string(kCellSecretsDir) + "/" + name; }

egress::SecretSurfaces SurfacesOf(const std::vector<std::string>& names) {
  egress::SecretSurfaces s{false, false, false, false};
  for (const std::string& n : names) {
    s.header = s.header || n == "header";
    s.basic_auth = s.basic_auth || n == "basic_auth";
    s.query = s.query || n == "query";
    s.body = s.body || n == "body";
  }
  return s;
}

}  // namespace

Status WriteCaBundle(const std::string& state_dir, const std::string& proxy_ca_pem) {
  if (proxy_ca_pem.empty()) return Error::Msg("the egress proxy has no interception CA");
  std::string bundle;
  if (std::ifstream system("/etc/ssl/certs/ca-certificates.crt"); system) {
    std::ostringstream text;
    text << system.rdbuf();
    bundle = text.str();
    if (!bundle.empty() && bundle.back() != '\n') bundle += '\n';
  }
  bundle += proxy_ca_pem;
  const std::string path = policies::CaBundleHostPath(state_dir);
  const std::string dir = path.substr(0, path.rfind('/'));
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return Error::Sys("mkdir(\"" + dir + "\")");
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return Error::Sys("open(\"" + tmp + "\")");
  const bool wrote =
      ::write(fd, bundle.data(), bundle.size()) == static_cast<ssize_t>(bundle.size());
  const int saved = errno;
  ::fchmod(fd, 0644);  // whatever the umask
  ::close(fd);
  if (!wrote) return Error::Sys("write(\"" + tmp + "\")", saved);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return Error::Sys("rename(\"" + tmp + "\")");
  return Ok();
}

std::string SecretsInstructions(const std::vector<policies::SecretPolicy>& secrets) {
  std::string out;
  for (const policies::SecretPolicy& s : secrets) {
    out += (out.empty() ? " Secrets the operator granted: " : "; ") + std::string("$") + s.name;
    if (s.mode == SecretMode::kPlaceholder) {
      out += " (a placeholder: use the variable in HTTPS requests to";
      for (size_t i = 0; i < s.hosts.size(); ++i) out += (i ? ", " : " ") + s.hosts[i];
      out += " and the proxy sends the real value; it works nowhere else)";
    } else if (s.mode == SecretMode::kFile) {
      out += std::string(" (the file ") + kCellSecretsDir + "/" + s.name + ")";
    }
  }
  return out.empty() ? out : out + ". session_info shows them and their time left.";
}

std::string NewPlaceholder() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) {
    // RAND_bytes fails only without an entropy source; a guessable placeholder would let a
    // cell name another session's secret, so there is no fallback.
    std::abort();
  }
  static const char kHex[] = "0123456789abcdef";
  std::string out = "mcpcell-secret-";
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

SessionSecrets::SessionSecrets(policies::SecretReadOptions read_options)
    : read_options_(read_options), ender_([this] { EndSessions(); }) {}

SessionSecrets::~SessionSecrets() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  ender_.join();
}

void SessionSecrets::SetProfile(const std::string& profile,
                                std::vector<policies::SecretPolicy> secrets) {
  std::lock_guard lock(mu_);
  profiles_[profile] = std::move(secrets);
}

void SessionSecrets::SetEndSession(EndSession end_session) {
  std::lock_guard ending(end_mu_);
  std::lock_guard lock(mu_);
  end_session_ = std::move(end_session);
}

Result<std::string> SessionSecrets::Read(const Held& held) const {
  return policies::ReadSecretSource(held.policy.name, held.source, read_options_);
}

Result<std::vector<egress::SecretGrant>> SessionSecrets::Grant(sandbox::CellInstance& cell,
                                                               const std::string& session_key,
                                                               const std::string& profile) {
  std::vector<Held> held;
  {
    std::lock_guard lock(mu_);
    auto policies = profiles_.find(profile);
    if (policies == profiles_.end() || policies->second.empty())
      return std::vector<egress::SecretGrant>{};
    Session& session = sessions_[session_key];
    if (session.secrets.empty()) {
      const Clock::time_point start = Clock::now();
      for (const policies::SecretPolicy& p : policies->second) {
        auto source = policies::ParseSecretSource(p.source);
        if (!source) return source.error().Wrap("secret " + p.name);
        Held h{p, std::move(*source), NewPlaceholder(),
               p.ttl ? start + *p.ttl : Clock::time_point::max()};
        session.secrets.push_back(std::move(h));
      }
    }
    session.cell = &cell;
    for (Held& h : session.secrets) h.file_written = false;  // a new cell has none yet
    held = session.secrets;
  }
  std::vector<egress::SecretGrant> grants;
  for (const Held& h : held) {
    if (h.policy.mode == SecretMode::kFile && Clock::now() < h.expires) {
      auto value = Read(h);
      if (!value) return value.error();
      Status written = cell.WriteFile(CellPath(h.policy.name), *value, 0400);
      policies::WipeSecret(*value);
      if (!written) return written.error().Wrap("secret " + h.policy.name);
      std::lock_guard lock(mu_);
      for (Held& mine : sessions_[session_key].secrets)
        if (mine.policy.name == h.policy.name) mine.file_written = true;
    }
    if (h.policy.mode != SecretMode::kPlaceholder) continue;
    auto hosts = egress::Allowlist::Parse(h.policy.hosts);
    if (!hosts) return hosts.error().Wrap("secret " + h.policy.name + " hosts");
    egress::SecretGrant g;
    g.name = h.policy.name;
    g.placeholder = h.placeholder;
    g.value = [name = h.policy.name, source = h.source, options = read_options_] {
      return policies::ReadSecretSource(name, source, options);
    };
    g.hosts = std::move(*hosts);
    g.surfaces = SurfacesOf(h.policy.surfaces);
    g.expires = h.expires;
    g.end_session_on_violation = h.policy.end_session_on_violation;
    grants.push_back(std::move(g));
  }
  return grants;
}

void SessionSecrets::Release(const std::string& session_key) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session_key);
  if (it == sessions_.end() || !it->second.cell) return;
  for (Held& h : it->second.secrets) {
    // The cell's /run is a tmpfs that goes with it; removing the file first means nothing
    // depends on that.
    if (h.file_written) (void)it->second.cell->Remove(CellPath(h.policy.name), false);
    h.file_written = false;
  }
  it->second.cell = nullptr;
  // Kept (placeholders and expiry, no value) so that a cell replacing this one in the same
  // session gets the same grants rather than a new ttl; the oldest are forgotten.
  released_.push_back(session_key);
  while (released_.size() > kKeptReleased) {
    auto old = sessions_.find(released_.front());
    if (old != sessions_.end() && !old->second.cell) sessions_.erase(old);
    released_.pop_front();
  }
}

void SessionSecrets::ExpireFiles(Session& session) const {
  const Clock::time_point now = Clock::now();
  for (Held& h : session.secrets) {
    if (!h.file_written || now < h.expires || !session.cell) continue;
    if (session.cell->Remove(CellPath(h.policy.name), false)) h.file_written = false;
  }
}

void SessionSecrets::OnSecretEvent(const egress::SecretEvent& event) {
  if (event.decision != "refused" || !event.end_session) return;
  {
    std::lock_guard lock(mu_);
    to_end_.emplace_back(event.session_id,
                         "secret " + event.secret + " was sent where its policy does not allow (" +
                             event.reason + "); the policy ends the session on a violation");
  }
  wake_.notify_all();
}

void SessionSecrets::EndSessions() {
  std::unique_lock lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !to_end_.empty(); });
    if (stopping_) return;
    auto [key, reason] = std::move(to_end_.front());
    to_end_.pop_front();
    lock.unlock();
    {
      std::lock_guard ending(end_mu_);
      EndSession end;
      {
        std::lock_guard again(mu_);
        end = end_session_;
      }
      if (end) end(key, reason);
    }
    lock.lock();
  }
}

Result<std::vector<std::string>> SessionSecrets::ExecEnv(const std::string& session_key) const {
  std::vector<Held> held;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(session_key);
    if (it == sessions_.end()) return std::vector<std::string>{};
    ExpireFiles(it->second);
    held = it->second.secrets;
  }
  std::vector<std::string> env;
  for (const Held& h : held) {
    if (h.policy.mode == SecretMode::kPlaceholder) {
      env.push_back(h.policy.name + "=" + h.placeholder);
    } else if (h.policy.mode == SecretMode::kEnv && Clock::now() < h.expires) {
      auto value = Read(h);
      if (!value) {
        for (std::string& e : env) policies::WipeSecret(e);
        return value.error();
      }
      env.push_back(h.policy.name + "=" + *value);
      policies::WipeSecret(*value);
    }
  }
  return env;
}

std::vector<std::string> SessionSecrets::Names(const std::string& session_key) const {
  std::vector<std::string> names;
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session_key);
  if (it == sessions_.end()) return names;
  for (const Held& h : it->second.secrets) names.push_back(h.policy.name);
  return names;
}

std::vector<tools::SecretStatus> SessionSecrets::Describe(const std::string& session_key) const {
  std::vector<tools::SecretStatus> out;
  std::lock_guard lock(mu_);
  auto it = sessions_.find(session_key);
  if (it == sessions_.end()) return out;
  ExpireFiles(it->second);
  const Clock::time_point now = Clock::now();
  for (const Held& h : it->second.secrets) {
    tools::SecretStatus s;
    s.name = h.policy.name;
    s.mode = policies::SecretModeName(h.policy.mode);
    if (h.policy.mode == SecretMode::kPlaceholder) s.hosts = h.policy.hosts;
    if (h.policy.mode == SecretMode::kFile) s.file = CellPath(h.policy.name);
    s.expired = now >= h.expires;
    if (h.policy.ttl) {
      s.time_left = s.expired ? std::chrono::seconds(0)
                              : std::chrono::duration_cast<std::chrono::seconds>(h.expires - now);
    }
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<tools::SecretValue> SessionSecrets::Values(const std::string& session_key) const {
  std::vector<Held> held;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(session_key);
    if (it == sessions_.end()) return {};
    held = it->second.secrets;
  }
  std::vector<tools::SecretValue> out;
  for (const Held& h : held) {
    if (auto value = Read(h)) out.push_back({h.policy.name, std::move(*value)});
  }
  return out;
}

}  // namespace mcpcell::serve
