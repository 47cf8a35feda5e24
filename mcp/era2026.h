// The 2026-07-28 era of MCP beside today's: the wire rules a stateless request obeys.
//
// One Server serves both eras. A client of today's four versions sends `initialize` and
// gets a protocol session, as before. A 2026-07-28 client sends no initialize: each request
// carries `_meta["io.modelcontextprotocol/protocolVersion"]`, `.../clientCapabilities` and
// (optionally) `.../clientInfo`. The first request of a connection decides its era (one stdio
// client speaks one era; on HTTP every new-era POST is a connection of its own).
//
// How an embedder tells the era: Session::protocol_version() is "2026-07-28" (kVersion) for
// a new-era session, one of kProtocolVersions after initialize, "" before either. A new-era
// session is never initialized(): ServerOptions::on_session_started / on_session_ended are not
// called for it (on HTTP it lives for one request); its client_capabilities() and
// client_info() are those of the request being served (for stdio: the latest request).
//
// This header holds the constants and pure functions (request_meta.cc); the session applies
// them (session_intake.cc), discover.cc answers server/discover, http_era2026.cc serves the
// stateless HTTP POST. Pure functions: any thread.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "mcp/types.h"

namespace mcp::era2026 {

inline constexpr const char* kVersion = "2026-07-28";
// The versions served without initialize (server/discover's supportedVersions).
inline constexpr const char* kStatelessVersions[] = {"2026-07-28"};

inline constexpr const char* kMetaProtocolVersion = "io.modelcontextprotocol/protocolVersion";
inline constexpr const char* kMetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities";
inline constexpr const char* kMetaClientInfo = "io.modelcontextprotocol/clientInfo";
inline constexpr const char* kMetaLogLevel = "io.modelcontextprotocol/logLevel";
inline constexpr const char* kMetaServerInfo = "io.modelcontextprotocol/serverInfo";

// Errors of the new era (the 2026-07-28 schema).
inline constexpr int kHeaderMismatch = -32020;              // HTTP header vs body
inline constexpr int kMissingClientCapability = -32021;     // data.requiredCapabilities
inline constexpr int kUnsupportedProtocolVersion = -32022;  // data.supported, data.requested

// What a new-era request's `_meta` says about its client.
struct RequestMeta {
  std::string protocol_version;
  Json client_capabilities = Json::object();
  Json client_info;                   // null when the client sent none (it is a SHOULD)
  std::optional<LogLevel> log_level;  // none: the request gets no notifications/message
};

// Whether a request that arrives before any initialize speaks the new era: it carries a
// `_meta` protocol version, or asks server/discover.
bool StartsNewEra(const std::string& method, const Json& params);

// Reads and checks params._meta: missing or malformed fields are kInvalidParams naming the
// field; a version not in kStatelessVersions is kUnsupportedProtocolVersion with
// data {supported, requested}.
std::variant<RequestMeta, RpcError> ParseRequestMeta(const Json& params);

// Methods of today's era that 2026-07-28 removed (answered -32601 there): initialize, ping,
// logging/setLevel, resources/subscribe, resources/unsubscribe.
bool IsRemovedMethod(const std::string& method);

// Adds what every new-era result carries: resultType "complete" (unless the handler set
// one), and for cacheable results (lists, resources/read, server/discover) ttlMs and
// cacheScope unless set.
void DecorateResult(const std::string& method, Json& result);

// The HTTP status of a new-era JSON-RPC response: 404 for -32601, 400 for the request's own
// faults (-32600, -32602, -32020..-32022), 200 otherwise (results and handler errors).
int HttpStatusOf(const Json& response);

// The capability `name` (e.g. "sampling") is missing from `client_capabilities`: the
// kMissingClientCapability error whose data.requiredCapabilities is {name: {}}.
RpcError MissingCapability(const std::string& name, const std::string& why);

}  // namespace mcp::era2026
