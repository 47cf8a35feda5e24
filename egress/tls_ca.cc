#include "egress/tls_ca.h"

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <algorithm>

#include "egress/host.h"

namespace mcpcell::egress {
namespace {

using Clock = std::chrono::system_clock;

Error SslError(const std::string& what) {
  unsigned long e = ERR_get_error();
  char buf[256] = "unknown error";
  if (e != 0) ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return Error::Msg("tls ca: " + what + ": " + buf);
}

Result<std::shared_ptr<EVP_PKEY>> NewKey() {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  if (!key) return SslError("EVP_EC_gen(P-256)");
  return std::shared_ptr<EVP_PKEY>(key, EVP_PKEY_free);
}

Status RandomSerial(X509* cert) {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof bytes) != 1) return SslError("RAND_bytes");
  bytes[0] &= 0x7f;  // positive
  bytes[0] |= 0x01;  // and never zero
  BIGNUM* bn = BN_bin2bn(bytes, sizeof bytes, nullptr);
  bool ok = bn && BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(cert));
  BN_free(bn);
  return ok ? Ok() : SslError("serial number");
}

Status AddExtension(X509* cert, X509* issuer, int nid, const std::string& value) {
  X509V3_CTX ctx;
  X509V3_set_ctx_nodb(&ctx);
  X509V3_set_ctx(&ctx, issuer, cert, nullptr, nullptr, 0);
  X509_EXTENSION* ext = X509V3_EXT_conf_nid(nullptr, &ctx, nid, value.c_str());
  if (!ext) return SslError("extension " + std::string(OBJ_nid2sn(nid)) + "=" + value);
  int ok = X509_add_ext(cert, ext, -1);
  X509_EXTENSION_free(ext);
  return ok == 1 ? Ok() : SslError("X509_add_ext");
}

Status SetName(X509_NAME* name, const std::string& cn) {
  if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC,
                                 reinterpret_cast<const unsigned char*>("mcpcell"), -1, -1,
                                 0) != 1 ||
      X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(cn.c_str()), -1, -1,
                                 0) != 1)
    return SslError("subject name " + cn);
  return Ok();
}

// A certificate with version 3, a random serial, the validity window and the public key.
Result<std::shared_ptr<X509>> NewCertificate(EVP_PKEY* key, Clock::duration before,
                                             Clock::duration after) {
  std::shared_ptr<X509> cert(X509_new(), X509_free);
  if (!cert) return SslError("X509_new");
  auto secs = [](Clock::duration d) {
    return static_cast<long>(std::chrono::duration_cast<std::chrono::seconds>(d).count());
  };
  if (X509_set_version(cert.get(), 2) != 1 ||
      !X509_gmtime_adj(X509_getm_notBefore(cert.get()), -secs(before)) ||
      !X509_gmtime_adj(X509_getm_notAfter(cert.get()), secs(after)) ||
      X509_set_pubkey(cert.get(), key) != 1)
    return SslError("certificate fields");
  if (Status s = RandomSerial(cert.get()); !s) return s.error();
  return cert;
}

std::string ToPem(X509* cert) {
  BIO* bio = BIO_new(BIO_s_mem());
  PEM_write_bio_X509(bio, cert);
  char* data = nullptr;
  long n = BIO_get_mem_data(bio, &data);
  std::string out(data, static_cast<size_t>(n));
  BIO_free(bio);
  return out;
}

}  // namespace

Result<std::shared_ptr<CertificateAuthority>> CertificateAuthority::Create(
    const std::string& common_name) {
  std::shared_ptr<CertificateAuthority> ca(new CertificateAuthority());
  Result<std::shared_ptr<EVP_PKEY>> key = NewKey(), leaf_key = NewKey();
  if (!key) return key.error();
  if (!leaf_key) return leaf_key.error();
  ca->key_ = key.value();
  ca->leaf_key_ = leaf_key.value();
  // Long-lived: it lives as long as the server process, which makes a new one at start.
  Result<std::shared_ptr<X509>> cert =
      NewCertificate(ca->key_.get(), std::chrono::hours(1), std::chrono::hours(24 * 3650));
  if (!cert) return cert.error();
  X509* c = cert->get();
  if (Status s = SetName(X509_get_subject_name(c), common_name); !s) return s.error();
  X509_set_issuer_name(c, X509_get_subject_name(c));
  for (auto [nid, value] : {std::pair{NID_basic_constraints, "critical,CA:TRUE,pathlen:0"},
                            {NID_key_usage, "critical,keyCertSign,cRLSign"},
                            {NID_subject_key_identifier, "hash"},
                            {NID_authority_key_identifier, "keyid:always"}})
    if (Status s = AddExtension(c, c, nid, value); !s) return s.error();
  if (X509_sign(c, ca->key_.get(), EVP_sha256()) == 0) return SslError("sign the CA certificate");
  ca->cert_ = cert.value();
  ca->cert_pem_ = ToPem(c);
  return ca;
}

Result<std::shared_ptr<const LeafCertificate>> CertificateAuthority::Mint(
    const std::string& host) const {
  Result<Host> parsed = ParseHost(host);
  if (!parsed) return Error::Msg("tls ca: leaf for \"" + host + "\": " + parsed.error().message);
  auto validity = std::chrono::hours(24);
  Result<std::shared_ptr<X509>> cert =
      NewCertificate(leaf_key_.get(), std::chrono::hours(1), validity);
  if (!cert) return cert.error();
  X509* c = cert->get();
  if (Status s = SetName(X509_get_subject_name(c), parsed->name); !s) return s.error();
  X509_set_issuer_name(c, X509_get_subject_name(cert_.get()));
  std::string san = (parsed->is_ip() ? "IP:" : "DNS:") + parsed->name;
  for (auto [nid, value] : {std::pair<int, std::string>{NID_basic_constraints, "critical,CA:FALSE"},
                            {NID_key_usage, "critical,digitalSignature"},
                            {NID_ext_key_usage, "serverAuth"},
                            {NID_subject_alt_name, san},
                            {NID_subject_key_identifier, "hash"},
                            {NID_authority_key_identifier, "keyid:always"}})
    if (Status s = AddExtension(c, cert_.get(), nid, value); !s) return s.error();
  if (X509_sign(c, key_.get(), EVP_sha256()) == 0) return SslError("sign the leaf for " + host);
  auto leaf = std::make_shared<LeafCertificate>();
  leaf->cert = cert.value();
  leaf->key = leaf_key_;
  leaf->not_after = Clock::now() + validity;
  return std::shared_ptr<const LeafCertificate>(std::move(leaf));
}

Result<std::shared_ptr<const LeafCertificate>> CertificateAuthority::LeafFor(
    const std::string& host) {
  {
    std::lock_guard lock(mu_);
    auto it = cache_.find(host);
    if (it != cache_.end() && it->second->not_after - Clock::now() > std::chrono::hours(1))
      return it->second;
  }
  Result<std::shared_ptr<const LeafCertificate>> leaf = Mint(host);
  if (!leaf) return leaf;
  std::lock_guard lock(mu_);
  if (cache_.size() >= kLeafCacheSize && !cache_.contains(host)) {
    // Drop the entry closest to expiry (the oldest minted): bounded memory, simple.
    auto oldest = std::min_element(cache_.begin(), cache_.end(), [](const auto& a, const auto& b) {
      return a.second->not_after < b.second->not_after;
    });
    cache_.erase(oldest);
  }
  cache_[host] = leaf.value();
  return leaf;
}

}  // namespace mcpcell::egress
