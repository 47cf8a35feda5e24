// Ed25519 signatures of audit checkpoints (OpenSSL EVP_PKEY_ED25519).
//
// A checkpoint signs the hash of the record before it, as its 64 ASCII hex characters;
// since every hash covers its predecessor, one signature vouches for the whole trail up to
// that record. The operator's private key is a PEM file (`openssl genpkey -algorithm
// ed25519 -out key.pem`); `mcpcell audit verify --public-key` takes the PEM public key
// (`openssl pkey -in key.pem -pubout`). Both classes are immutable once loaded and may be
// used from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mcpcell::audit {

class CheckpointSigner {
 public:
  // Loads a PEM private key; an error names the file and says if it is not Ed25519.
  static Result<std::unique_ptr<CheckpointSigner>> Load(const std::string& pem_path);
  ~CheckpointSigner();
  CheckpointSigner(const CheckpointSigner&) = delete;
  CheckpointSigner& operator=(const CheckpointSigner&) = delete;

  // Base64 of the 64-byte signature over message.
  Result<std::string> SignBase64(std::string_view message) const;
  // First 16 hex digits of the SHA-256 of the raw 32-byte public key: which key signed.
  const std::string& key_id() const { return key_id_; }

 private:
  struct Key;
  CheckpointSigner(std::unique_ptr<Key> key, std::string key_id);
  std::unique_ptr<Key> key_;
  std::string key_id_;
};

class SignatureVerifier {
 public:
  // Loads a PEM public key (SubjectPublicKeyInfo); an error names the file.
  static Result<std::unique_ptr<SignatureVerifier>> Load(const std::string& pem_path);
  ~SignatureVerifier();
  SignatureVerifier(const SignatureVerifier&) = delete;
  SignatureVerifier& operator=(const SignatureVerifier&) = delete;

  // Ok if signature_base64 is this key's signature over message; else why not.
  Status Verify(std::string_view message, std::string_view signature_base64) const;
  const std::string& key_id() const { return key_id_; }

 private:
  struct Key;
  SignatureVerifier(std::unique_ptr<Key> key, std::string key_id);
  std::unique_ptr<Key> key_;
  std::string key_id_;
};

}  // namespace mcpcell::audit
