// OpenSSL helpers for the egress tests: a real ClientHello produced through memory BIOs,
// and a throwaway self-signed certificate for a loopback TLS server.
#pragma once

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <memory>
#include <stdexcept>
#include <string>

namespace mcpcell::egress::testing {

// The first flight a TLS client sends (its ClientHello record(s)); no network involved.
// Empty sni: no server_name extension.
inline std::string ClientHelloBytes(const std::string& sni) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  SSL* ssl = SSL_new(ctx);
  BIO* rbio = BIO_new(BIO_s_mem());
  BIO* wbio = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl, rbio, wbio);
  if (!sni.empty()) SSL_set_tlsext_host_name(ssl, sni.c_str());
  SSL_set_connect_state(ssl);
  SSL_do_handshake(ssl);  // WANT_READ after writing the ClientHello into wbio
  char* data = nullptr;
  long n = BIO_get_mem_data(wbio, &data);
  std::string out(data, static_cast<size_t>(n));
  SSL_free(ssl);  // frees both BIOs
  SSL_CTX_free(ctx);
  return out;
}

// A server SSL_CTX with a fresh P-256 key and a self-signed certificate for `name`.
inline SSL_CTX* SelfSignedServerContext(const std::string& name) {
  EVP_PKEY* key = EVP_EC_gen("P-256");
  X509* cert = X509_new();
  X509_set_version(cert, 2);
  ASN1_INTEGER_set(X509_get_serialNumber(cert), 1);
  X509_gmtime_adj(X509_getm_notBefore(cert), -60);
  X509_gmtime_adj(X509_getm_notAfter(cert), 3600);
  X509_set_pubkey(cert, key);
  X509_NAME* subject = X509_get_subject_name(cert);
  X509_NAME_add_entry_by_txt(subject, "CN", MBSTRING_ASC,
                             reinterpret_cast<const unsigned char*>(name.c_str()), -1, -1, 0);
  X509_set_issuer_name(cert, subject);
  X509_sign(cert, key, EVP_sha256());
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, key) != 1)
    throw std::runtime_error("SSL_CTX_use_certificate/PrivateKey failed");
  X509_free(cert);
  EVP_PKEY_free(key);
  return ctx;
}

}  // namespace mcpcell::egress::testing
