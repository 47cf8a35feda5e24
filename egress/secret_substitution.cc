#include "egress/secret_substitution.h"

#include <algorithm>
#include <cctype>

#include "base/base64.h"

namespace mcpcell::egress {
namespace {

enum class Where { kUserinfo, kPath, kHeaderName, kHeader, kBasicAuth, kQuery, kBody };

const char* SurfaceName(Where w) {
  switch (w) {
    case Where::kUserinfo:
      return "userinfo";
    case Where::kPath:
      return "url_path";
    case Where::kHeaderName:
      return "header_name";
    case Where::kHeader:
      return "header";
    case Where::kBasicAuth:
      return "basic_auth";
    case Where::kQuery:
      return "query";
    case Where::kBody:
      return "body";
  }
  return "?";
}

const char* SurfacePhrase(Where w) {
  switch (w) {
    case Where::kUserinfo:
      return "the URL's userinfo";
    case Where::kPath:
      return "the URL path";
    case Where::kHeaderName:
      return "a request header's name";
    case Where::kHeader:
      return "a request header";
    case Where::kBasicAuth:
      return "the Basic credentials";
    case Where::kQuery:
      return "the query string";
    case Where::kBody:
      return "the request body";
  }
  return "?";
}

bool Allowed(const SecretSurfaces& s, Where w) {
  switch (w) {
    case Where::kHeader:
      return s.header;
    case Where::kBasicAuth:
      return s.basic_auth;
    case Where::kQuery:
      return s.query;
    case Where::kBody:
      return s.body;
    default:
      return false;
  }
}

// Offsets into a request target: [userinfo), [path), [query) (the query without '?').
struct TargetParts {
  size_t userinfo_begin = 0, userinfo_end = 0;
  size_t path_begin = 0, path_end = 0;
  size_t query_begin = 0, query_end = 0;
};

TargetParts SplitTarget(const std::string& t) {
  TargetParts p;
  size_t scheme = t.find("://");
  if (!t.empty() && t[0] != '/' && scheme != std::string::npos) {
    size_t auth = scheme + 3;
    size_t auth_end = std::min(t.find_first_of("/?#", auth), t.size());
    size_t at = t.rfind('@', auth_end);
    if (at != std::string::npos && at >= auth) {
      p.userinfo_begin = auth;
      p.userinfo_end = at;
    }
    p.path_begin = auth_end;
  }
  size_t q = t.find('?', p.path_begin);
  p.path_end = q == std::string::npos ? t.size() : q;
  if (q != std::string::npos) {
    p.query_begin = q + 1;
    p.query_end = std::min(t.find('#', q), t.size());
    // A fragment is not sent by clients; if present it counts as path (never allowed).
  }
  return p;
}

bool In(const std::string& s, size_t begin, size_t end, const std::string& needle) {
  if (end <= begin) return false;
  return std::string_view(s).substr(begin, end - begin).find(needle) != std::string_view::npos;
}

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// The decoded "user:password" when h is "Authorization: Basic <base64>".
std::optional<std::string> BasicCredentials(const HttpHeader& h) {
  if (!EqualsIgnoreCase(h.name, "Authorization")) return std::nullopt;
  if (h.value.size() < 6 || !EqualsIgnoreCase(h.value.substr(0, 6), "Basic ")) return std::nullopt;
  std::string_view b64 = std::string_view(h.value).substr(6);
  while (!b64.empty() && b64.front() == ' ') b64.remove_prefix(1);
  auto decoded = Base64Decode(b64);
  if (!decoded) return std::nullopt;
  return std::move(*decoded);
}

std::string MediaType(const std::vector<HttpHeader>& headers) {
  for (const HttpHeader& h : headers)
    if (EqualsIgnoreCase(h.name, "Content-Type")) {
      std::string t = Lower(h.value.substr(0, h.value.find(';')));
      while (!t.empty() && t.back() == ' ') t.pop_back();
      return t;
    }
  return "";
}

enum class BodyKind { kOther, kJson, kForm };

BodyKind KindOf(const std::string& media) {
  if (media == "application/json" || (media.size() > 5 && media.ends_with("+json")))
    return BodyKind::kJson;
  if (media == "application/x-www-form-urlencoded") return BodyKind::kForm;
  return BodyKind::kOther;
}

std::vector<Where> Find(const SecretRequest& r, const std::string& ph) {
  std::vector<Where> found;
  auto add = [&](Where w) {
    if (std::find(found.begin(), found.end(), w) == found.end()) found.push_back(w);
  };
  TargetParts t = SplitTarget(r.target);
  if (In(r.target, t.userinfo_begin, t.userinfo_end, ph)) add(Where::kUserinfo);
  if (In(r.target, t.path_begin, t.path_end, ph) || In(r.target, t.query_end, r.target.size(), ph))
    add(Where::kPath);
  if (In(r.target, t.query_begin, t.query_end, ph)) add(Where::kQuery);
  for (const HttpHeader& h : r.headers) {
    if (h.name.find(ph) != std::string::npos) add(Where::kHeaderName);
    std::optional<std::string> basic = BasicCredentials(h);
    if (basic && basic->find(ph) != std::string::npos) add(Where::kBasicAuth);
    if (h.value.find(ph) != std::string::npos) add(Where::kHeader);
  }
  if (r.body.find(ph) != std::string::npos) add(Where::kBody);
  std::sort(found.begin(), found.end());  // never-allowed surfaces first
  return found;
}

// Why the Host header does not name the connection's host:port, or "" when it does.
std::string HostHeaderMismatch(const SecretRequest& r, const SecretRequestContext& c) {
  const HttpHeader* host = nullptr;
  for (const HttpHeader& h : r.headers) {
    if (!EqualsIgnoreCase(h.name, "Host")) continue;
    if (host) return "a request with two Host headers";
    host = &h;
  }
  if (!host) return "a request without a Host header";
  Result<Authority> a = ParseAuthority(host->value);
  uint16_t default_port = c.tls ? 443 : 80;
  if (!a || a->host.name != c.host.name || a->port.value_or(default_port) != c.port)
    return "a request whose Host header (" + host->value + ") is not the TLS host " +
           c.host.Display() + ":" + std::to_string(c.port);
  return "";
}

// The reason a grant's placeholder, found in `found`, may not be replaced; "" when it may.
std::string Violation(const SecretRequest& r, const SecretGrant& g, const SecretRequestContext& c,
                      const std::vector<Where>& found, Where* surface) {
  std::string target = c.host.Display() + ":" + std::to_string(c.port);
  *surface = found.front();
  for (Where w : found) {
    if (Allowed(g.surfaces, w)) continue;
    *surface = w;
    return std::string("its placeholder was in ") + SurfacePhrase(w) +
           ", which is not an allowed surface for it";
  }
  if (!c.tls)
    return "its placeholder was in a plain-HTTP request to " + target +
           "; a secret is only sent over TLS";
  if (c.now >= g.expires) return "its placeholder was used after the secret expired";
  if (std::string why = HostHeaderMismatch(r, c); !why.empty())
    return "its placeholder was in " + why;
  if (!g.hosts.Match(c.host, c.port))
    return "its placeholder was in a request to " + target + ", which is not one of its hosts";
  if (std::find(found.begin(), found.end(), Where::kBody) != found.end()) {
    *surface = Where::kBody;
    std::string media = MediaType(r.headers);
    if (KindOf(media) == BodyKind::kOther)
      return "its placeholder was in a request body of type " +
             (media.empty() ? std::string("(none)") : media) +
             "; only JSON and form bodies can carry a secret";
  }
  return "";
}

size_t ReplaceAll(std::string& s, const std::string& from, const std::string& to) {
  size_t count = 0;
  for (size_t pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size())) {
    s.replace(pos, from.size(), to);
    ++count;
  }
  return count;
}

std::string PercentEncode(std::string_view v) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : v) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

// The value as the inside of a JSON string (the placeholder sits inside one).
std::string JsonEscape(std::string_view v) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned char c : v) {
    if (c == '"' || c == '\\') {
      out += {'\\', static_cast<char>(c)};
    } else if (c < 0x20) {
      out += {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 15]};
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

void Apply(SecretRequest& r, const SecretGrant& g, const std::string& value) {
  TargetParts t = SplitTarget(r.target);
  if (t.query_end > t.query_begin) {
    std::string query = r.target.substr(t.query_begin, t.query_end - t.query_begin);
    ReplaceAll(query, g.placeholder, PercentEncode(value));
    r.target.replace(t.query_begin, t.query_end - t.query_begin, query);
  }
  for (HttpHeader& h : r.headers) {
    if (std::optional<std::string> basic = BasicCredentials(h)) {
      if (ReplaceAll(*basic, g.placeholder, value) > 0) h.value = "Basic " + Base64Encode(*basic);
      continue;
    }
    ReplaceAll(h.value, g.placeholder, value);
  }
  if (r.body.find(g.placeholder) == std::string::npos) return;
  bool json = KindOf(MediaType(r.headers)) == BodyKind::kJson;
  ReplaceAll(r.body, g.placeholder, json ? JsonEscape(value) : PercentEncode(value));
  for (HttpHeader& h : r.headers)
    if (EqualsIgnoreCase(h.name, "Content-Length")) h.value = std::to_string(r.body.size());
}

}  // namespace

std::string SecretRefusal::Line() const {
  return "mcpcell: secret " + secret + " refused: " + reason;
}

bool ContainsPlaceholder(std::string_view data, const std::vector<SecretGrant>& grants) {
  return std::any_of(grants.begin(), grants.end(), [&](const SecretGrant& g) {
    return !g.placeholder.empty() && data.find(g.placeholder) != std::string_view::npos;
  });
}

std::optional<SecretRefusal> RefusePlainHttp(std::string_view raw,
                                             const std::vector<SecretGrant>& grants,
                                             const Host& host, uint16_t port) {
  for (const SecretGrant& g : grants) {
    if (g.placeholder.empty() || raw.find(g.placeholder) == std::string_view::npos) continue;
    return SecretRefusal{g.name, "plain_http",
                         "its placeholder was in a plain-HTTP request to " + host.Display() + ":" +
                             std::to_string(port) + "; a secret is only sent over TLS",
                         g.end_session_on_violation};
  }
  return std::nullopt;
}

std::vector<SecretMask> MasksForHost(const std::vector<SecretGrant>& grants, const Host& host,
                                     uint16_t port) {
  std::vector<SecretMask> out;
  for (const SecretGrant& g : grants) {
    if (!g.value || !g.hosts.Match(host, port)) continue;
    Result<std::string> value = g.value();
    if (value && !value->empty()) out.push_back({std::move(value.value()), g.placeholder});
  }
  return out;
}

size_t LongestPlaceholder(const std::vector<SecretGrant>& grants) {
  size_t n = 0;
  for (const SecretGrant& g : grants) n = std::max(n, g.placeholder.size());
  return n;
}

SecretSubstitution SubstituteSecrets(SecretRequest& request, const std::vector<SecretGrant>& grants,
                                     const SecretRequestContext& context) {
  SecretSubstitution out;
  // First every check, so a request refused for one secret carries no other's value.
  std::vector<std::pair<const SecretGrant*, std::vector<Where>>> uses;
  for (const SecretGrant& g : grants) {
    if (g.placeholder.empty()) continue;
    std::vector<Where> found = Find(request, g.placeholder);
    if (found.empty()) continue;
    Where surface;
    std::string why = Violation(request, g, context, found, &surface);
    if (!why.empty()) {
      out.refusal = SecretRefusal{g.name, SurfaceName(surface), why, g.end_session_on_violation};
      return out;
    }
    uses.emplace_back(&g, std::move(found));
  }
  std::vector<std::string> values;
  for (const auto& [g, found] : uses) {
    Result<std::string> value = g->value ? g->value() : Error::Msg("no source");
    std::string why;
    if (!value)
      why = "its value cannot be read: " + value.error().message;
    else if (value->empty())
      why = "its value is empty";
    else if (value->find_first_of(std::string("\r\n\0", 3)) != std::string::npos &&
             std::find(found.begin(), found.end(), Where::kHeader) != found.end())
      why = "its value contains a line break or NUL, which cannot go in a header";
    if (!why.empty()) {
      out.refusal =
          SecretRefusal{g->name, SurfaceName(found.front()), why, g->end_session_on_violation};
      return out;
    }
    values.push_back(std::move(value.value()));
  }
  for (size_t i = 0; i < uses.size(); ++i) {
    Apply(request, *uses[i].first, values[i]);
    for (Where w : uses[i].second)
      out.substituted.emplace_back(uses[i].first->name, SurfaceName(w));
    out.masks.push_back({std::move(values[i]), uses[i].first->placeholder});
  }
  return out;
}

}  // namespace mcpcell::egress
