// MemoryClient: a minimal MCP client over a MemoryTransport, for tests of servers built on
// this library. It sends requests and waits for their responses, records notifications,
// answers server->client requests with a handler, and can send raw bytes.
//
//   mcp::Server server(...);
//   mcp::MemoryClient client(server);          // connects a session
//   client.Initialize("2025-06-18");           // initialize + notifications/initialized
//   Json r = client.Request("tools/call", {{"name","echo"},{"arguments",{...}}});
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "mcp/types.h"

namespace mcp {

class Server;
class Session;

class MemoryClient {
 public:
  // Answers a server->client request: returns the result, or throws RpcException.
  using RequestHandler = std::function<Json(const std::string& method, const Json& params)>;

  // `tenant` becomes the session's Session::tenant() (as an authenticating transport sets it).
  explicit MemoryClient(Server& server, size_t transport_limit = 0, std::string tenant = {});
  ~MemoryClient();  // closes the session

  // initialize (+ notifications/initialized unless send_initialized is false). Returns the
  // whole response message.
  Json Initialize(const std::string& protocol_version = "2025-06-18", bool send_initialized = true);

  // Sends a request with a fresh integer id and returns its full response message
  // ({"jsonrpc","id","result"|"error"}), or null when none came within `timeout`.
  Json Request(const std::string& method, Json params = Json::object(),
               std::chrono::milliseconds timeout = std::chrono::seconds(10));
  // Sends a request with a given id without waiting; pair with WaitResponse.
  void SendRequest(const Json& id, const std::string& method, Json params = Json::object());
  Json WaitResponse(const Json& id, std::chrono::milliseconds timeout = std::chrono::seconds(10));
  void Notify(const std::string& method, Json params = Json::object());
  void SendJson(const Json& message);     // any message, as is
  void SendRaw(const std::string& text);  // bytes as is

  // Messages that carried no id of ours: responses with null/unknown ids, in order.
  // Waits until at least `count` have arrived (or timeout) and returns them all.
  std::vector<Json> Unmatched(size_t count = 0,
                              std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Notifications received so far with this method ("" = all); waits for `count` of them.
  std::vector<Json> Notifications(const std::string& method = "", size_t count = 0,
                                  std::chrono::milliseconds timeout = std::chrono::seconds(5));
  // Every message received, in order.
  std::vector<Json> Received() const;

  void SetRequestHandler(RequestHandler handler);
  std::shared_ptr<Session> session() const;
  void Close();  // closes the client end (the server sees EOF)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcp
