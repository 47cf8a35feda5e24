// Strict reading of the archive helper's JSON lines (archive_report.h).
#include "tools/archive_report.h"

#include <initializer_list>
#include <nlohmann/json.hpp>

namespace mcpcell::tools {
namespace {

using Json = nlohmann::json;

// The object on line `n`, with only `keys` allowed.
Result<Json> ParseLine(std::string_view line, size_t n, std::initializer_list<const char*> keys) {
  Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
  const std::string where = "archive helper output, line " + std::to_string(n);
  if (!j.is_object()) return Error::Msg(where + ": not a JSON object");
  for (const auto& [key, value] : j.items()) {
    bool known = false;
    for (const char* k : keys) known = known || key == k;
    if (!known) return Error::Msg(where + ": unknown field \"" + key + "\"");
  }
  return j;
}

Result<std::string> StringField(const Json& j, const char* key, size_t n) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string())
    return Error::Msg("archive helper output, line " + std::to_string(n) + ": \"" + key +
                      "\" is not a string");
  return it->get<std::string>();
}

Result<uint64_t> CountField(const Json& j, const char* key, size_t n) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_unsigned())
    return Error::Msg("archive helper output, line " + std::to_string(n) + ": \"" + key +
                      "\" is not a count");
  return it->get<uint64_t>();
}

// Splits on '\n', dropping a final empty piece.
std::vector<std::string_view> Lines(std::string_view text) {
  std::vector<std::string_view> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    out.push_back(text.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return out;
}

Result<ArchiveEntryReport> EntryLine(const Json& j, size_t n) {
  ArchiveEntryReport e;
  auto kind = StringField(j, "kind", n);
  if (!kind) return kind.error();
  auto path = StringField(j, "path", n);
  if (!path) return path.error();
  auto size = CountField(j, "size", n);
  if (!size) return size.error();
  e.kind = *kind;
  e.path = *path;
  e.size = *size;
  static const char* kKinds[] = {"file", "directory", "symlink", "hardlink", "refused"};
  bool known = false;
  for (const char* k : kKinds) known = known || e.kind == k;
  if (!known)
    return Error::Msg("archive helper output, line " + std::to_string(n) + ": unknown kind \"" +
                      e.kind + "\"");
  if (e.kind == "refused") {
    auto reason = StringField(j, "reason", n);
    if (!reason) return reason.error();
    e.reason = *reason;
  }
  return e;
}

}  // namespace

Result<UnpackOutcome> ParseUnpackReport(std::string_view text) {
  UnpackOutcome out;
  size_t n = 0;
  for (std::string_view line : Lines(text)) {
    ++n;
    auto j = ParseLine(line, n,
                       {"kind", "path", "size", "reason", "done", "entries", "refused", "bytes",
                        "stopped", "error"});
    if (!j) return j.error();
    if (j->contains("error")) {
      auto message = StringField(*j, "error", n);
      if (!message) return message.error();
      return Error::Msg(*message);
    }
    if (j->contains("done")) {
      auto entries = CountField(*j, "entries", n);
      auto refused = CountField(*j, "refused", n);
      auto bytes = CountField(*j, "bytes", n);
      if (!entries || !refused || !bytes)
        return (!entries ? entries : !refused ? refused : bytes).error();
      auto stopped = j->find("stopped");
      if (stopped == j->end() || !stopped->is_boolean())
        return Error::Msg("archive helper output, line " + std::to_string(n) +
                          ": \"stopped\" is not a boolean");
      out.entries = *entries;
      out.refused_count = *refused;
      out.bytes = *bytes;
      out.stopped = stopped->get<bool>();
      return out;
    }
    auto entry = EntryLine(*j, n);
    if (!entry) return entry.error();
    (entry->kind == "refused" ? out.refused : out.extracted).push_back(std::move(*entry));
  }
  return Error::Msg("the archive helper ended without its summary line (after " +
                    std::to_string(n) + " lines): it was killed or its output was cut");
}

Result<PackOutcome> ParsePackReport(std::string_view stderr_text) {
  std::vector<std::string_view> lines = Lines(stderr_text);
  if (lines.empty()) return Error::Msg("the archive helper printed no summary");
  const size_t n = lines.size();
  auto j =
      ParseLine(lines.back(), n, {"done", "entries", "bytes", "skipped_count", "skipped", "error"});
  if (!j) return j.error();
  if (j->contains("error")) {
    auto message = StringField(*j, "error", n);
    if (!message) return message.error();
    return Error::Msg(*message);
  }
  PackOutcome out;
  auto entries = CountField(*j, "entries", n);
  auto bytes = CountField(*j, "bytes", n);
  auto skipped_count = CountField(*j, "skipped_count", n);
  if (!entries || !bytes || !skipped_count)
    return (!entries ? entries : !bytes ? bytes : skipped_count).error();
  out.entries = *entries;
  out.bytes = *bytes;
  out.skipped_count = *skipped_count;
  auto skipped = j->find("skipped");
  if (skipped == j->end() || !skipped->is_array() || skipped->size() > 100)
    return Error::Msg("archive helper output: \"skipped\" is not a list of at most 100 names");
  for (const Json& s : *skipped) {
    if (!s.is_string()) return Error::Msg("archive helper output: \"skipped\" holds a non-string");
    out.skipped.push_back(s.get<std::string>());
  }
  return out;
}

}  // namespace mcpcell::tools
