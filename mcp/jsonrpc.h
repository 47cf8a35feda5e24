// JSON-RPC 2.0 framing: classify one parsed JSON value as a request, a notification or a
// response, or say why it is not a valid message; and build the outgoing messages.
// Pure functions, no state, no threads. The session (mcp/session.h) decides what to do.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "mcp/types.h"

namespace mcp::jsonrpc {

// Arrays and objects nested deeper than this are refused before parsing: copying,
// dumping or validating such a tree recurses once per level, and 100,000 levels (200 KB
// of text) overflow a thread's stack. MCP messages need a few dozen levels at most.
inline constexpr size_t kMaxNestingDepth = 256;
// Whether JSON text nests arrays and objects deeper than `limit` (strings skipped;
// no recursion, stops at the first level past the limit).
bool NestedDeeperThan(std::string_view text, size_t limit = kMaxNestingDepth);

// Parses message text. Malformed JSON or invalid UTF-8 -> RpcError{kParseError, ...};
// nesting deeper than kMaxNestingDepth -> RpcError{kInvalidRequest, ...}.
std::variant<Json, RpcError> Parse(std::string_view text);

struct Request {
  Json id;  // a string or an integer
  std::string method;
  Json params;  // object, array, or null when absent
};
struct Notification {
  std::string method;
  Json params;
};
struct Response {
  Json id;
  Json result;                    // when !error
  std::optional<RpcError> error;  // set for an error response
};
// A message that is not valid JSON-RPC. `id` is the request's id when it could be read
// (so the error response can echo it), else null. `answer` is false for a malformed
// response (no "method", a "result" or an "error"): JSON-RPC answers no response, and
// answering an error with an error could go back and forth with a peer that does the same;
// it is logged and dropped.
struct Invalid {
  Json id;
  RpcError error;
  bool answer = true;
};
using Message = std::variant<Request, Notification, Response, Invalid>;

// Classifies one JSON value (not an array: batches are split by the caller).
Message Classify(const Json& value);

// What can be read of a message too large or too deep to parse, from the first and last
// bytes of its text (a few KiB of each; they may overlap or be the whole text).
struct Peek {
  // The message's id: the top-level "id" member found scanning from the start (SDKs that
  // write the envelope first), else an "id" member that closes the object at the very end
  // (the TypeScript SDK writes it last). Null when neither is there or the value is not a
  // valid id.
  Json id;
  // The head shows a top-level "result" or "error" and no "method": a response. It is never
  // answered (its id is the peer's answer to a request of ours, and ids of both directions
  // overlap, so an error under it would fail one of the peer's own calls); the request of
  // ours it answers can be failed instead.
  bool response = false;
};
// `tail` must end where the text ends; pass "" when the text was cut off (at EOF), where
// the end proves nothing.
Peek PeekMessage(std::string_view head, std::string_view tail);
// How much of each end of an oversized message the transports keep for PeekMessage.
inline constexpr size_t kIdScanBytes = 4096;
// PeekMessage on the first and last kIdScanBytes of a whole text.
Peek PeekMessageIn(std::string_view text);

// Valid ids are strings and integers (MCP forbids null; fractions are refused).
bool IsValidId(const Json& id);
// Canonical text of an id, used as a map key ("\"a\"" and "1" stay distinct).
std::string IdKey(const Json& id);

Json MakeResult(const Json& id, Json result);
Json MakeError(const Json& id, const RpcError& error);
Json MakeNotification(std::string_view method, Json params);  // params null -> omitted
Json MakeRequest(const Json& id, std::string_view method, Json params);

}  // namespace mcp::jsonrpc
