// Session: one client connected to a Server over one Transport. Owns everything that is
// per client: lifecycle state (new -> initialized -> closed), the negotiated protocol
// version and client capabilities, the client's log level, resource subscriptions, the
// requests in flight (for duplicate ids and cancellation) and the server->client requests
// awaiting an answer.
//
// Two eras (era2026.h): a session that received initialize speaks one of today's versions;
// one whose first request carried a 2026-07-28 `_meta` (or asked server/discover) speaks
// 2026-07-28: protocol_version() says which, initialized() stays false, and its client
// capabilities and info are those of the request being served.
//
// Threading: the transport's reader thread parses, validates and routes messages;
// lifecycle methods (initialize, ping, logging/setLevel, cancellation) are answered on it
// directly, everything else runs on the server's worker pool. Writes are serialized.
// Created by Server::Connect; shared_ptr-owned (handlers' Contexts keep it alive).
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "mcp/context.h"
#include "mcp/types.h"

namespace mcp {

class Transport;

class Session : public std::enable_shared_from_this<Session> {
 public:
  ~Session();

  const std::string& id() const;  // unique per server, e.g. "s1"
  // Who the transport authenticated (Server::Connect's tenant): the HTTP tenant's name,
  // empty for stdio and unauthenticated transports. Fixed for the session's life.
  const std::string& tenant() const;
  bool initialized() const;  // initialize has been answered
  bool closed() const;
  std::string protocol_version() const;  // "" before initialize; "2026-07-28": new era
  Json client_info() const;              // initialize params.clientInfo
  Json client_capabilities() const;      // initialize params.capabilities
  LogLevel log_level() const;

  // notifications/message to this client if `level` passes its logging/setLevel.
  void Log(LogLevel level, Json data, const std::string& logger = "");
  // The same, sent while handling the client's request `related_id` (nullptr: none), so a
  // transport with several streams delivers it with that request (Transport::SendRelated).
  void LogRelated(LogLevel level, Json data, const std::string& logger, const Json* related_id);
  // Any notification; dropped before initialize and after close. False if not sent.
  bool Notify(const std::string& method, Json params);
  // A server->client request outside any client request (see Context::SendRequest).
  void SendRequest(const std::string& method, Json params, ResponseCallback done,
                   std::chrono::milliseconds timeout = kDefaultRequestTimeout);
  bool IsSubscribed(const std::string& uri) const;

  // Closes the transport, cancels requests in flight (their responses are not sent),
  // fails pending server->client requests, and waits for running handlers to return.
  // Must not be called from a handler of this session (use CloseAsync there).
  void Close();
  void CloseAsync();
  // Blocks until the transport has closed and every handler has returned.
  void Wait();
  // Wait with a deadline; true when closed and idle.
  bool WaitFor(std::chrono::milliseconds timeout);

  struct Impl;                                   // internal
  explicit Session(std::unique_ptr<Impl> impl);  // use Server::Connect

 private:
  friend class Server;
  friend class Context;
  std::unique_ptr<Impl> impl_;
};

}  // namespace mcp
