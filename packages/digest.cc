// Digests via OpenSSL EVP (see digest.h).
#include "packages/digest.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <vector>

#include "base/base64.h"

namespace mcpcell::packages {

struct Digest::Ctx {
  EVP_MD_CTX* md = nullptr;
};

std::string_view DigestName(DigestAlgo algo) {
  switch (algo) {
    case DigestAlgo::kSha1:
      return "sha1";
    case DigestAlgo::kSha256:
      return "sha256";
    case DigestAlgo::kSha512:
      return "sha512";
  }
  return "?";
}

size_t DigestHexLength(DigestAlgo algo) {
  return algo == DigestAlgo::kSha1 ? 40 : algo == DigestAlgo::kSha256 ? 64 : 128;
}

std::optional<DigestAlgo> DigestFromName(std::string_view name) {
  if (name == "sha1") return DigestAlgo::kSha1;
  if (name == "sha256") return DigestAlgo::kSha256;
  if (name == "sha512") return DigestAlgo::kSha512;
  return std::nullopt;
}

Digest::Digest(DigestAlgo algo) : ctx_(std::make_unique<Ctx>()) {
  ctx_->md = EVP_MD_CTX_new();
  const EVP_MD* md = algo == DigestAlgo::kSha1     ? EVP_sha1()
                     : algo == DigestAlgo::kSha256 ? EVP_sha256()
                                                   : EVP_sha512();
  EVP_DigestInit_ex(ctx_->md, md, nullptr);
}

Digest::~Digest() { EVP_MD_CTX_free(ctx_->md); }

void Digest::Update(const void* data, size_t size) { EVP_DigestUpdate(ctx_->md, data, size); }

std::string Digest::FinalHex() {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_DigestFinal_ex(ctx_->md, out, &n);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < n; ++i) {
    hex += kHex[out[i] >> 4];
    hex += kHex[out[i] & 15];
  }
  return hex;
}

Result<std::string> FileDigestHex(const std::string& path, DigestAlgo algo) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error::Sys("open(\"" + path + "\")");
  Digest d(algo);
  std::vector<char> buf(1 << 20);
  for (;;) {
    ssize_t n = read(fd, buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      auto err = Error::Sys("read(\"" + path + "\")");
      close(fd);
      return err;
    }
    if (n == 0) break;
    d.Update(buf.data(), static_cast<size_t>(n));
  }
  close(fd);
  return d.FinalHex();
}

bool IsLowerHex(std::string_view s, size_t length) {
  if (s.size() != length) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::optional<std::string> Base64ToHex(std::string_view b64) {
  // Strict, as npm writes it: padded, no whitespace, at most a digest's worth.
  if (b64.empty() || b64.size() % 4 != 0 || b64.size() > 1024) return std::nullopt;
  if (b64.find_first_of(" \t\r\n") != std::string_view::npos) return std::nullopt;
  auto raw = Base64Decode(b64);
  if (!raw) return std::nullopt;
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(raw->size() * 2);
  for (unsigned char c : *raw) {
    hex += kHex[c >> 4];
    hex += kHex[c & 15];
  }
  return hex;
}

std::string HexToBase64(std::string_view hex) {
  auto nibble = [](char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c - 'A' + 10;
  };
  std::string raw;
  raw.reserve(hex.size() / 2);
  for (size_t i = 0; i + 1 < hex.size(); i += 2)
    raw += static_cast<char>(nibble(hex[i]) << 4 | nibble(hex[i + 1]));
  return Base64Encode(raw);
}

}  // namespace mcpcell::packages
