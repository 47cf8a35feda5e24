#include "audit/signing.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdio>

#include "audit/record.h"
#include "base/base64.h"

namespace mcpcell::audit {
namespace {

std::string OpenSslError() {
  unsigned long e = ERR_get_error();
  if (e == 0) return "unknown OpenSSL error";
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

struct PkeyFree {
  void operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;

// Reads a PEM key with `read` (PEM_read_PrivateKey or PEM_read_PUBKEY) and checks it is
// Ed25519.
template <typename ReadFn>
Result<PkeyPtr> ReadKey(const std::string& path, const char* what, ReadFn read) {
  FILE* f = std::fopen(path.c_str(), "re");
  if (!f) return Error::Sys("open " + std::string(what) + " \"" + path + "\"");
  PkeyPtr key(read(f));
  std::fclose(f);
  if (!key)
    return Error::Msg(std::string(what) + " \"" + path + "\": not a PEM " + what + " (" +
                      OpenSslError() + ")");
  if (EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519)
    return Error::Msg(std::string(what) + " \"" + path + "\": not an Ed25519 key");
  return key;
}

std::string KeyId(EVP_PKEY* key) {
  unsigned char raw[32];
  size_t n = sizeof raw;
  if (EVP_PKEY_get_raw_public_key(key, raw, &n) != 1) return "";
  return Sha256Hex(std::string_view(reinterpret_cast<char*>(raw), n)).substr(0, 16);
}

}  // namespace

struct CheckpointSigner::Key {
  PkeyPtr pkey;
};
struct SignatureVerifier::Key {
  PkeyPtr pkey;
};

CheckpointSigner::CheckpointSigner(std::unique_ptr<Key> key, std::string key_id)
    : key_(std::move(key)), key_id_(std::move(key_id)) {}
CheckpointSigner::~CheckpointSigner() = default;

Result<std::unique_ptr<CheckpointSigner>> CheckpointSigner::Load(const std::string& pem_path) {
  auto key = ReadKey(pem_path, "signing key",
                     [](FILE* f) { return PEM_read_PrivateKey(f, nullptr, nullptr, nullptr); });
  if (!key) return key.error();
  std::string id = KeyId(key->get());
  auto k = std::make_unique<Key>();
  k->pkey = std::move(*key);
  return std::unique_ptr<CheckpointSigner>(new CheckpointSigner(std::move(k), std::move(id)));
}

Result<std::string> CheckpointSigner::SignBase64(std::string_view message) const {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  unsigned char sig[64];
  size_t n = sizeof sig;
  bool ok = ctx && EVP_DigestSignInit(ctx, nullptr, nullptr, nullptr, key_->pkey.get()) == 1 &&
            EVP_DigestSign(ctx, sig, &n, reinterpret_cast<const unsigned char*>(message.data()),
                           message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  if (!ok) return Error::Msg("Ed25519 signing: " + OpenSslError());
  return Base64Encode(std::string_view(reinterpret_cast<char*>(sig), n));
}

SignatureVerifier::SignatureVerifier(std::unique_ptr<Key> key, std::string key_id)
    : key_(std::move(key)), key_id_(std::move(key_id)) {}
SignatureVerifier::~SignatureVerifier() = default;

Result<std::unique_ptr<SignatureVerifier>> SignatureVerifier::Load(const std::string& pem_path) {
  auto key = ReadKey(pem_path, "public key",
                     [](FILE* f) { return PEM_read_PUBKEY(f, nullptr, nullptr, nullptr); });
  if (!key) return key.error();
  std::string id = KeyId(key->get());
  auto k = std::make_unique<Key>();
  k->pkey = std::move(*key);
  return std::unique_ptr<SignatureVerifier>(new SignatureVerifier(std::move(k), std::move(id)));
}

Status SignatureVerifier::Verify(std::string_view message,
                                 std::string_view signature_base64) const {
  auto sig = Base64Decode(signature_base64);
  if (!sig) return Error::Msg("signature is not base64: " + sig.error().message);
  if (sig->size() != 64)
    return Error::Msg("signature has " + std::to_string(sig->size()) + " bytes, not 64");
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  bool ok =
      ctx && EVP_DigestVerifyInit(ctx, nullptr, nullptr, nullptr, key_->pkey.get()) == 1 &&
      EVP_DigestVerify(ctx, reinterpret_cast<const unsigned char*>(sig->data()), sig->size(),
                       reinterpret_cast<const unsigned char*>(message.data()), message.size()) == 1;
  EVP_MD_CTX_free(ctx);
  ERR_clear_error();
  if (!ok) return Error::Msg("signature does not verify with key " + key_id_);
  return Ok();
}

}  // namespace mcpcell::audit
