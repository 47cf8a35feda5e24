#include "mcp/memory_transport.h"

#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>

#include "mcp/jsonrpc.h"

namespace mcp {

// Both directions of a pair. Each side has an inbox and, once started, a delivery thread
// that hands the inbox to that side's callbacks in order. nullopt in an inbox = close.
struct MemoryTransport::Shared {
  struct Side {
    std::deque<std::optional<std::string>> inbox;
    std::condition_variable cv;
    TransportCallbacks callbacks;
    std::thread thread;
    bool started = false;
  };
  std::mutex mu;
  Side sides[2];
  bool closed = false;
  size_t limit = 0;

  void Deliver(int side) {
    Side& s = sides[side];
    for (;;) {
      std::optional<std::string> item;
      {
        std::unique_lock lock(mu);
        s.cv.wait(lock, [&] { return !s.inbox.empty(); });
        item = std::move(s.inbox.front());
        s.inbox.pop_front();
      }
      if (!item) {
        if (s.callbacks.on_close) s.callbacks.on_close();
        return;
      }
      if (limit && item->size() > limit) {
        if (s.callbacks.on_error) {
          s.callbacks.on_error(
              RpcError{kInvalidRequest,
                       "Invalid Request: message of " + std::to_string(item->size()) +
                           " bytes exceeds the maximum message size of " + std::to_string(limit) +
                           " bytes; send large data in smaller parts",
                       nullptr},
              jsonrpc::PeekMessageIn(*item));
        }
      } else if (s.callbacks.on_message) {
        s.callbacks.on_message(std::move(*item));
      }
    }
  }
};

MemoryTransport::MemoryTransport(std::shared_ptr<Shared> shared, int side)
    : shared_(std::move(shared)), side_(side) {}

MemoryTransport::~MemoryTransport() {
  Close();
  std::thread& t = shared_->sides[side_].thread;
  if (!t.joinable()) return;
  // Destroyed from inside our own callback: the thread only touches Shared, kept alive by
  // its own reference, so letting it finish on its own is safe.
  if (t.get_id() == std::this_thread::get_id()) {
    t.detach();
  } else {
    t.join();
  }
}

void MemoryTransport::Start(TransportCallbacks callbacks) {
  std::lock_guard lock(shared_->mu);
  auto& side = shared_->sides[side_];
  if (side.started) return;
  side.started = true;
  side.callbacks = std::move(callbacks);
  side.thread = std::thread([shared = shared_, s = side_] { shared->Deliver(s); });
}

bool MemoryTransport::Send(const Json& message) {
  return SendRaw(message.dump(-1, ' ', false, Json::error_handler_t::replace));
}

bool MemoryTransport::SendRaw(std::string text) {
  std::lock_guard lock(shared_->mu);
  if (shared_->closed) return false;
  auto& peer = shared_->sides[1 - side_];
  peer.inbox.push_back(std::move(text));
  peer.cv.notify_all();
  return true;
}

void MemoryTransport::Close() {
  std::lock_guard lock(shared_->mu);
  if (shared_->closed) return;
  shared_->closed = true;
  // The peer reads what was already sent, then EOF; this side stops at once.
  auto& self = shared_->sides[side_];
  self.inbox.clear();
  for (auto& side : shared_->sides) {
    side.inbox.push_back(std::nullopt);
    side.cv.notify_all();
  }
}

std::pair<std::unique_ptr<MemoryTransport>, std::unique_ptr<MemoryTransport>>
CreateMemoryTransportPair(size_t max_message_bytes) {
  auto shared = std::make_shared<MemoryTransport::Shared>();
  shared->limit = max_message_bytes;
  return {std::unique_ptr<MemoryTransport>(new MemoryTransport(shared, 0)),
          std::unique_ptr<MemoryTransport>(new MemoryTransport(shared, 1))};
}

}  // namespace mcp
