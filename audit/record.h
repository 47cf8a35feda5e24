// One audit record, its canonical JSON and its place in the hash chain.
//
// A record is one JSON object: `seq`, `time` (RFC 3339 UTC with milliseconds), `type`,
// `tenant`, `session`, `cell`, the type's own fields beside them, `prev` and `hash`.
// Canonical JSON is nlohmann's compact dump: object keys sorted by their UTF-8 bytes (the
// default std::map object), no whitespace, strings UTF-8 with only `"`, `\` and control
// characters escaped, invalid UTF-8 replaced by U+FFFD. `hash` is the hex SHA-256 of the
// canonical JSON of the record without `hash`, where `prev` is the previous record's hash
// (64 zeros for the first record of a trail). A trail file holds one canonical record per
// line. Pure functions; any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace mcpcell::audit {

inline constexpr std::string_view kZeroHash =
    "0000000000000000000000000000000000000000000000000000000000000000";

// The compact, key-sorted dump described above; never throws.
std::string CanonicalJson(const nlohmann::json& value);

// Lower-case hex SHA-256 of bytes (OpenSSL EVP).
std::string Sha256Hex(std::string_view bytes);

// The hash a record must carry: Sha256Hex(CanonicalJson(record without "hash")).
std::string RecordHash(const nlohmann::json& record);

// A record's canonical line (without newline) and its hash, made with one dump of the
// record: `lower` holds the record's keys that sort before "hash", `upper` those after it
// (neither holds "hash"). Equal to CanonicalJson of the record with its RecordHash.
struct SealedRecord {
  std::string hash;
  std::string line;
};
SealedRecord SealRecord(const nlohmann::json& lower, const nlohmann::json& upper);

// Whether `key` sorts before "hash" in canonical JSON (SealRecord's `lower`).
inline bool SortsBeforeHash(std::string_view key) { return key < std::string_view("hash"); }

// Whether the field names a type may use: not one of the record's own keys.
bool IsReservedField(std::string_view name);

// "2026-12-02T01:02:03.456Z"
std::string FormatTime(std::chrono::system_clock::time_point t);
// "20261202T010203Z", for file names.
std::string FormatCompactTime(std::chrono::system_clock::time_point t);

// Milliseconds since the epoch of an RFC 3339 / ISO 8601 time: "2026-12-02",
// "2026-12-02T01:02:03Z", "2026-12-02T01:02:03.5+02:00". A bad one is an error quoting it.
Result<int64_t> ParseTimeMs(std::string_view text);

// A record's field read without trusting its type (trail files are input): the string or
// non-negative integer at key, or "" / 0 when it is missing or of another type. Never throws.
std::string StringField(const nlohmann::json& record, const char* key);
uint64_t UintField(const nlohmann::json& record, const char* key);
bool BoolField(const nlohmann::json& record, const char* key);

// Parses one line of a trail file and checks the record's shape: an object with an unsigned
// `seq`, string `time`, `type`, `tenant`, `session`, `cell`, and 64-hex `prev` and `hash`.
// The error says what is wrong ("no \"seq\"", "not JSON").
Result<nlohmann::json> ParseRecordLine(std::string_view line);

}  // namespace mcpcell::audit
