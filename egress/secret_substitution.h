// Placeholder substitution in one HTTP request, separated from the I/O (intercept.cc) so
// every rule is unit-testable. Given the request as the cell sent it, the cell's grants and
// the host the connection is for, it either rewrites the request (each placeholder replaced
// by its secret's value in the surfaces allowed) or refuses it as a whole, naming the
// secret, the surface and why. Nothing of a refused request may be forwarded.
//
// A placeholder is replaced only when all hold: the request came over TLS the proxy
// terminated; the secret has not expired; the request's Host header names the connection's
// host (= CONNECT host = SNI) and port; that host:port is one of the secret's hosts; the
// surface is allowed for it. Surfaces: header values, the decoded Basic credentials, the
// query string, and JSON or form bodies. The URL path, the URL's userinfo and header names
// are never allowed. A placeholder split across places is not recognised and goes out as
// it is (it reveals nothing).
// Threading: pure functions (except for calling the grants' `value`).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "egress/host.h"
#include "egress/http_request.h"
#include "egress/secret_grant.h"

namespace mcpcell::egress {

struct SecretRequest {
  std::string method;
  std::string target;  // as sent: origin-form "/p?q", or absolute-form "https://h/p?q"
  std::vector<HttpHeader> headers;
  std::string body;  // complete (de-chunked); Content-Length is updated if it changes
};

struct SecretRequestContext {
  Host host;  // the connection's host: CONNECT host over TLS, the target's host otherwise
  uint16_t port = 0;
  bool tls = false;  // false: plain HTTP, where a placeholder is always refused
  std::chrono::steady_clock::time_point now = std::chrono::steady_clock::now();
};

struct SecretRefusal {
  std::string secret;
  std::string surface;  // "header", "basic_auth", "query", "body", "url_path", "userinfo", ...
  std::string reason;   // "its placeholder was in ..., which is not ..."
  bool end_session = false;
  // "mcpcell: secret GITHUB_TOKEN refused: <reason>"
  std::string Line() const;
};

// A real value and what stands for it in responses (value -> placeholder, and the base64
// forms of both).
struct SecretMask {
  std::string value;
  std::string placeholder;
};

struct SecretSubstitution {
  std::optional<SecretRefusal> refusal;                          // set: forward nothing
  std::vector<std::pair<std::string, std::string>> substituted;  // (secret, surface), in order
  std::vector<SecretMask> masks;  // for the response (secret_masker.h)
};

// Rewrites `request` in place when it is not refused (a refused request may be partly
// rewritten: the caller must drop it).
SecretSubstitution SubstituteSecrets(SecretRequest& request, const std::vector<SecretGrant>& grants,
                                     const SecretRequestContext& context);

// True when any grant's placeholder occurs anywhere in data (a cheap pre-check for bytes the
// proxy does not parse).
bool ContainsPlaceholder(std::string_view data, const std::vector<SecretGrant>& grants);

// Plain HTTP never carries a secret: the refusal for the first grant whose placeholder is
// in raw (request bytes as sent), or nullopt.
std::optional<SecretRefusal> RefusePlainHttp(std::string_view raw,
                                             const std::vector<SecretGrant>& grants,
                                             const Host& host, uint16_t port);

// The values of every grant whose hosts include host:port, for masking every response on a
// connection to it (a value stored by one request and echoed by a later one is masked too).
// Values that cannot be read are skipped.
std::vector<SecretMask> MasksForHost(const std::vector<SecretGrant>& grants, const Host& host,
                                     uint16_t port);

// The longest placeholder, for callers that scan a stream with a carry.
size_t LongestPlaceholder(const std::vector<SecretGrant>& grants);

}  // namespace mcpcell::egress
