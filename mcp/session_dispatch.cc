// Session's dispatch: a request to its built-in method or the server's handler, on the
// reader thread (quick, order-sensitive built-ins) or on the worker pool, within the
// session's share of it (ServerOptions::max_session_tasks). See session_impl.h.
#include <boost/asio/post.hpp>
#include <exception>

#include "mcp/log.h"
#include "mcp/session.h"
#include "mcp/session_impl.h"
#include "mcp/transport.h"

namespace mcp {

namespace {
// Runs a built-in method, mapping exceptions to errors. Params: null -> {}.
void RunBuiltin(Session::Impl& impl, Session::Impl::Method method, const Json& params, Context& ctx,
                Reply& reply) {
  try {
    if (!params.is_null() && !params.is_object()) {
      throw RpcException(kInvalidParams, "Invalid params: \"params\" must be an object");
    }
    reply.Ok((impl.*method)(params.is_null() ? Json::object() : params, ctx));
  } catch (const InputRequired& need) {
    try {
      reply.Ok(impl.InputRequiredResult(ctx.method(), params, need));
    } catch (const RpcException& e) {
      reply.Fail(e.error());
    }
  } catch (const RpcException& e) {
    reply.Fail(e.error());
  } catch (const std::exception& e) {
    reply.Fail(kInternalError, std::string("Internal error: ") + e.what());
  }
}
}  // namespace

void Session::Impl::Dispatch(const std::shared_ptr<RequestState>& state, const Json& params,
                             Reply reply) {
  auto self = weak.lock();
  if (!self) return;
  if (state->method == "subscriptions/listen" && state->era_meta) {
    Listen(state, params, std::move(reply));  // answered only when the subscription ends
    return;
  }
  Context ctx(self, state);
  const auto& builtins = Builtins();
  auto builtin = builtins.find(state->method);
  std::shared_ptr<const RequestHandler> custom;
  if (builtin == builtins.end()) {
    custom = server->FindMethod(state->method);
    if (!custom) {
      reply.Fail(kMethodNotFound, "Method not found: " + state->method);
      return;
    }
  } else if (builtin->second.on_reader_thread) {
    RunBuiltin(*this, builtin->second.method, params, ctx, reply);
    return;
  }
  // Everything else runs on the worker pool. The token counts the task until it is destroyed, run
  // or not, so Wait() covers tasks dropped at shutdown too.
  {
    std::lock_guard lock(mu);
    ++running_tasks;
  }
  struct TaskToken {
    explicit TaskToken(std::shared_ptr<Session> s) : session(std::move(s)) {}
    TaskToken(const TaskToken&) = delete;
    TaskToken& operator=(const TaskToken&) = delete;
    ~TaskToken() { session->impl_->TaskDone(); }
    std::shared_ptr<Session> session;
  };
  auto token = std::make_shared<TaskToken>(self);
  auto shared_reply = std::make_shared<Reply>(std::move(reply));
  Method method = builtin == builtins.end() ? nullptr : builtin->second.method;
  PostTask([this, token, shared_reply, ctx, params, custom, method]() mutable {
    if (ctx.cancelled()) return;  // cancelled while queued: the dropped reply is discarded
    if (method) {
      RunBuiltin(*this, method, params, ctx, *shared_reply);
      return;
    }
    RunCustom(*custom, params, ctx, shared_reply);
  });
}

namespace {
// Passes a response envelope on to `reply`.
void Forward(Reply& reply, const Json& response) {
  if (!response.contains("error")) {
    reply.Ok(response.value("result", Json::object()));
    return;
  }
  const Json& e = response["error"];
  reply.Fail(RpcError{e.value("code", kInternalError), e.value("message", std::string()),
                      e.contains("data") ? e["data"] : Json()});
}
}  // namespace

void Session::Impl::RunCustom(const RequestHandler& handler, const Json& params, Context ctx,
                              const std::shared_ptr<Reply>& reply) {
  // The handler takes its Reply by value, so when it throws, that Reply dies during stack
  // unwinding and would answer a bare -32603 before we could see the exception. The
  // handler gets a forwarding Reply instead; a fallback produced while an exception is in
  // flight is held back so the catch below can answer with the exception's own error.
  auto held_back = std::make_shared<std::optional<Json>>();
  Reply forwarding(ctx.request_id(), ctx.method(), [reply, held_back](Json response) {
    if (std::uncaught_exceptions() > 0) {
      *held_back = std::move(response);
      return;
    }
    Forward(*reply, response);
  });
  try {
    handler(params, ctx, std::move(forwarding));
  } catch (const RpcException& e) {
    reply->Fail(e.error());  // ignored if the handler already replied
  } catch (const std::exception& e) {
    reply->Fail(kInternalError, std::string("Internal error: ") + e.what());
  }
  if (held_back->has_value()) Forward(*reply, **held_back);  // ignored if already replied
}

void Session::Impl::PostTask(std::function<void()> task) {
  size_t cap = server->options.max_session_tasks;
  {
    std::lock_guard lock(mu);
    if (cap != 0 && pool_tasks >= cap) {
      waiting_tasks.push_back(std::move(task));
      return;
    }
    ++pool_tasks;
  }
  RunOnPool(std::move(task), /*offer_to_transport=*/true);
}

// The task's own token keeps the session alive while it runs, and so `this`. A task of the
// message being delivered may run on the transport's thread that read it (AdoptTask);
// it still counts as one of the session's worker-pool tasks.
void Session::Impl::RunOnPool(std::function<void()> task, bool offer_to_transport) {
  std::function<void()> run = [this, task = std::move(task)]() mutable {
    struct Next {
      Impl* impl;
      ~Next() { impl->PoolTaskDone(); }
    } next{this};
    task();
  };
  if (offer_to_transport && transport && transport->AdoptTask(run)) return;
  server->Post(std::move(run));
}

// A finished task hands its place to the session's next waiting one.
void Session::Impl::PoolTaskDone() {
  std::function<void()> next;
  {
    std::lock_guard lock(mu);
    if (waiting_tasks.empty()) {
      --pool_tasks;
      return;
    }
    next = std::move(waiting_tasks.front());
    waiting_tasks.pop_front();
  }
  RunOnPool(std::move(next));
}

void Session::Impl::TaskDone() {
  {
    std::lock_guard lock(mu);
    --running_tasks;
    if (phase == Phase::kClosed) idle_cv.notify_all();  // see Finish
  }
  CloseIfDrained();
}

}  // namespace mcp
