// Message digests for artifact verification (OpenSSL EVP): SHA-256 for PyPI files, SHA-512
// (npm "integrity") and SHA-1 (npm "shasum", older packages). Threading: a Digest belongs to
// one thread; the free functions are pure.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mcpcell::packages {

enum class DigestAlgo { kSha1, kSha256, kSha512 };
std::string_view DigestName(DigestAlgo algo);  // "sha1", "sha256", "sha512"
size_t DigestHexLength(DigestAlgo algo);       // 40, 64, 128
std::optional<DigestAlgo> DigestFromName(std::string_view name);

class Digest {
 public:
  explicit Digest(DigestAlgo algo);
  ~Digest();
  Digest(const Digest&) = delete;
  Digest& operator=(const Digest&) = delete;
  void Update(const void* data, size_t size);
  std::string FinalHex();  // lower-case hex; call once

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
};

// The digest of a whole file, read in 1 MiB blocks.
Result<std::string> FileDigestHex(const std::string& path, DigestAlgo algo);
// Lower-case hex of exactly `length` digits.
bool IsLowerHex(std::string_view s, size_t length);
// Standard base64 (npm's "sha512-<base64>") to lower-case hex; nullopt if malformed.
std::optional<std::string> Base64ToHex(std::string_view b64);
// Lower-case hex (even length) to standard base64.
std::string HexToBase64(std::string_view hex);

}  // namespace mcpcell::packages
