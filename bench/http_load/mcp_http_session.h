// One MCP client session over Streamable HTTP, for the load generator: initialize,
// notifications/initialized, tools/call, DELETE. Runs as C++20 coroutines on one
// io_context thread (not thread-safe: every call on the session's io_context).
//
// Each request takes an idle keep-alive connection of the session or opens a new one, so a
// session may have several requests in flight (open-loop mode). Answers are read whole and
// parsed as JSON or as an SSE stream (the event whose JSON-RPC id matches). A request on a
// reused connection that the server had already closed is sent once more on a new one.
// Every failure comes back as a short error kind ("connect", "http 429", "timeout",
// "jsonrpc -32603", "tool isError", ...) that the report counts.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace http_load {

// http://host:port/path, resolved once. Throws std::invalid_argument naming the problem.
struct Endpoint {
  std::string host_header;  // host:port
  std::string target;       // path
  boost::asio::ip::tcp::resolver::results_type addresses;
};
Endpoint ResolveUrl(boost::asio::io_context& io, const std::string& url);

class McpSession {
 public:
  McpSession(boost::asio::io_context& io, const Endpoint& endpoint,
             std::chrono::milliseconds timeout);
  ~McpSession();
  McpSession(const McpSession&) = delete;
  McpSession& operator=(const McpSession&) = delete;

  // initialize and notifications/initialized; "" on success, else the error kind.
  boost::asio::awaitable<std::string> Open();
  // tools/call run_command {command}; "" when the tool ran and isError was false.
  boost::asio::awaitable<std::string> RunCommand(const std::string& command);
  // DELETE of the session (best effort: the result is not counted).
  boost::asio::awaitable<void> Close();

  bool open() const { return !session_id_.empty(); }

 private:
  struct Connection;
  struct Answer {
    std::string error;
    nlohmann::json message;  // the JSON-RPC answer (null for a notification's 202)
  };
  boost::asio::awaitable<Answer> Post(const std::string& body, const std::string& id_key);
  boost::asio::awaitable<Answer> Attempt(Connection& c, bool reused, const std::string& body,
                                         const std::string& id_key, bool* retry, bool* keep_alive);

  boost::asio::io_context& io_;
  const Endpoint& endpoint_;
  std::chrono::milliseconds timeout_;
  std::vector<std::unique_ptr<Connection>> idle_;
  std::string session_id_, protocol_version_;
  int64_t next_id_ = 1;
};

}  // namespace http_load
