// Redaction of secret values (issue 26, "Everywhere"): what the tools show of a cell (tool
// results, progress notifications, the full outputs saved in the cell, messages to the
// client) never carries the real value of a secret the session holds. Each value, and the
// forms a program is likely to print it in, becomes `[secret NAME]`:
//   - the value itself;
//   - its base64: standard and URL-safe alphabets, with and without padding, and the part
//     of it that is the same wherever the value sits inside a longer base64 text (the
//     groups that hold only the value's bytes, at each of the three byte alignments), and
//     the standard form wrapped at 76 (`base64`) and 64 (PEM) columns;
//   - percent-encoded (RFC 3986: all but unreserved characters; upper and lower case hex;
//     also with '+' for a space as in form bodies);
//   - JSON-escaped (as a JSON string's contents, with and without \uXXXX for non-ASCII).
// Values shorter than kMinRedactedBytes are not redacted: a 1-3 byte value would match
// everywhere and make every output unreadable. Where occurrences overlap, the whole span is
// replaced, so no part of either value is left.
//
// The Redactor comes from the serve side through ToolEnv::secret_values (SecretValuesFn:
// the session key to its secrets' names and values); empty = nothing to redact.
// Threading: a Redactor is immutable and may be shared; a StreamRedactor belongs to one
// stream and one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "mcp/features.h"

namespace mcpcell::tools {

// (secret name, real value) pairs of one session.
using SecretValues = std::vector<std::pair<std::string, std::string>>;
using SecretValuesFn = std::function<SecretValues(const std::string& session_key)>;

inline constexpr size_t kMinRedactedBytes = 4;

class Redactor {
 public:
  explicit Redactor(const SecretValues& secrets);
  bool empty() const { return needles_.empty(); }
  // The longest form searched for (a stream holds back one byte less).
  size_t longest() const { return longest_; }
  std::string Redact(std::string_view text) const;

  // text[0, consumed) redacted (appended to *out). Unless `final`, stops early where a
  // match could still extend past the end of `text`; the caller keeps text[consumed, end).
  size_t Scan(std::string_view text, bool final, std::string* out) const;

 private:
  struct Needle {
    std::string from;
    size_t label;  // index into labels_
  };
  void AddForms(const std::string& name, const std::string& value);
  void Add(std::string form, size_t label);
  // The longest needle that matches at text[pos]; nullptr if none.
  const Needle* MatchAt(std::string_view text, size_t pos) const;

  std::vector<std::string> labels_;              // "[secret NAME]"
  std::vector<Needle> needles_;                  // longest first
  std::vector<std::vector<size_t>> first_byte_;  // 256 lists of needle indexes
  size_t longest_ = 0;
};

// The session's Redactor, or nullptr when it holds no value to redact.
std::shared_ptr<const Redactor> MakeRedactor(const SecretValuesFn& values,
                                             const std::string& session_key);

// The redactor of the tool call running on this thread, so that a call reads its session's
// secret values once: cell_tools.cc's wrapper holds a CallRedactorScope around the tool's
// handler; the first to need the redactor (RunInCell, at the moment it always made it, after
// the call's env-mode secrets are granted; else the wrapper, after the handler) makes it
// with MakeRedactor and the scope keeps it for the other. Scopes nest; one thread, one call.
class CallRedactorScope {
 public:
  CallRedactorScope(const SecretValuesFn& values, std::string session_key);
  ~CallRedactorScope();
  CallRedactorScope(const CallRedactorScope&) = delete;
  CallRedactorScope& operator=(const CallRedactorScope&) = delete;

  // The call's redactor (null when the session holds no value), made on first use.
  std::shared_ptr<const Redactor> Get();
  // The innermost scope open on this thread; nullptr when none is.
  static CallRedactorScope* Current();

 private:
  const SecretValuesFn& values_;
  const std::string session_key_;
  std::optional<std::shared_ptr<const Redactor>> redactor_;
  CallRedactorScope* outer_;
};

// A Redactor over a stream that arrives in chunks: holds back the bytes that may still be
// the start of a value (at most longest() - 1, more only inside overlapping matches), so a
// value split across chunks is still found. A null Redactor passes everything through.
class StreamRedactor {
 public:
  explicit StreamRedactor(std::shared_ptr<const Redactor> redactor)
      : redactor_(std::move(redactor)) {}
  // What is safe to emit now.
  std::string Feed(std::string_view chunk);
  // The rest, at the end of the stream.
  std::string Finish();

 private:
  std::shared_ptr<const Redactor> redactor_;
  std::string carry_;
};

// Every string in the result (text content, structuredContent strings at any depth)
// redacted; a null Redactor leaves it as it is.
mcp::ToolResult RedactResult(mcp::ToolResult result, const Redactor* redactor);

}  // namespace mcpcell::tools
