// Server: registration (with its checks), capabilities, the worker pool and the set of
// live sessions. Protocol handling lives in session*.cc and methods.cc.
#include "mcp/server.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <set>

#include "mcp/log.h"
#include "mcp/schema.h"
#include "mcp/server_impl.h"
#include "mcp/session_impl.h"

namespace mcp {
namespace {

bool IsValidToolName(const std::string& name) {
  if (name.empty() || name.size() > 64) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

template <typename T, typename Key>
auto FindIn(const std::vector<std::shared_ptr<const T>>& items, Key key, const std::string& want) {
  return std::find_if(items.begin(), items.end(), [&](const auto& i) { return (*i).*key == want; });
}

const std::set<std::string, std::less<>> kBuiltinMethods = {
    "initialize",          "ping",
    "logging/setLevel",    "tools/list",
    "tools/call",          "resources/list",
    "resources/read",      "resources/templates/list",
    "resources/subscribe", "resources/unsubscribe",
    "prompts/list",        "prompts/get",
    "completion/complete"};

}  // namespace

// ---- Server::Impl ----

Server::Impl::Impl(ServerOptions opts)
    : options(std::move(opts)),
      tasks({options.task_ttl, options.task_poll_interval, options.max_tasks_per_tenant}) {
  work.emplace(io.get_executor());
  std::lock_guard lock(pool_mu);
  size_t n = std::max<size_t>(options.worker_threads, 1);
  max_threads = std::max(options.max_worker_threads, n);
  for (size_t i = 0; i < n; ++i) threads.emplace_back([this] { io.run(); });
}

void Server::Impl::Post(std::function<void()> task) {
  {
    std::lock_guard lock(pool_mu);
    ++pool_pending;
    // Timers run on the pool too, but only briefly; tasks are what hold threads.
    if (!pool_stopped && pool_pending > threads.size() && threads.size() < max_threads) {
      threads.emplace_back([this] { io.run(); });
    }
  }
  boost::asio::post(io, [this, task = std::move(task)] {
    struct Done {
      Impl* impl;
      ~Done() {
        std::lock_guard lock(impl->pool_mu);
        --impl->pool_pending;
      }
    } done{this};
    task();
  });
}

std::shared_ptr<const Tool> Server::Impl::FindTool(const std::string& name) const {
  std::shared_lock lock(registry_mu);
  auto it = FindIn(tools, &Tool::name, name);
  return it == tools.end() ? nullptr : *it;
}

std::shared_ptr<const Prompt> Server::Impl::FindPrompt(const std::string& name) const {
  std::shared_lock lock(registry_mu);
  auto it = FindIn(prompts, &Prompt::name, name);
  return it == prompts.end() ? nullptr : *it;
}

std::shared_ptr<const RequestHandler> Server::Impl::FindMethod(const std::string& method) const {
  std::shared_lock lock(registry_mu);
  auto it = methods.find(method);
  return it == methods.end() ? nullptr : it->second;
}

std::shared_ptr<const NotificationHandler> Server::Impl::FindNotificationHandler(
    const std::string& m) const {
  std::shared_lock lock(registry_mu);
  auto it = notification_handlers.find(m);
  return it == notification_handlers.end() ? nullptr : it->second;
}

Json Server::Impl::Capabilities() const {
  std::shared_lock lock(registry_mu);
  Json caps = Json::object();
  if (options.enable_logging) caps["logging"] = Json::object();
  if (completion) caps["completions"] = Json::object();
  if (!prompts.empty() || options.advertise_prompts) caps["prompts"] = {{"listChanged", true}};
  if (!resources.empty() || !templates.empty() || options.advertise_resources) {
    caps["resources"] = {{"subscribe", options.resource_subscriptions}, {"listChanged", true}};
  }
  if (!tools.empty() || options.advertise_tools) caps["tools"] = {{"listChanged", true}};
  return caps;
}

void Server::Impl::Forget(const std::string& session_id) {
  std::shared_ptr<Session> dying;  // released after the lock
  std::lock_guard lock(sessions_mu);
  auto it = sessions.find(session_id);
  if (it == sessions.end()) return;
  dying = std::move(it->second);
  sessions.erase(it);
}

std::vector<std::shared_ptr<Session>> Server::Impl::LiveSessions() const {
  std::lock_guard lock(sessions_mu);
  std::vector<std::shared_ptr<Session>> out;
  for (const auto& [id, s] : sessions) out.push_back(s);
  return out;
}

void Server::Impl::Broadcast(const std::string& method, const Json& params) {
  for (const auto& s : LiveSessions()) s->Notify(method, params);
}

// ---- Server ----

Server::Server(ServerOptions options) : impl_(std::make_shared<Impl>(std::move(options))) {}

Server::~Server() { Shutdown(); }

const ServerOptions& Server::options() const { return impl_->options; }

Status Server::AddTool(Tool tool) {
  std::string where = "tool \"" + tool.name + "\"";
  if (!IsValidToolName(tool.name)) {
    return Status::Error(where + ": name must match ^[a-zA-Z0-9_-]{1,64}$");
  }
  if (!tool.handler) return Status::Error(where + ": no handler");
  if (Status s = CheckSchema(tool.input_schema, "inputSchema");
      !s.ok() && !tool.allow_non_flat_schema) {
    return Status::Error(where + ": " + s.message());
  }
  if (!tool.new_era_input_schema.is_null()) {
    if (Status s = CheckFlatSchema(tool.new_era_input_schema, "inputSchema (2026-07-28)");
        !s.ok()) {
      return Status::Error(where + ": " + s.message());
    }
  }
  if (!tool.output_schema.is_null()) {
    if (Status s = CheckSchema(tool.output_schema, "outputSchema"); !s.ok()) {
      return Status::Error(where + ": " + s.message());
    }
  }
  if (!tool.annotations.is_null() && !tool.annotations.is_object()) {
    return Status::Error(where + ": annotations must be an object");
  }
  {
    std::unique_lock lock(impl_->registry_mu);
    if (FindIn(impl_->tools, &Tool::name, tool.name) != impl_->tools.end()) {
      return Status::Error(where + ": a tool with this name is already registered");
    }
    impl_->tools.push_back(std::make_shared<const Tool>(std::move(tool)));
  }
  impl_->Broadcast("notifications/tools/list_changed", nullptr);
  return Status::Ok();
}

bool Server::RemoveTool(const std::string& name) {
  {
    std::unique_lock lock(impl_->registry_mu);
    auto it = FindIn(impl_->tools, &Tool::name, name);
    if (it == impl_->tools.end()) return false;
    impl_->tools.erase(it);
  }
  impl_->Broadcast("notifications/tools/list_changed", nullptr);
  return true;
}

Status Server::AddResource(Resource resource) {
  std::string where = "resource \"" + resource.uri + "\"";
  if (resource.uri.empty()) return Status::Error("resource: empty uri");
  if (resource.name.empty()) return Status::Error(where + ": empty name");
  if (!resource.read) return Status::Error(where + ": no read handler");
  {
    std::unique_lock lock(impl_->registry_mu);
    if (FindIn(impl_->resources, &Resource::uri, resource.uri) != impl_->resources.end()) {
      return Status::Error(where + ": a resource with this uri is already registered");
    }
    impl_->resources.push_back(std::make_shared<const Resource>(std::move(resource)));
  }
  impl_->Broadcast("notifications/resources/list_changed", nullptr);
  return Status::Ok();
}

bool Server::RemoveResource(const std::string& uri) {
  {
    std::unique_lock lock(impl_->registry_mu);
    auto it = FindIn(impl_->resources, &Resource::uri, uri);
    if (it == impl_->resources.end()) return false;
    impl_->resources.erase(it);
  }
  impl_->Broadcast("notifications/resources/list_changed", nullptr);
  return true;
}

Status Server::AddResourceTemplate(ResourceTemplate t) {
  std::string where = "resource template \"" + t.uri_template + "\"";
  if (t.uri_template.empty()) return Status::Error("resource template: empty uriTemplate");
  if (t.name.empty()) return Status::Error(where + ": empty name");
  if (!t.read) return Status::Error(where + ": no read handler");
  int depth = 0;
  for (char c : t.uri_template) {
    depth += c == '{' ? 1 : c == '}' ? -1 : 0;
    if (depth < 0 || depth > 1) return Status::Error(where + ": unbalanced braces");
  }
  if (depth != 0) return Status::Error(where + ": unbalanced braces");
  {
    std::unique_lock lock(impl_->registry_mu);
    if (FindIn(impl_->templates, &ResourceTemplate::uri_template, t.uri_template) !=
        impl_->templates.end()) {
      return Status::Error(where + ": already registered");
    }
    impl_->templates.push_back(std::make_shared<const ResourceTemplate>(std::move(t)));
  }
  impl_->Broadcast("notifications/resources/list_changed", nullptr);
  return Status::Ok();
}

Status Server::AddPrompt(Prompt prompt) {
  std::string where = "prompt \"" + prompt.name + "\"";
  if (prompt.name.empty()) return Status::Error("prompt: empty name");
  if (!prompt.handler) return Status::Error(where + ": no handler");
  std::set<std::string> seen;
  for (const auto& a : prompt.arguments) {
    if (a.name.empty()) return Status::Error(where + ": an argument has an empty name");
    if (!seen.insert(a.name).second) {
      return Status::Error(where + ": argument \"" + a.name + "\" declared twice");
    }
  }
  {
    std::unique_lock lock(impl_->registry_mu);
    if (FindIn(impl_->prompts, &Prompt::name, prompt.name) != impl_->prompts.end()) {
      return Status::Error(where + ": a prompt with this name is already registered");
    }
    impl_->prompts.push_back(std::make_shared<const Prompt>(std::move(prompt)));
  }
  impl_->Broadcast("notifications/prompts/list_changed", nullptr);
  return Status::Ok();
}

bool Server::RemovePrompt(const std::string& name) {
  {
    std::unique_lock lock(impl_->registry_mu);
    auto it = FindIn(impl_->prompts, &Prompt::name, name);
    if (it == impl_->prompts.end()) return false;
    impl_->prompts.erase(it);
  }
  impl_->Broadcast("notifications/prompts/list_changed", nullptr);
  return true;
}

void Server::SetCompletionHandler(CompletionHandler handler) {
  std::unique_lock lock(impl_->registry_mu);
  impl_->completion =
      handler ? std::make_shared<const CompletionHandler>(std::move(handler)) : nullptr;
}

Status Server::AddRequestHandler(const std::string& method, RequestHandler handler) {
  if (method.empty()) return Status::Error("request handler: empty method name");
  if (kBuiltinMethods.count(method) || method.rfind("notifications/", 0) == 0) {
    return Status::Error("request handler \"" + method + "\": reserved method name");
  }
  if (!handler) return Status::Error("request handler \"" + method + "\": no handler");
  std::unique_lock lock(impl_->registry_mu);
  if (!impl_->methods.emplace(method, std::make_shared<const RequestHandler>(std::move(handler)))
           .second) {
    return Status::Error("request handler \"" + method + "\": already registered");
  }
  return Status::Ok();
}

Status Server::AddNotificationHandler(const std::string& method, NotificationHandler handler) {
  if (method == "notifications/initialized" || method == "notifications/cancelled") {
    return Status::Error("notification handler \"" + method + "\": handled by the library");
  }
  if (!handler) return Status::Error("notification handler \"" + method + "\": no handler");
  std::unique_lock lock(impl_->registry_mu);
  if (!impl_->notification_handlers
           .emplace(method, std::make_shared<const NotificationHandler>(std::move(handler)))
           .second) {
    return Status::Error("notification handler \"" + method + "\": already registered");
  }
  return Status::Ok();
}

std::shared_ptr<Session> Server::Connect(std::unique_ptr<Transport> transport, std::string tenant) {
  std::string sid;
  {
    std::lock_guard lock(impl_->sessions_mu);
    sid = "s" + std::to_string(impl_->next_session++);
  }
  auto session = std::make_shared<Session>(
      std::make_unique<Session::Impl>(impl_, std::move(transport), sid, std::move(tenant)));
  Session::Impl& s = *session->impl_;
  s.weak = session;
  {
    std::lock_guard lock(impl_->sessions_mu);
    if (impl_->shut_down) {
      s.phase = Session::Impl::Phase::kClosed;
      return session;
    }
    impl_->sessions.emplace(sid, session);
  }
  std::weak_ptr<Session> weak = session;
  TransportCallbacks callbacks;
  callbacks.on_message = [weak](std::string text) {
    if (auto self = weak.lock()) self->impl_->OnText(text);
  };
  callbacks.on_error = [weak](RpcError error, jsonrpc::Peek peek) {
    if (auto self = weak.lock()) self->impl_->OnTransportError(error, peek);
  };
  callbacks.on_close = [weak] {
    if (auto self = weak.lock()) self->impl_->OnTransportClosed();
  };
  callbacks.on_eof = [weak] {
    if (auto self = weak.lock()) self->impl_->OnPeerFinished();
  };
  s.transport->Start(std::move(callbacks));
  log::Info("session " + sid + " connected");
  return session;
}

void Server::NotifyResourceUpdated(const std::string& uri) {
  for (const auto& s : impl_->LiveSessions()) {
    if (s->IsSubscribed(uri)) s->Notify("notifications/resources/updated", {{"uri", uri}});
  }
}

void Server::Broadcast(const std::string& method, const Json& params) {
  impl_->Broadcast(method, params);
}

Json Server::Capabilities() const { return impl_->Capabilities(); }

std::vector<std::shared_ptr<Session>> Server::Sessions() const { return impl_->LiveSessions(); }

std::shared_ptr<Session> Server::FindSession(const std::string& session_id) const {
  std::lock_guard lock(impl_->sessions_mu);
  auto it = impl_->sessions.find(session_id);
  return it == impl_->sessions.end() ? nullptr : it->second;
}

void Server::Shutdown() {
  {
    std::lock_guard lock(impl_->sessions_mu);
    if (impl_->shut_down) return;
    impl_->shut_down = true;
  }
  for (const auto& s : impl_->LiveSessions()) s->Close();
  impl_->tasks.CancelAll();  // task handlers outlive their sessions; the pool joins them
  impl_->work.reset();
  impl_->io.stop();
  std::vector<std::thread> threads;
  {
    std::lock_guard lock(impl_->pool_mu);
    impl_->pool_stopped = true;  // no thread is added from here on
    threads.swap(impl_->threads);
  }
  for (auto& t : threads) {
    if (t.get_id() == std::this_thread::get_id()) {
      t.detach();  // Shutdown from a handler: cannot join ourselves
    } else if (t.joinable()) {
      t.join();
    }
  }
}

std::vector<std::string> Server::ValidateToolOutput(const std::string& tool_name,
                                                    const Json& structured_content) const {
  auto tool = impl_->FindTool(tool_name);
  if (!tool) return {"unknown tool \"" + tool_name + "\""};
  if (tool->output_schema.is_null()) return {};
  return ValidateJson(tool->output_schema, structured_content, "structuredContent");
}

Json Server::ToolInputSchema(const std::string& tool_name) const {
  auto tool = impl_->FindTool(tool_name);
  // Its only reader checks new-era requests' headers: the new era's schema.
  return tool ? tool->InputSchema(/*new_era=*/true) : Json();
}

}  // namespace mcp
