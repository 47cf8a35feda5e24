// One HTTP request as the HttpServer's handlers see it, and the answer they build (internal
// to mcp/). The connection (http_connection.cc) fills an HttpRequest from the wire and
// writes the HttpResponse back; the handlers never see the socket, so a handler that may
// wait runs on the handler pool while the connection stays on its I/O strand.
// An answer is either a whole body (status, headers, body) or an SSE stream (`sse` set):
// the connection then writes the stream's events asynchronously as they come.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mcp {

struct HttpSessionEntry;
struct Stream;

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// Header names compare case-insensitively (RFC 9110).
bool HeaderNameEquals(const std::string& a, const std::string& b);

struct HttpRequest {
  std::string method;                                       // "GET", "POST", ...
  std::string path;                                         // without the query
  std::vector<std::pair<std::string, std::string>> params;  // query, decoded, in order
  HttpHeaders headers;
  std::string body;
  std::string remote_addr;  // "127.0.0.1", "::1"
  int remote_port = 0;

  bool has_header(const std::string& name) const;
  // The first value of `name`; "" when absent.
  std::string get_header_value(const std::string& name) const;
  // The first query parameter `name`; "" when absent.
  std::string get_param_value(const std::string& name) const;
};

// The stream an SSE answer writes: events of `stream` from seq `from`; `gen` is this
// connection's attachment (a resumption elsewhere displaces it). `preamble` goes first.
// When the last copy of `lease` goes (the answer ended, its connection died, or it was
// never sent), the attachment is undone (HttpServer::Impl::LeaveSse), exactly once.
struct SseAttachment {
  std::shared_ptr<HttpSessionEntry> entry;
  std::shared_ptr<Stream> stream;
  int from = 1;
  uint64_t gen = 0;
  std::string preamble;
  std::shared_ptr<void> lease;
};

struct HttpResponse {
  int status = 0;  // 0: no handler answered (the connection answers 500)
  HttpHeaders headers;
  std::string content_type;
  std::string body;
  std::optional<SseAttachment> sse;
  // For HttpServer::Impl::Answered: which handler answered ("mcp", "legacy", "route",
  // "none") and the authenticated tenant ("" before or without authentication).
  std::string route = "none";
  std::string tenant;

  void set_header(const std::string& name, const std::string& value) {
    headers.emplace_back(name, value);
  }
  void set_content(std::string content, const std::string& type) {
    body = std::move(content);
    content_type = type;
  }
};

}  // namespace mcp
