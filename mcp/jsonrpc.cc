#include "mcp/jsonrpc.h"

#include <algorithm>

namespace mcp::jsonrpc {
namespace {
Invalid Bad(Json id, std::string message) {
  return Invalid{std::move(id), RpcError{kInvalidRequest, "Invalid Request: " + message, nullptr}};
}
// A malformed response: refused, but not answered (Invalid::answer).
Invalid BadResponse(Json id, std::string message) {
  Invalid bad = Bad(std::move(id), "malformed response: " + std::move(message));
  bad.answer = false;
  return bad;
}
}  // namespace

bool NestedDeeperThan(std::string_view text, size_t limit) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > limit) return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

std::variant<Json, RpcError> Parse(std::string_view text) {
  // Invalid text stays a parse error whatever its depth (accept() does not recurse).
  if (NestedDeeperThan(text) && Json::accept(text.begin(), text.end())) {
    return RpcError{kInvalidRequest,
                    "Invalid Request: JSON nested deeper than " + std::to_string(kMaxNestingDepth) +
                        " levels of arrays and objects",
                    nullptr};
  }
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::exception& e) {
    // e.what() reads "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    // Not only parse_error: a number too large for a double ("1e400") is out_of_range.406,
    // which, uncaught, would end the reader thread and the whole server (found by fuzzing).
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos) what = what.substr(pos + 2);
    return RpcError{kParseError, "Parse error: " + what, nullptr};
  }
}

bool IsValidId(const Json& id) {
  return id.is_string() || id.is_number_integer() || id.is_number_unsigned();
}

std::string IdKey(const Json& id) { return id.dump(); }

namespace {
constexpr size_t kNpos = std::string_view::npos;

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// `text` as an id (an integer or a string), else null.
Json ScalarId(std::string_view text) {
  auto parsed = Parse(text);
  if (auto* value = std::get_if<Json>(&parsed); value && IsValidId(*value)) return *value;
  return nullptr;
}

// Past the closing quote of the string that opens at s[i], or kNpos when it is cut off.
size_t SkipString(std::string_view s, size_t i) {
  for (++i; i < s.size(); ++i) {
    if (s[i] == '\\') {
      ++i;
    } else if (s[i] == '"') {
      return i + 1;
    }
  }
  return kNpos;
}

// What the members of the top-level object show, walked from the start (stepping over
// nested values) until the text ends or is cut off.
struct HeadScan {
  Json id;                   // the first top-level "id", when it could be read
  bool has_method = false;   // a top-level "method" member
  bool has_outcome = false;  // a top-level "result" or "error" member
};

HeadScan ScanHead(std::string_view s) {
  HeadScan out;
  size_t i = 0;
  auto skip_space = [&] {
    while (i < s.size() && IsSpace(s[i])) ++i;
  };
  skip_space();
  if (i >= s.size() || s[i] != '{') return out;
  ++i;
  int depth = 1;
  bool at_key = true;  // the next string at depth 1 is a member's name
  while (i < s.size()) {
    const char c = s[i];
    if (c == '"') {
      const size_t end = SkipString(s, i);
      if (end == kNpos) return out;
      const bool is_key = depth == 1 && at_key;
      const std::string_view key = s.substr(i, end - i);
      i = end;
      if (!is_key) continue;
      at_key = false;
      skip_space();
      if (i >= s.size() || s[i] != ':') return out;
      ++i;
      skip_space();
      if (key == "\"method\"") out.has_method = true;
      if (key == "\"result\"" || key == "\"error\"") out.has_outcome = true;
      // Only a scalar is read here; an object or array (not an id anyway) is stepped over
      // by the walk like any other value, so its members are not taken for top-level ones.
      if (key != "\"id\"" || !out.id.is_null() || i >= s.size() || s[i] == '{' || s[i] == '[')
        continue;
      const size_t start = i;
      if (i < s.size() && s[i] == '"') {
        const size_t value_end = SkipString(s, i);
        if (value_end == kNpos) return out;
        i = value_end;
      } else {
        while (i < s.size() && s[i] != ',' && s[i] != '}' && !IsSpace(s[i])) ++i;
        if (i >= s.size()) return out;  // cut off: the number may go on
      }
      out.id = ScalarId(s.substr(start, i - start));
      continue;
    }
    if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return out;
    } else if (c == ',' && depth == 1) {
      at_key = true;
    }
    ++i;
  }
  return out;
}

// `"id": <integer or plain string>}` at the very end: the last '}' of valid JSON text
// closes the top-level object, so a scalar member right before it is one of its own.
Json IdFromTail(std::string_view s) {
  size_t e = s.size();
  auto skip_space = [&] {
    while (e > 0 && IsSpace(s[e - 1])) --e;
  };
  skip_space();
  if (e == 0 || s[e - 1] != '}') return nullptr;
  --e;
  skip_space();
  if (e == 0) return nullptr;
  const size_t value_end = e;
  if (s[e - 1] == '"') {
    if (e < 2) return nullptr;
    const size_t open = s.rfind('"', e - 2);
    if (open == kNpos || (open > 0 && s[open - 1] == '\\')) return nullptr;
    if (s.substr(open, value_end - open).find('\\') != kNpos) return nullptr;
    e = open;
  } else {
    while (e > 0 && ((s[e - 1] >= '0' && s[e - 1] <= '9') || s[e - 1] == '-')) --e;
    if (e == value_end) return nullptr;
  }
  const size_t value_start = e;
  skip_space();
  if (e == 0 || s[e - 1] != ':') return nullptr;
  --e;
  skip_space();
  if (e < 4 || s.substr(e - 4, 4) != "\"id\"") return nullptr;
  e -= 4;
  skip_space();
  if (e == 0 || (s[e - 1] != ',' && s[e - 1] != '{')) return nullptr;
  return ScalarId(s.substr(value_start, value_end - value_start));
}
}  // namespace

Peek PeekMessage(std::string_view head, std::string_view tail) {
  HeadScan scan = ScanHead(head);
  const bool response = scan.has_outcome && !scan.has_method;
  if (!scan.id.is_null()) return Peek{std::move(scan.id), response};
  return Peek{IdFromTail(tail), response};
}

Peek PeekMessageIn(std::string_view text) {
  return PeekMessage(text.substr(0, kIdScanBytes),
                     text.substr(text.size() - std::min(text.size(), kIdScanBytes)));
}

namespace {
// No "method", and a "result" or an "error". An error response may have id null (the
// peer could not read the id of what it answers); such a response matches no request.
Message ClassifyResponse(const Json& value) {
  auto id_it = value.find("id");
  auto version = value.find("jsonrpc");
  auto error = value.find("error");
  const bool has_result = value.contains("result"), has_error = error != value.end();
  if (version == value.end() || *version != "2.0") {
    return BadResponse(nullptr, "\"jsonrpc\" must be \"2.0\"");
  }
  if (has_result && has_error) {
    return BadResponse(nullptr, "it has both \"result\" and \"error\"");
  }
  if (id_it == value.end()) return BadResponse(nullptr, "it has no \"id\"");
  if (!IsValidId(*id_it) && !(has_error && id_it->is_null())) {
    return BadResponse(nullptr, "\"id\" must be a string or an integer (or null for an error)");
  }
  Response response{*id_it, nullptr, std::nullopt};
  if (has_result) {
    response.result = value["result"];
  } else {
    const Json& e = *error;
    if (!e.is_object() || !e.contains("code") || !e["code"].is_number_integer() ||
        !e.contains("message") || !e["message"].is_string()) {
      return BadResponse(nullptr,
                         "\"error\" must be an object with an integer code and a string message");
    }
    response.error = RpcError{e["code"].get<int>(), e["message"].get<std::string>(),
                              e.contains("data") ? e["data"] : Json()};
  }
  return response;
}
}  // namespace

Message Classify(const Json& value) {
  if (!value.is_object()) return Bad(nullptr, "a message must be a JSON object");
  auto id_it = value.find("id");
  bool has_id = id_it != value.end();
  Json echo_id = has_id && IsValidId(*id_it) ? *id_it : Json();
  if (!value.contains("method") && (value.contains("result") || value.contains("error"))) {
    return ClassifyResponse(value);
  }
  auto version = value.find("jsonrpc");
  if (version == value.end()) return Bad(echo_id, "missing \"jsonrpc\": \"2.0\"");
  if (*version != "2.0") return Bad(echo_id, "\"jsonrpc\" must be \"2.0\", got " + version->dump());
  if (has_id && !IsValidId(*id_it)) {
    return Bad(nullptr, "\"id\" must be a string or an integer, got " + id_it->dump());
  }

  auto method = value.find("method");
  if (method != value.end()) {
    if (!method->is_string()) return Bad(echo_id, "\"method\" must be a string");
    Json params;
    if (auto p = value.find("params"); p != value.end()) {
      if (!p->is_object() && !p->is_array()) {
        return Bad(echo_id, "\"params\" must be an object or an array");
      }
      params = *p;
    }
    if (has_id) return Request{*id_it, method->get<std::string>(), std::move(params)};
    return Notification{method->get<std::string>(), std::move(params)};
  }

  return Bad(echo_id, "missing \"method\"");
}

Json MakeResult(const Json& id, Json result) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"result", std::move(result)}};
}

Json MakeError(const Json& id, const RpcError& error) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", error.ToJson()}};
}

Json MakeNotification(std::string_view method, Json params) {
  Json j = {{"jsonrpc", "2.0"}, {"method", method}};
  if (!params.is_null()) j["params"] = std::move(params);
  return j;
}

Json MakeRequest(const Json& id, std::string_view method, Json params) {
  Json j = {{"jsonrpc", "2.0"}, {"id", id}, {"method", method}};
  if (!params.is_null()) j["params"] = std::move(params);
  return j;
}

}  // namespace mcp::jsonrpc
