#include "tools/redaction.h"

#include <algorithm>
#include <cctype>
#include <set>

#include "base/base64.h"

namespace mcpcell::tools {
namespace {

std::string UrlSafe(std::string b64) {
  for (char& c : b64) c = c == '+' ? '-' : c == '/' ? '_' : c;
  return b64;
}

// b64 with a line break after every `width` characters, as `base64` (76) and PEM (64) print
// it; "" when it fits on one line.
std::string Wrapped(const std::string& b64, size_t width) {
  if (b64.size() <= width) return "";
  std::string out;
  for (size_t at = 0; at < b64.size(); at += width) {
    if (at > 0) out += '\n';
    out += b64.substr(at, width);
  }
  return out;
}

std::string Unpadded(std::string b64) {
  while (!b64.empty() && b64.back() == '=') b64.pop_back();
  return b64;
}

bool Unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

// RFC 3986 percent-encoding of every byte but the unreserved ones; `plus_for_space`: the
// form-body variant.
std::string PercentEncode(std::string_view value, const char* hex, bool plus_for_space) {
  std::string out;
  for (unsigned char c : value) {
    if (Unreserved(c)) {
      out.push_back(static_cast<char>(c));
    } else if (c == ' ' && plus_for_space) {
      out.push_back('+');
    } else {
      out.push_back('%');
      out.push_back(hex[c >> 4]);
      out.push_back(hex[c & 15]);
    }
  }
  return out;
}

// The value as the contents of a JSON string (without the quotes).
std::string JsonEscaped(const std::string& value, bool ensure_ascii) {
  std::string dumped =
      mcp::Json(value).dump(-1, ' ', ensure_ascii, mcp::Json::error_handler_t::replace);
  return dumped.substr(1, dumped.size() - 2);
}

std::string ReplaceAll(std::string s, std::string_view from, std::string_view to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

}  // namespace

Redactor::Redactor(const SecretValues& secrets) : first_byte_(256) {
  for (const auto& [name, value] : secrets) {
    if (value.size() < kMinRedactedBytes) continue;
    AddForms(name, value);
  }
  std::stable_sort(needles_.begin(), needles_.end(),
                   [](const Needle& a, const Needle& b) { return a.from.size() > b.from.size(); });
  // Duplicates (two secrets with one value, forms that coincide): the first one names it.
  std::set<std::string> seen;
  std::erase_if(needles_, [&seen](const Needle& n) { return !seen.insert(n.from).second; });
  for (size_t i = 0; i < needles_.size(); ++i)
    first_byte_[static_cast<unsigned char>(needles_[i].from[0])].push_back(i);
  longest_ = needles_.empty() ? 0 : needles_.front().from.size();
}

void Redactor::AddForms(const std::string& name, const std::string& value) {
  size_t label = labels_.size();
  labels_.push_back("[secret " + name + "]");
  Add(value, label);
  std::string b64 = Base64Encode(value);
  for (const std::string& form : {b64, UrlSafe(b64)}) {
    Add(form, label);
    Add(Unpadded(form), label);
  }
  // A long value's base64 as line-wrapping encoders print it, starting a line.
  for (size_t width : {76, 64}) Add(Wrapped(b64, width), label);
  // Inside a longer base64 text the value starts at one of three byte alignments; the
  // groups made only of its bytes encode the same whatever surrounds them. At least two
  // groups (8 characters), or chance matches would be too likely.
  for (size_t skip = 0; skip < 3 && skip < value.size(); ++skip) {
    size_t whole = (value.size() - skip) / 3 * 3;
    if (whole < 6) continue;
    std::string core = Base64Encode(std::string_view(value).substr(skip, whole));
    Add(core, label);
    Add(UrlSafe(core), label);
  }
  Add(PercentEncode(value, "0123456789ABCDEF", false), label);
  Add(PercentEncode(value, "0123456789abcdef", false), label);
  Add(PercentEncode(value, "0123456789ABCDEF", true), label);
  Add(PercentEncode(value, "0123456789abcdef", true), label);
  for (bool ascii : {false, true}) {
    std::string json = JsonEscaped(value, ascii);
    Add(json, label);
    Add(ReplaceAll(json, "/", "\\/"), label);  // encoders that escape the solidus
  }
}

void Redactor::Add(std::string form, size_t label) {
  if (form.size() < kMinRedactedBytes) return;
  needles_.push_back({std::move(form), label});
}

const Redactor::Needle* Redactor::MatchAt(std::string_view text, size_t pos) const {
  for (size_t i : first_byte_[static_cast<unsigned char>(text[pos])]) {
    const Needle& n = needles_[i];
    if (text.size() - pos >= n.from.size() && text.compare(pos, n.from.size(), n.from) == 0)
      return &n;
  }
  return nullptr;
}

size_t Redactor::Scan(std::string_view text, bool final, std::string* out) const {
  const size_t n = text.size();
  if (needles_.empty()) {
    out->append(text);
    return n;
  }
  // Not final: a needle starting at i is complete only when i + longest_ <= n.
  auto complete = [&](size_t i) { return final || i + longest_ <= n; };
  size_t i = 0, emitted = 0;
  while (i < n && complete(i)) {
    const Needle* m = MatchAt(text, i);
    if (!m) {
      ++i;
      continue;
    }
    // Overlapping occurrences extend the span, so no part of either value is left.
    size_t end = i + m->from.size();
    std::vector<size_t> labels{m->label};
    bool undecided = false;
    for (size_t j = i + 1; j < end; ++j) {
      if (!complete(j)) {
        undecided = true;
        break;
      }
      const Needle* o = MatchAt(text, j);
      if (!o || j + o->from.size() <= end) continue;
      end = j + o->from.size();
      if (std::find(labels.begin(), labels.end(), o->label) == labels.end())
        labels.push_back(o->label);
    }
    if (undecided) break;
    out->append(text.substr(emitted, i - emitted));
    for (size_t l : labels) out->append(labels_[l]);
    i = emitted = end;
  }
  out->append(text.substr(emitted, i - emitted));
  return i;
}

std::string Redactor::Redact(std::string_view text) const {
  std::string out;
  out.reserve(text.size());
  Scan(text, /*final=*/true, &out);
  return out;
}

std::shared_ptr<const Redactor> MakeRedactor(const SecretValuesFn& values,
                                             const std::string& session_key) {
  if (!values) return nullptr;
  auto redactor = std::make_shared<const Redactor>(values(session_key));
  if (redactor->empty()) return nullptr;
  return redactor;
}

namespace {
thread_local CallRedactorScope* current_scope = nullptr;
}  // namespace

CallRedactorScope::CallRedactorScope(const SecretValuesFn& values, std::string session_key)
    : values_(values), session_key_(std::move(session_key)), outer_(current_scope) {
  current_scope = this;
}

CallRedactorScope::~CallRedactorScope() { current_scope = outer_; }

std::shared_ptr<const Redactor> CallRedactorScope::Get() {
  if (!redactor_) redactor_ = MakeRedactor(values_, session_key_);
  return *redactor_;
}

CallRedactorScope* CallRedactorScope::Current() { return current_scope; }

std::string StreamRedactor::Feed(std::string_view chunk) {
  if (!redactor_) return std::string(chunk);
  carry_.append(chunk);
  std::string out;
  size_t consumed = redactor_->Scan(carry_, /*final=*/false, &out);
  carry_.erase(0, consumed);
  return out;
}

std::string StreamRedactor::Finish() {
  if (!redactor_) return "";
  std::string out;
  redactor_->Scan(carry_, /*final=*/true, &out);
  carry_.clear();
  return out;
}

namespace {

void RedactStrings(mcp::Json& json, const Redactor& redactor) {
  if (json.is_string()) {
    json = redactor.Redact(json.get_ref<const std::string&>());
  } else if (json.is_array() || json.is_object()) {
    for (auto& item : json) RedactStrings(item, redactor);
  }
}

}  // namespace

mcp::ToolResult RedactResult(mcp::ToolResult result, const Redactor* redactor) {
  if (!redactor) return result;
  // Content items: only their text ("type" and the like are protocol, image data is not
  // text a program printed).
  for (auto& item : result.content) {
    if (!item.is_object()) continue;
    if (auto t = item.find("text"); t != item.end() && t->is_string()) RedactStrings(*t, *redactor);
    if (auto r = item.find("resource"); r != item.end() && r->is_object()) {
      if (auto t = r->find("text"); t != r->end() && t->is_string()) RedactStrings(*t, *redactor);
    }
  }
  RedactStrings(result.structured_content, *redactor);
  return result;
}

}  // namespace mcpcell::tools
