// Upstream requests (see upstream.h).
#include "packages/upstream.h"

#include <httplib.h>
#include <openssl/x509.h>

namespace mcpcell::packages {

Result<UrlParts> SplitUrl(const std::string& url) {
  UrlParts p;
  size_t start;
  if (url.rfind("https://", 0) == 0) {
    p.scheme = "https";
    start = 8;
  } else if (url.rfind("http://", 0) == 0) {
    p.scheme = "http";
    start = 7;
  } else {
    return Error::Msg("\"" + url + "\" is not an http(s) URL");
  }
  size_t slash = url.find('/', start);
  std::string authority = url.substr(start, slash == std::string::npos ? slash : slash - start);
  if (authority.empty() || authority.find('@') != std::string::npos ||
      authority.find_first_of(" \t\r\n\\") != std::string::npos)
    return Error::Msg("\"" + url + "\" has no usable host");
  p.origin = p.scheme + "://" + authority;
  p.host = authority[0] == '[' ? authority.substr(0, authority.find(']') + 1)
                               : authority.substr(0, authority.find(':'));
  p.path = slash == std::string::npos ? "/" : url.substr(slash);
  size_t hash = p.path.find('#');
  if (hash != std::string::npos) p.path.resize(hash);
  return p;
}

std::string ResolveUrl(const std::string& base, const std::string& href) {
  if (href.empty() || href.find_first_of(" \t\r\n") != std::string::npos) return "";
  if (href.rfind("https://", 0) == 0 || href.rfind("http://", 0) == 0)
    return SplitUrl(href).ok() ? href : "";
  auto b = SplitUrl(base);
  if (!b) return "";
  if (href.rfind("//", 0) == 0) return b->scheme + ":" + href;
  if (href.find(':') != std::string::npos && href.find(':') < href.find('/')) return "";
  if (href[0] == '/') return b->origin + href;
  std::string dir = b->path.substr(0, b->path.find('?'));
  dir = dir.substr(0, dir.rfind('/') + 1);
  std::string joined = dir + href;
  // Collapse "./" and "../" segments so the URL names what the page meant.
  std::vector<std::string> parts;
  size_t pos = 1;
  std::string query;
  size_t q = joined.find('?');
  if (q != std::string::npos) query = joined.substr(q), joined.resize(q);
  while (pos <= joined.size()) {
    size_t next = joined.find('/', pos);
    if (next == std::string::npos) next = joined.size();
    std::string seg = joined.substr(pos, next - pos);
    if (seg == "..") {
      if (!parts.empty()) parts.pop_back();
    } else if (seg != ".") {
      parts.push_back(seg);
    }
    pos = next + 1;
  }
  std::string path;
  for (const auto& s : parts) path += "/" + s;
  return b->origin + (path.empty() ? "/" : path) + query;
}

Status UpstreamClient::Get(const std::string& url, const std::string& accept,
                           std::chrono::seconds deadline, int* status,
                           const std::function<bool(const char*, size_t)>& sink) const {
  std::string current = url;
  *status = 0;
  const auto end = std::chrono::steady_clock::now() + deadline;
  bool late = false;
  for (int hop = 0; hop <= 5; ++hop) {
    auto parts = SplitUrl(current);
    if (!parts) return Error::Msg("upstream: " + parts.error().message);
    httplib::Client client(parts->origin);
    client.set_connection_timeout(options_.connect_timeout);
    client.set_read_timeout(options_.read_timeout);
    client.set_write_timeout(options_.read_timeout);
    client.set_follow_location(false);
    client.set_keep_alive(false);
    if (parts->scheme == "https") {
      client.enable_server_certificate_verification(true);
      // The system CAs plus the extra bundle; the client's SSL context takes ownership.
      X509_STORE* store = X509_STORE_new();
      X509_STORE_set_default_paths(store);
      if (!options_.ca_file.empty() &&
          X509_STORE_load_locations(store, options_.ca_file.c_str(), nullptr) != 1) {
        X509_STORE_free(store);
        return Error::Msg("upstream: cannot read the CA bundle \"" + options_.ca_file + "\"");
      }
      client.set_ca_cert_store(store);
    }
    httplib::Headers headers = {{"User-Agent", "mcpcell-packages/0.1"}};
    if (!accept.empty()) headers.emplace("Accept", accept);
    std::string location;
    bool redirect = false;
    auto res = client.Get(
        parts->path, headers,
        [&](const httplib::Response& r) {
          *status = r.status;
          if (r.status >= 300 && r.status < 400 && r.has_header("Location")) {
            redirect = true;
            location = r.get_header_value("Location");
            return false;
          }
          return r.status == 200;
        },
        [&](const char* data, size_t size) {
          // Per-read timeouts do not stop an upstream that trickles a byte at a time.
          if (std::chrono::steady_clock::now() > end) {
            late = true;
            return false;
          }
          return sink(data, size);
        });
    if (late)
      return Error::Msg("upstream " + current + ": not done within " +
                        std::to_string(deadline.count()) + " s");
    if (redirect) {
      std::string next = ResolveUrl(current, location);
      if (next.empty())
        return Error::Msg("upstream " + current + ": redirect to a non-http(s) URL");
      if (parts->scheme == "https" && next.rfind("http://", 0) == 0)
        return Error::Msg("upstream " + current + ": refused a redirect from https to " + next);
      current = next;
      continue;
    }
    if (*status != 0 && *status != 200)
      return Error::Msg("upstream " + current + ": HTTP " + std::to_string(*status));
    if (!res) {
      std::string why = httplib::to_string(res.error());
      if (parts->scheme == "https") {
        long verify = client.get_openssl_verify_result();
        if (verify != X509_V_OK)
          why += " (certificate: " + std::string(X509_verify_cert_error_string(verify)) + ")";
      }
      return Error::Msg("upstream " + current + ": " + why);
    }
    return {};
  }
  return Error::Msg("upstream " + url + ": more than 5 redirects");
}

Result<std::string> UpstreamClient::GetText(const std::string& url, uint64_t max_bytes,
                                            const std::string& accept, int* status) const {
  std::string body;
  bool too_big = false;
  auto st = Get(url, accept, options_.page_deadline, status, [&](const char* data, size_t size) {
    if (body.size() + size > max_bytes) {
      too_big = true;
      return false;
    }
    body.append(data, size);
    return true;
  });
  if (too_big)
    return Error::Msg("upstream " + url + ": larger than " + std::to_string(max_bytes) + " bytes");
  if (!st.ok()) return st.error();
  return body;
}

Status UpstreamClient::GetStream(const std::string& url,
                                 const std::function<bool(const char*, size_t)>& sink) const {
  int status = 0;
  return Get(url, "", options_.artifact_deadline, &status, sink);
}

}  // namespace mcpcell::packages
