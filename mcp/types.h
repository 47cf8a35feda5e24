// Vocabulary shared by every layer of the MCP library: the JSON type, JSON-RPC error codes,
// the error value a handler returns or throws, a registration Status, and the syslog-style
// levels used both for MCP `logging/setLevel` and for the server's own diagnostics.
// Header-only apart from the level conversions in types.cc.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace mcp {

using Json = nlohmann::json;

// JSON-RPC 2.0 error codes, plus the MCP ones.
inline constexpr int kParseError = -32700;      // malformed JSON, invalid UTF-8
inline constexpr int kInvalidRequest = -32600;  // bad envelope, duplicate id, too big, batch
                                                // refused, request before initialize
inline constexpr int kMethodNotFound = -32601;
inline constexpr int kInvalidParams = -32602;  // also: unknown tool, bad cursor
inline constexpr int kInternalError = -32603;  // handler threw / dropped its reply
inline constexpr int kResourceNotFound = -32002;
inline constexpr int kRequestTimeout = -32001;    // server->client request got no answer in time
inline constexpr int kConnectionClosed = -32000;  // server->client request lost with the session
inline constexpr int kRequestCancelled = -32800;  // server->client request abandoned (cancelled)

// The four protocol versions this library speaks, oldest first; the last is the latest.
inline constexpr const char* kProtocolVersions[] = {"2024-11-05", "2025-03-26", "2025-06-18",
                                                    "2025-11-25"};
inline constexpr const char* kLatestProtocolVersion = "2025-11-25";

// A JSON-RPC error object: {"code", "message", "data"?}.
struct RpcError {
  int code = kInternalError;
  std::string message{};
  Json data{};  // null = absent

  Json ToJson() const;
};

// Thrown by a synchronous handler to answer with a specific JSON-RPC error. Any other
// exception from a handler becomes -32603 (or, for tools/call, an isError tool result).
class RpcException : public std::runtime_error {
 public:
  RpcException(int code, std::string message, Json data = nullptr)
      : std::runtime_error(message), error_{code, std::move(message), std::move(data)} {}
  explicit RpcException(RpcError error)
      : std::runtime_error(error.message), error_(std::move(error)) {}
  const RpcError& error() const { return error_; }

 private:
  RpcError error_;
};

// Result of a registration: ok, or the reason it was refused.
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message)); }
  bool ok() const { return !message_.has_value(); }
  explicit operator bool() const { return ok(); }
  const std::string& message() const {
    static const std::string kEmpty;
    return message_ ? *message_ : kEmpty;
  }

 private:
  explicit Status(std::string message) : message_(std::move(message)) {}
  std::optional<std::string> message_;
};

// RFC 5424 severities, lowest first, as MCP names them. kOff only for the local logger.
enum class LogLevel {
  kDebug,
  kInfo,
  kNotice,
  kWarning,
  kError,
  kCritical,
  kAlert,
  kEmergency,
  kOff
};

std::string_view LogLevelName(LogLevel level);  // "debug", ..., "emergency", "off"
// Parses "debug".."emergency" (and "off" when allow_off); nullopt otherwise.
std::optional<LogLevel> ParseLogLevel(std::string_view name, bool allow_off = false);

}  // namespace mcp
