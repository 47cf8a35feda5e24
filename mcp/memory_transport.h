// An in-process transport pair: what one end sends, the other receives, in order, on that
// receiving end's own delivery thread (so a callback may send without deadlocking). Used
// by the unit tests and by anything that embeds a server in the same process.
#pragma once

#include <memory>
#include <string>
#include <utility>

#include "mcp/transport.h"

namespace mcp {

class MemoryTransport : public Transport {
 public:
  ~MemoryTransport() override;
  void Start(TransportCallbacks callbacks) override;
  bool Send(const Json& message) override;
  void Close() override;
  // Sends raw text as one message, as a broken client would (malformed JSON, invalid
  // UTF-8, huge payloads). The receiving end sees exactly these bytes.
  bool SendRaw(std::string text);

  struct Shared;  // the queues of both directions; internal

 private:
  friend std::pair<std::unique_ptr<MemoryTransport>, std::unique_ptr<MemoryTransport>>
  CreateMemoryTransportPair(size_t max_message_bytes);
  MemoryTransport(std::shared_ptr<Shared> shared, int side);
  std::shared_ptr<Shared> shared_;
  int side_;
};

// {client end, server end}. Messages larger than max_message_bytes are reported to the
// receiver's on_error (0 = no limit here; the Session enforces its own limit too).
std::pair<std::unique_ptr<MemoryTransport>, std::unique_ptr<MemoryTransport>>
CreateMemoryTransportPair(size_t max_message_bytes = 0);

}  // namespace mcp
