// The certificate authority the egress proxy uses to terminate TLS for hosts that carry
// placeholder secrets (intercept.h). One per server: an EC P-256 key and a self-signed CA
// certificate made in memory at start; the key is never written anywhere and never enters a
// cell; only the CA certificate (PEM) goes into cells' trust stores.
//
// Leaf certificates are minted per host name (or IP literal): subjectAltName with that one
// name, serverAuth, a random 128-bit serial, valid from an hour ago (clock skew) for a day,
// signed by the CA, all sharing one leaf key made at start. They are cached per host, at
// most kLeafCacheSize of them; an entry is re-minted when it has less than an hour left.
// Threading: every method may be called from any thread (the cache has a mutex).
#pragma once

#include <openssl/types.h>

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "base/status.h"

namespace mcpcell::egress {

inline constexpr size_t kLeafCacheSize = 1024;

// A minted leaf certificate and its key, ready for SSL_CTX_use_certificate/PrivateKey.
struct LeafCertificate {
  std::shared_ptr<X509> cert;
  std::shared_ptr<EVP_PKEY> key;
  std::chrono::system_clock::time_point not_after;
};

class CertificateAuthority {
 public:
  // A fresh key and CA certificate named `common_name`.
  static Result<std::shared_ptr<CertificateAuthority>> Create(
      const std::string& common_name = "mcpcell egress interception CA");

  const std::string& certificate_pem() const { return cert_pem_; }
  X509* certificate() const { return cert_.get(); }

  // The leaf for host ("api.github.com" or an IP literal's text), from the cache or minted.
  Result<std::shared_ptr<const LeafCertificate>> LeafFor(const std::string& host);

 private:
  CertificateAuthority() = default;
  Result<std::shared_ptr<const LeafCertificate>> Mint(const std::string& host) const;

  std::shared_ptr<EVP_PKEY> key_, leaf_key_;
  std::shared_ptr<X509> cert_;
  std::string cert_pem_;
  std::mutex mu_;
  std::map<std::string, std::shared_ptr<const LeafCertificate>> cache_;  // mu_
};

}  // namespace mcpcell::egress
