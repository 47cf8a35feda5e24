#include "audit/record.h"

#include <openssl/evp.h>

#include <cctype>
#include <cstdio>
#include <ctime>

namespace mcpcell::audit {

using nlohmann::json;

std::string CanonicalJson(const json& value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string Sha256Hex(std::string_view bytes) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(bytes.data(), bytes.size(), digest, &n, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * n, '0');
  for (unsigned int i = 0; i < n; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 0xf];
  }
  return out;
}

std::string RecordHash(const json& record) {
  if (!record.is_object() || !record.contains("hash")) return Sha256Hex(CanonicalJson(record));
  json copy = record;
  copy.erase("hash");
  return Sha256Hex(CanonicalJson(copy));
}

SealedRecord SealRecord(const json& lower, const json& upper) {
  // "{a..}" and "{u..}" joined as "{a..,u..}" is the canonical record (keys sorted, no
  // spaces); "hash" goes between the two halves in the line.
  const std::string lo = CanonicalJson(lower), up = CanonicalJson(upper);
  const std::string_view lo_inner = std::string_view(lo).substr(1, lo.size() - 2);
  const std::string_view up_inner = std::string_view(up).substr(1, up.size() - 2);
  std::string body;
  body.reserve(lo.size() + up.size());
  body.append("{").append(lo_inner);
  if (!lo_inner.empty() && !up_inner.empty()) body.push_back(',');
  body.append(up_inner).push_back('}');
  SealedRecord out;
  out.hash = Sha256Hex(body);
  out.line.reserve(body.size() + out.hash.size() + 12);
  out.line.append("{").append(lo_inner);
  if (!lo_inner.empty()) out.line.push_back(',');
  out.line.append("\"hash\":\"").append(out.hash).push_back('"');
  if (!up_inner.empty()) out.line.append(",").append(up_inner);
  out.line.push_back('}');
  return out;
}

bool IsReservedField(std::string_view name) {
  for (std::string_view k :
       {"seq", "time", "type", "tenant", "session", "cell", "server", "prev", "hash"})
    if (name == k) return true;
  return false;
}

std::string FormatTime(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[48];
  size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::snprintf(buf + n, sizeof buf - n, ".%03dZ", static_cast<int>(ms % 1000));
  return buf;
}

std::string FormatCompactTime(std::chrono::system_clock::time_point t) {
  std::time_t secs = std::chrono::system_clock::to_time_t(t);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

namespace {

// Reads exactly `digits` decimal digits at text[*pos].
bool Digits(std::string_view text, size_t* pos, int digits, int* out) {
  if (*pos + digits > text.size()) return false;
  int v = 0;
  for (int i = 0; i < digits; ++i) {
    char c = text[*pos + i];
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
    v = v * 10 + (c - '0');
  }
  *pos += digits;
  *out = v;
  return true;
}

bool Expect(std::string_view text, size_t* pos, char c) {
  if (*pos >= text.size() || text[*pos] != c) return false;
  ++*pos;
  return true;
}

// The time of day, fraction and zone after the date; *offset_s receives the zone offset.
bool ParseClock(std::string_view text, size_t* pos, std::tm* tm, int* ms, int* offset_s) {
  if (!Digits(text, pos, 2, &tm->tm_hour) || !Expect(text, pos, ':') ||
      !Digits(text, pos, 2, &tm->tm_min) || !Expect(text, pos, ':') ||
      !Digits(text, pos, 2, &tm->tm_sec))
    return false;
  if (*pos < text.size() && text[*pos] == '.') {
    ++*pos;
    int scale = 100, digits = 0;
    while (*pos < text.size() && std::isdigit(static_cast<unsigned char>(text[*pos]))) {
      *ms += (text[*pos] - '0') * scale;
      scale /= 10;
      ++*pos;
      ++digits;
    }
    if (digits == 0) return false;
  }
  if (*pos < text.size() && (text[*pos] == 'Z' || text[*pos] == 'z')) {
    ++*pos;
    return true;
  }
  if (*pos >= text.size() || (text[*pos] != '+' && text[*pos] != '-')) return false;
  int sign = text[*pos] == '-' ? -1 : 1, hh = 0, mm = 0;
  ++*pos;
  if (!Digits(text, pos, 2, &hh) || !Expect(text, pos, ':') || !Digits(text, pos, 2, &mm))
    return false;
  *offset_s = sign * (hh * 3600 + mm * 60);
  return true;
}

}  // namespace

Result<int64_t> ParseTimeMs(std::string_view text) {
  auto bad = [&] {
    return Error::Msg("invalid time \"" + std::string(text) +
                      "\" (want RFC 3339, e.g. 2026-12-02T01:02:03Z, or a date 2026-12-02)");
  };
  std::tm tm{};
  size_t pos = 0;
  int ms = 0, offset_s = 0;
  if (!Digits(text, &pos, 4, &tm.tm_year) || !Expect(text, &pos, '-') ||
      !Digits(text, &pos, 2, &tm.tm_mon) || !Expect(text, &pos, '-') ||
      !Digits(text, &pos, 2, &tm.tm_mday))
    return bad();
  if (pos < text.size()) {
    if (text[pos] != 'T' && text[pos] != 't' && text[pos] != ' ') return bad();
    ++pos;
    if (!ParseClock(text, &pos, &tm, &ms, &offset_s) || pos != text.size()) return bad();
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60)
    return bad();
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t secs = static_cast<int64_t>(timegm(&tm)) - offset_s;
  return secs * 1000 + ms;
}

namespace {
bool IsHash(const json& v) {
  if (!v.is_string()) return false;
  const auto& s = v.get_ref<const std::string&>();
  if (s.size() != 64) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c)) && (c < 'a' || c > 'f')) return false;
  return true;
}
}  // namespace

std::string StringField(const json& record, const char* key) {
  if (!record.is_object()) return "";
  auto it = record.find(key);
  return it != record.end() && it->is_string() ? it->get<std::string>() : "";
}

uint64_t UintField(const json& record, const char* key) {
  if (!record.is_object()) return 0;
  auto it = record.find(key);
  if (it == record.end() || !it->is_number_integer()) return 0;
  return it->is_number_unsigned() || it->get<int64_t>() >= 0 ? it->get<uint64_t>() : 0;
}

bool BoolField(const json& record, const char* key) {
  if (!record.is_object()) return false;
  auto it = record.find(key);
  return it != record.end() && it->is_boolean() && it->get<bool>();
}

Result<json> ParseRecordLine(std::string_view line) {
  json record = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (record.is_discarded()) return Error::Msg("not JSON");
  if (!record.is_object()) return Error::Msg("not a JSON object");
  if (!record.contains("seq") || !record["seq"].is_number_unsigned())
    return Error::Msg("no unsigned \"seq\"");
  for (const char* key : {"time", "type", "tenant", "session", "cell"})
    if (!record.contains(key) || !record[key].is_string())
      return Error::Msg(std::string("no string \"") + key + "\"");
  if (!record.contains("prev") || !IsHash(record["prev"]))
    return Error::Msg("no 64-hex-digit \"prev\"");
  if (!record.contains("hash") || !IsHash(record["hash"]))
    return Error::Msg("no 64-hex-digit \"hash\"");
  return record;
}

}  // namespace mcpcell::audit
