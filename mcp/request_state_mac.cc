// RequestStateMac (see request_state_mac.h).
#include "mcp/request_state_mac.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <stdexcept>

#include "base/base64.h"

namespace mcp {

namespace {

int64_t NowSeconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RequestStateMac::RequestStateMac() {
  if (RAND_bytes(key_.data(), static_cast<int>(key_.size())) != 1) {
    throw std::runtime_error("RAND_bytes failed: no key for sealing request states");
  }
}

std::string RequestStateMac::Mac(const std::string& text) const {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key_.data(), static_cast<int>(key_.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest, &length);
  static const char* kHex = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < length; ++i) {
    out.push_back(kHex[digest[i] >> 4]);
    out.push_back(kHex[digest[i] & 15]);
  }
  return out;
}

std::string RequestStateMac::Seal(const std::string& binding, const Json& state) const {
  Json body = {{"exp", NowSeconds() + kLifetime.count()}, {"state", state}};
  std::string payload = mcpcell::Base64Encode(body.dump());
  // The binding is signed, not sent: the retry names it again (method and name).
  return payload + "." + Mac(binding + "\n" + payload);
}

std::variant<Json, std::string> RequestStateMac::Open(const std::string& binding,
                                                      const std::string& sealed) const {
  size_t dot = sealed.rfind('.');
  if (dot == std::string::npos) return std::string("requestState is not one this server made");
  std::string payload = sealed.substr(0, dot);
  std::string mac = sealed.substr(dot + 1);
  std::string expected = Mac(binding + "\n" + payload);
  // Constant time: the comparison must not tell an attacker how much of a guess was right.
  if (mac.size() != expected.size() ||
      CRYPTO_memcmp(mac.data(), expected.data(), mac.size()) != 0) {
    return std::string(
        "requestState failed its integrity check (altered, or made for another request or "
        "by another server)");
  }
  auto decoded = mcpcell::Base64Decode(payload);
  Json body = decoded ? Json::parse(decoded.value(), nullptr, false) : Json();
  if (!body.is_object() || !body.contains("exp") || !body["exp"].is_number_integer()) {
    return std::string("requestState is malformed");
  }
  if (body["exp"].get<int64_t>() < NowSeconds()) {
    return std::string("requestState has expired; call again without it to start over");
  }
  return body.value("state", Json());
}

}  // namespace mcp
