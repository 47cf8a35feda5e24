// HTTP(S) requests from the package service to the upstream registries (cpp-httplib with
// OpenSSL). HTTPS verifies the certificate chain against the system CAs plus an optional
// extra bundle, and the host name. Redirects are followed by hand (at most 5), only to
// http(s) and never from https down to http. Every request has connect/read timeouts and a
// byte cap, so a slow or hostile upstream costs one thread for a bounded time.
// Threading: UpstreamClient is immutable after construction; its methods may run at once.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

#include "base/status.h"

namespace mcpcell::packages {

// "https://host:port/path" split; nullopt-like error for other schemes.
struct UrlParts {
  std::string scheme;  // "http" or "https"
  std::string origin;  // "https://host:port"
  std::string host;
  std::string path;  // "/..." (with query)
};
Result<UrlParts> SplitUrl(const std::string& url);
// An href of a page at `base` made absolute; "" when it is not http(s) or malformed.
std::string ResolveUrl(const std::string& base, const std::string& href);

class UpstreamClient {
 public:
  struct Options {
    std::string ca_file;  // extra CA bundle ("" none)
    std::chrono::seconds connect_timeout{10};
    std::chrono::seconds read_timeout{30};
    std::chrono::seconds page_deadline{60};       // a whole index page or packument
    std::chrono::seconds artifact_deadline{900};  // a whole artifact (a trickling upstream)
  };
  explicit UpstreamClient(Options options) : options_(std::move(options)) {}

  // GET `url` into a string of at most max_bytes; a status other than 200 is an error
  // naming it ("upstream https://...: HTTP 404"); *status gets the final status (0 when no
  // answer).
  Result<std::string> GetText(const std::string& url, uint64_t max_bytes, const std::string& accept,
                              int* status) const;
  // GET `url`, handing the body to `sink` chunk by chunk (false from sink stops it).
  Status GetStream(const std::string& url,
                   const std::function<bool(const char*, size_t)>& sink) const;

 private:
  Status Get(const std::string& url, const std::string& accept, std::chrono::seconds deadline,
             int* status, const std::function<bool(const char*, size_t)>& sink) const;
  Options options_;
};

}  // namespace mcpcell::packages
