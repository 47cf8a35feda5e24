#include "egress/tls_sni.h"

#include <cstdio>
#include <optional>

namespace mcpcell::egress {
namespace {

constexpr uint8_t kHandshakeRecord = 22;
constexpr uint8_t kClientHello = 1;
constexpr uint16_t kServerNameExtension = 0;
constexpr size_t kRecordHeader = 5;
constexpr size_t kMaxRecordPayload = 16384 + 256;  // TLSPlaintext limit, with slack

SniResult Invalid(std::string reason) { return {SniResult::Kind::kInvalid, std::move(reason)}; }

// Bounds-checked big-endian reader over one handshake message.
class Reader {
 public:
  explicit Reader(std::string_view d) : d_(d) {}
  bool Skip(size_t n) {
    if (d_.size() < n) return false;
    d_.remove_prefix(n);
    return true;
  }
  std::optional<uint32_t> Uint(size_t bytes) {
    if (d_.size() < bytes) return std::nullopt;
    uint32_t v = 0;
    for (size_t i = 0; i < bytes; ++i) v = (v << 8) | static_cast<uint8_t>(d_[i]);
    d_.remove_prefix(bytes);
    return v;
  }
  // A length-prefixed vector (length field of `len_bytes` bytes).
  std::optional<std::string_view> Vector(size_t len_bytes) {
    auto len = Uint(len_bytes);
    if (!len || d_.size() < *len) return std::nullopt;
    std::string_view v = d_.substr(0, *len);
    d_.remove_prefix(*len);
    return v;
  }
  bool empty() const { return d_.empty(); }

 private:
  std::string_view d_;
};

// The server_name extension body (RFC 6066 §3): exactly one host_name entry.
SniResult ParseServerName(std::string_view body) {
  Reader r(body);
  auto list = r.Vector(2);
  if (!list || !r.empty()) return Invalid("malformed server_name extension");
  Reader names(*list);
  std::optional<std::string> host;
  while (!names.empty()) {
    auto type = names.Uint(1);
    auto name = names.Vector(2);
    if (!type || !name) return Invalid("malformed server_name list");
    if (*type != 0) continue;  // only host_name (0) is defined
    if (host) return Invalid("more than one host_name in server_name");
    if (name->empty()) return Invalid("empty host_name in server_name");
    host = std::string(*name);
  }
  if (!host) return {SniResult::Kind::kNoSni, ""};
  return {SniResult::Kind::kName, *host};
}

SniResult ParseClientHello(std::string_view body) {
  Reader r(body);
  if (!r.Skip(2 + 32)) return Invalid("truncated ClientHello");  // legacy_version, random
  auto session = r.Vector(1);
  auto suites = r.Vector(2);
  auto compression = r.Vector(1);
  if (!session || session->size() > 32 || !suites || !compression)
    return Invalid("malformed ClientHello");
  if (r.empty()) return {SniResult::Kind::kNoSni, ""};  // no extensions at all
  auto extensions = r.Vector(2);
  if (!extensions || !r.empty()) return Invalid("malformed ClientHello extensions");
  Reader ext(*extensions);
  std::optional<SniResult> found;
  while (!ext.empty()) {
    auto type = ext.Uint(2);
    auto data = ext.Vector(2);
    if (!type || !data) return Invalid("malformed ClientHello extension");
    if (*type != kServerNameExtension) continue;
    if (found) return Invalid("two server_name extensions");
    found = ParseServerName(*data);
    if (found->kind == SniResult::Kind::kInvalid) return *found;
  }
  return found.value_or(SniResult{SniResult::Kind::kNoSni, ""});
}

}  // namespace

SniResult ExtractSni(std::string_view data) {
  // Concatenate handshake record payloads until the ClientHello message is complete.
  std::string handshake;
  size_t pos = 0;
  for (;;) {
    if (data.size() - pos < kRecordHeader) break;
    auto type = static_cast<uint8_t>(data[pos]);
    auto major = static_cast<uint8_t>(data[pos + 1]);
    if (type != kHandshakeRecord || major != 3) {
      char reason[96];
      std::snprintf(reason, sizeof reason,
                    "not a TLS handshake (first bytes 0x%02x 0x%02x at offset %zu)", type, major,
                    pos);
      return Invalid(reason);
    }
    size_t len = (static_cast<uint8_t>(data[pos + 3]) << 8) | static_cast<uint8_t>(data[pos + 4]);
    if (len == 0 || len > kMaxRecordPayload) return Invalid("bad TLS record length");
    if (data.size() - pos - kRecordHeader < len) break;
    handshake.append(data.substr(pos + kRecordHeader, len));
    pos += kRecordHeader + len;
    if (handshake.size() >= 4) {
      if (static_cast<uint8_t>(handshake[0]) != kClientHello)
        return Invalid("first handshake message is not a ClientHello");
      size_t body_len = (static_cast<uint8_t>(handshake[1]) << 16) |
                        (static_cast<uint8_t>(handshake[2]) << 8) |
                        static_cast<uint8_t>(handshake[3]);
      if (body_len + 4 > kMaxClientHello)
        return Invalid("ClientHello larger than " + std::to_string(kMaxClientHello) + " bytes");
      if (handshake.size() >= body_len + 4)
        return ParseClientHello(std::string_view(handshake).substr(4, body_len));
    }
  }
  // Partial: decide early when the first byte already says this is not TLS.
  if (data.size() > pos && static_cast<uint8_t>(data[pos]) != kHandshakeRecord) {
    char reason[64];
    std::snprintf(reason, sizeof reason, "not a TLS handshake (first byte 0x%02x)",
                  static_cast<uint8_t>(data[pos]));
    return Invalid(reason);
  }
  if (data.size() >= kMaxClientHello)
    return Invalid("no complete ClientHello in the first " + std::to_string(kMaxClientHello) +
                   " bytes");
  return {SniResult::Kind::kNeedMore, ""};
}

}  // namespace mcpcell::egress
