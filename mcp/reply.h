// Reply: the one-shot answer to one JSON-RPC request (clangd's ReplyOnce). A handler gets
// one, moves it wherever the work happens, and calls Ok() or Fail() once. If it is
// destroyed without having been called (a handler forgot, threw past it, or its task was
// dropped) it answers -32603 itself, so every request gets exactly one response. A second
// call is ignored (and logged). Move-only; safe to call from any thread.
#pragma once

#include <functional>
#include <memory>

#include "mcp/types.h"

namespace mcp {

class Reply {
 public:
  // `send` receives the complete response message (result or error envelope).
  using Sink = std::function<void(Json response)>;

  Reply() = default;
  Reply(Json id, std::string method, Sink send);
  Reply(Reply&&) noexcept;
  Reply& operator=(Reply&&) noexcept;
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  ~Reply();

  void Ok(Json result);
  void Fail(RpcError error);
  void Fail(int code, std::string message, Json data = nullptr) {
    Fail(RpcError{code, std::move(message), std::move(data)});
  }
  // True once Ok/Fail ran (or for a default-constructed Reply).
  bool replied() const;
  const Json& id() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace mcp
