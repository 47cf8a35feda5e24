// Transport: moves whole JSON-RPC messages between one client and one Session. It knows
// nothing of MCP. Implementations: StdioTransport (newline-delimited JSON on two fds),
// MemoryTransport (an in-process pair, for tests and embedding); the HTTP transports add a
// Transport per client session.
//
// Threading: callbacks run on a thread the transport owns (a reader), one at a time and
// in arrival order. Send() and Close() may be called from any thread, concurrently.
#pragma once

#include <functional>
#include <string>

#include "mcp/jsonrpc.h"
#include "mcp/types.h"

namespace mcp {

struct TransportCallbacks {
  // One complete incoming message as text (not yet parsed: the session answers -32700
  // for malformed JSON, which needs the raw text). May be a JSON array (a batch).
  std::function<void(std::string text)> on_message;
  // A message the transport could not deliver (e.g. larger than the limit), with what
  // could be read of it (jsonrpc::PeekMessage). The session answers a request with this
  // error under its id (null when unreadable) and drops a response unanswered; the
  // connection keeps working.
  std::function<void(RpcError error, jsonrpc::Peek peek)> on_error;
  // The peer is gone (EOF, Close()). Called at most once; no callback follows it.
  std::function<void()> on_close;
  // Optional. The peer has finished sending (stdin EOF) but replies can still be written.
  // When set, a transport that can half-close calls this instead of on_close at EOF and
  // keeps Send() working; the owner calls Close() when it is done (the session lets the
  // requests in flight finish first). No callback follows it.
  std::function<void()> on_eof;
};

class Transport {
 public:
  virtual ~Transport() = default;
  // Starts delivering to `callbacks`. Called once, before any Send.
  virtual void Start(TransportCallbacks callbacks) = 0;
  // Sends one message (an object, or an array for a batch response). Returns false when
  // the transport is closed or the write failed. Thread-safe; messages are never
  // interleaved.
  virtual bool Send(const Json& message) = 0;
  // A notification or request sent while handling the client's request `related_id`
  // (a log line of a tool call). Transports with several streams deliver it on that
  // request's stream while it is open (Streamable HTTP); the rest just Send it.
  virtual bool SendRelated(const Json& message, const Json& related_id) {
    (void)related_id;
    return Send(message);
  }
  // Stops reading and writing; on_close follows (once). Idempotent, any thread, including
  // from inside a callback.
  virtual void Close() = 0;
  // Offered a task of the message being delivered (from inside on_message, on the
  // transport's thread). A transport that can hand its reading to a stand-by thread may
  // take it (moving from `task`, returning true) and run it on the thread that read the
  // message once that message's chunk is delivered: no hand-off to another thread, which
  // on an idle machine costs a wake-up of tens of microseconds. Reading goes on meanwhile,
  // so cancellations and other requests are still taken in. False: the caller runs it
  // elsewhere (the default).
  virtual bool AdoptTask(std::function<void()>& task) {
    (void)task;
    return false;
  }
};

}  // namespace mcp
