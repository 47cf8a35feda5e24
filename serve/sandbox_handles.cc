#include "serve/sandbox_handles.h"

#include <openssl/rand.h>

#include <cctype>
#include <iterator>

namespace mcpcell::serve {
namespace {

constexpr const char* kPrefix = "sbx_";
constexpr size_t kRandomBytes = 16;  // 128 bits
constexpr size_t kMaxEnded = 4096;   // ended handles remembered for their error

// `n` bytes from OpenSSL's CSPRNG as lowercase hex; an error when it has no entropy (a
// guessable handle would let anyone use another's cell).
Result<std::string> RandomHex(size_t n) {
  unsigned char bytes[32];
  if (n > sizeof bytes || RAND_bytes(bytes, static_cast<int>(n)) != 1) {
    return Error::Msg("the random generator failed (RAND_bytes): no handle can be made safely");
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

bool IsLowerHex(const std::string& s) {
  for (char c : s) {
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

std::string NotFound() {
  return "arguments.sandbox: no such sandbox handle; call sandbox_create for one and pass the "
         "sbx_... text it returns";
}

std::string Seconds(std::chrono::milliseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace

SandboxHandles::SandboxHandles(SandboxHandlesOptions options) : options_(std::move(options)) {}

Status SandboxHandles::CheckServerId(const std::string& id) {
  if (id.empty() || id.size() > 63) {
    return Error::Msg("--server-id \"" + id + "\": expected 1 to 63 characters");
  }
  for (char c : id) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') {
      return Error::Msg("--server-id \"" + id +
                        "\": only letters, digits, '-' and '.' (it is part of every sandbox "
                        "handle, whose parts '_' separates)");
    }
  }
  return Ok();
}

SandboxHandles::Clock::time_point SandboxHandles::Now() const {
  return options_.now ? options_.now() : Clock::now();
}

void SandboxHandles::EndLocked(std::map<std::string, Entry>::iterator it, const std::string& why,
                               std::vector<Ending>& ending) {
  ending.push_back({it->second.key, it->second.tenant, why});
  if (ended_.size() >= kMaxEnded) {
    ended_.erase(ended_order_.front());
    ended_order_.pop_front();
    ended_keys_.erase(ended_keys_order_.front());
    ended_keys_order_.pop_front();
  }
  ended_[it->first] = {it->second.tenant, why};
  ended_order_.push_back(it->first);
  ended_keys_.insert(it->second.key);
  ended_keys_order_.push_back(it->second.key);
  keys_.erase(it->second.key);
  live_.erase(it);
}

void SandboxHandles::ExpireLocked(Clock::time_point now, std::vector<Ending>& ending) {
  for (auto it = live_.begin(); it != live_.end();) {
    auto next = std::next(it);
    const Entry& e = it->second;
    if (now - e.created >= e.limits.max_lifetime) {
      EndLocked(it, "it reached its maximum lifetime of " + Seconds(e.limits.max_lifetime), ending);
    } else if (e.calls_running == 0 && now - e.last_used >= e.limits.idle) {
      EndLocked(it, "it was idle for " + Seconds(e.limits.idle), ending);
    }
    it = next;
  }
}

void SandboxHandles::SetEndListener(EndListener fn) {
  std::lock_guard lock(mu_);
  on_ended_ = std::move(fn);
}

void SandboxHandles::Report(const std::vector<Ending>& ending) const {
  if (ending.empty()) return;
  EndListener listener;
  {
    std::lock_guard lock(mu_);
    listener = on_ended_;
  }
  if (!listener) return;
  for (const Ending& e : ending) listener(e.key, e.tenant, e.why);
}

Result<MintedSandbox> SandboxHandles::Mint(const std::string& tenant) {
  auto limits = options_.tenants.find(tenant);
  if (limits == options_.tenants.end()) {
    return Error::Msg("no policy is configured for tenant \"" + tenant + "\": no sandbox for it");
  }
  auto random = RandomHex(kRandomBytes);
  if (!random) return random.error();
  auto key_random = RandomHex(8);
  if (!key_random) return key_random.error();
  MintedSandbox minted;
  minted.handle = kPrefix + (options_.server_id.empty() ? "" : options_.server_id + "_") + *random;
  minted.key = "sandbox-" + *key_random;
  minted.limits = limits->second;
  minted.expires_at = std::chrono::system_clock::now() + limits->second.max_lifetime;
  std::vector<Ending> ending;
  Status refused = Ok();
  {
    std::lock_guard lock(mu_);
    const auto now = Now();
    ExpireLocked(now, ending);
    size_t live = 0;
    for (const auto& [h, e] : live_) live += e.tenant == tenant ? 1 : 0;
    if (limits->second.max_live > 0 && live >= limits->second.max_live) {
      refused = Error::Msg("this tenant already has " + std::to_string(live) +
                           " live sandboxes, its limit (max_sessions); end one with "
                           "sandbox_close first");
    } else {
      live_[minted.handle] = {minted.key, tenant, now, now, limits->second};
      keys_[minted.key] = minted.handle;
    }
  }
  Report(ending);
  if (!refused) return refused.error();
  return minted;
}

Result<std::map<std::string, SandboxHandles::Entry>::iterator> SandboxHandles::FindLocked(
    const std::string& handle, const std::string& tenant) {
  if (handle.rfind(kPrefix, 0) != 0) return Error::Msg(NotFound());
  const std::string rest = handle.substr(std::string(kPrefix).size());
  const size_t sep = rest.rfind('_');
  const std::string id = sep == std::string::npos ? "" : rest.substr(0, sep);
  const std::string random = sep == std::string::npos ? rest : rest.substr(sep + 1);
  if (random.size() != 2 * kRandomBytes || !IsLowerHex(random)) return Error::Msg(NotFound());
  if (!id.empty() && id != options_.server_id) {
    return Error::Msg("arguments.sandbox: this handle belongs to server " + id + ", not to " +
                      (options_.server_id.empty() ? std::string("this server (which has no id)")
                                                  : "server " + options_.server_id) +
                      "; send the request where the handle was made (the Mcp-Param-Sandbox "
                      "header routes it)");
  }
  auto it = live_.find(handle);
  if (it != live_.end() && it->second.tenant == tenant) return it;
  auto ended = ended_.find(handle);
  if (it == live_.end() && ended != ended_.end() && ended->second.tenant == tenant) {
    return Error::Msg("arguments.sandbox: this sandbox has ended (" + ended->second.why +
                      "); call sandbox_create for a new one");
  }
  return Error::Msg(NotFound());
}

Result<std::string> SandboxHandles::Resolve(const std::string& handle, const std::string& tenant) {
  std::vector<Ending> ending;
  Result<std::string> out = Error::Msg(NotFound());
  {
    std::lock_guard lock(mu_);
    const auto now = Now();
    ExpireLocked(now, ending);
    auto it = FindLocked(handle, tenant);
    if (it) {
      (*it)->second.last_used = now;
      ++(*it)->second.calls_running;
      out = (*it)->second.key;
    } else {
      out = it.error();
    }
  }
  Report(ending);
  return out;
}

void SandboxHandles::CallDone(const std::string& key) {
  std::lock_guard lock(mu_);
  auto handle = keys_.find(key);
  if (handle == keys_.end()) return;  // it ended meanwhile
  auto it = live_.find(handle->second);
  if (it == live_.end()) return;
  it->second.last_used = Now();
  if (it->second.calls_running > 0) --it->second.calls_running;
}

Result<std::string> SandboxHandles::Close(const std::string& handle, const std::string& tenant) {
  std::vector<Ending> ending;
  Result<std::string> out = Error::Msg(NotFound());
  {
    std::lock_guard lock(mu_);
    ExpireLocked(Now(), ending);
    auto it = FindLocked(handle, tenant);
    if (it) {
      out = (*it)->second.key;
      EndLocked(*it, "closed by sandbox_close", ending);
    } else {
      out = it.error();
    }
  }
  Report(ending);
  return out;
}

bool SandboxHandles::Ended(const std::string& key, const std::string& why) {
  std::vector<Ending> ending;
  {
    std::lock_guard lock(mu_);
    auto handle = keys_.find(key);
    if (handle == keys_.end()) return false;
    EndLocked(live_.find(handle->second), why, ending);
  }
  Report(ending);
  return true;
}

bool SandboxHandles::OwnsKey(const std::string& key) const {
  std::lock_guard lock(mu_);
  return keys_.count(key) > 0 || ended_keys_.count(key) > 0;
}

size_t SandboxHandles::Live(const std::string& tenant) {
  std::vector<Ending> ending;
  size_t live = 0;
  {
    std::lock_guard lock(mu_);
    ExpireLocked(Now(), ending);
    for (const auto& [h, e] : live_) live += e.tenant == tenant ? 1 : 0;
  }
  Report(ending);
  return live;
}

}  // namespace mcpcell::serve
