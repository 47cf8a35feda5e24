// The per-server CA: a CA certificate clients can trust, leaves that verify against it for
// exactly their host, a cache that returns the same leaf, and names it refuses.
#include "egress/tls_ca.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace mcpcell::egress {
namespace {

// X509_V_OK when leaf verifies against the CA alone (as a client trusting only it would).
int Verify(X509* ca, X509* leaf) {
  X509_STORE* store = X509_STORE_new();
  X509_STORE_add_cert(store, ca);
  X509_STORE_CTX* ctx = X509_STORE_CTX_new();
  X509_STORE_CTX_init(ctx, store, leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx, X509_PURPOSE_SSL_SERVER);
  X509_VERIFY_PARAM_set_flags(X509_STORE_CTX_get0_param(ctx), X509_V_FLAG_X509_STRICT);
  int rc = X509_verify_cert(ctx) == 1 ? X509_V_OK : X509_STORE_CTX_get_error(ctx);
  X509_STORE_CTX_free(ctx);
  X509_STORE_free(store);
  return rc;
}

TEST(CertificateAuthority, CaPemParsesAsACaCertificate) {
  auto ca = CertificateAuthority::Create().value();
  const std::string& pem = ca->certificate_pem();
  ASSERT_TRUE(pem.starts_with("-----BEGIN CERTIFICATE-----"));
  BIO* bio = BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size()));
  X509* cert = PEM_read_bio_X509(bio, nullptr, nullptr, nullptr);
  BIO_free(bio);
  ASSERT_NE(cert, nullptr);
  EXPECT_EQ(X509_check_ca(cert), 1);
  EXPECT_EQ(X509_cmp(cert, ca->certificate()), 0);
  X509_free(cert);
}

TEST(CertificateAuthority, LeafVerifiesForItsHostOnly) {
  auto ca = CertificateAuthority::Create().value();
  auto leaf = ca->LeafFor("api.example.com").value();
  EXPECT_EQ(Verify(ca->certificate(), leaf->cert.get()), X509_V_OK);
  EXPECT_EQ(X509_check_host(leaf->cert.get(), "api.example.com", 0, 0, nullptr), 1);
  EXPECT_EQ(X509_check_host(leaf->cert.get(), "evil.example.com", 0, 0, nullptr), 0);
  EXPECT_EQ(X509_check_private_key(leaf->cert.get(), leaf->key.get()), 1);
}

TEST(CertificateAuthority, LeafDoesNotVerifyAgainstAnotherServersCa) {
  auto ca = CertificateAuthority::Create().value();
  auto other = CertificateAuthority::Create().value();
  auto leaf = ca->LeafFor("api.example.com").value();
  EXPECT_NE(Verify(other->certificate(), leaf->cert.get()), X509_V_OK);
}

TEST(CertificateAuthority, LeavesAreCachedPerHostWithDistinctSerials) {
  auto ca = CertificateAuthority::Create().value();
  auto a1 = ca->LeafFor("a.example.com").value();
  auto a2 = ca->LeafFor("a.example.com").value();
  auto b = ca->LeafFor("b.example.com").value();
  EXPECT_EQ(a1.get(), a2.get());
  EXPECT_NE(ASN1_INTEGER_cmp(X509_get0_serialNumber(a1->cert.get()),
                             X509_get0_serialNumber(b->cert.get())),
            0);
}

TEST(CertificateAuthority, IpLiteralGetsAnIpSubjectAltName) {
  auto ca = CertificateAuthority::Create().value();
  auto leaf = ca->LeafFor("10.0.0.5").value();
  EXPECT_EQ(X509_check_ip_asc(leaf->cert.get(), "10.0.0.5", 0), 1);
  EXPECT_EQ(Verify(ca->certificate(), leaf->cert.get()), X509_V_OK);
}

TEST(CertificateAuthority, RefusesANameThatIsNotAHost) {
  auto ca = CertificateAuthority::Create().value();
  auto leaf = ca->LeafFor("bad name,DNS:evil.com");
  ASSERT_FALSE(leaf);
  EXPECT_NE(leaf.error().message.find("bad name,DNS:evil.com"), std::string::npos);
}

}  // namespace
}  // namespace mcpcell::egress
