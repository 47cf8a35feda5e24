// Internal to mcp/: the state behind a Server (registries, worker pool, live sessions).
// Not part of the public API; included by the library's .cc files only (it pulls in Boost).
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "mcp/request_state_mac.h"
#include "mcp/server.h"
#include "mcp/tasks.h"

namespace mcp {

struct Server::Impl {
  explicit Impl(ServerOptions opts);

  const ServerOptions options;
  const RequestStateMac state_mac;  // seals input_required request states (2026-07-28)
  TaskStore tasks;                  // the Tasks extension's tasks, of every session

  // Registries. Handlers are copied out as shared_ptr under the lock and run without it.
  mutable std::shared_mutex registry_mu;
  std::vector<std::shared_ptr<const Tool>> tools;
  std::vector<std::shared_ptr<const Resource>> resources;
  std::vector<std::shared_ptr<const ResourceTemplate>> templates;
  std::vector<std::shared_ptr<const Prompt>> prompts;
  std::shared_ptr<const CompletionHandler> completion;
  std::map<std::string, std::shared_ptr<const RequestHandler>> methods;
  std::map<std::string, std::shared_ptr<const NotificationHandler>> notification_handlers;

  std::shared_ptr<const Tool> FindTool(const std::string& name) const;
  std::shared_ptr<const Prompt> FindPrompt(const std::string& name) const;
  std::shared_ptr<const RequestHandler> FindMethod(const std::string& method) const;
  std::shared_ptr<const NotificationHandler> FindNotificationHandler(const std::string& m) const;
  Json Capabilities() const;

  // The worker pool: an io_context run by options.worker_threads threads (timers too),
  // grown by Post up to options.max_worker_threads.
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  std::mutex pool_mu;
  std::vector<std::thread> threads;  // pool_mu
  size_t pool_pending = 0;           // pool_mu: posted tasks not yet finished
  size_t max_threads = 1;            // options.max_worker_threads, at least worker_threads
  bool pool_stopped = false;         // pool_mu
  // Runs `task` on a worker, starting one more thread when none is free. After shutdown
  // the task is destroyed without running.
  void Post(std::function<void()> task);

  // Live sessions, strongly held until their transport closes.
  mutable std::mutex sessions_mu;
  std::map<std::string, std::shared_ptr<Session>> sessions;
  uint64_t next_session = 1;
  bool shut_down = false;
  void Forget(const std::string& session_id);
  std::vector<std::shared_ptr<Session>> LiveSessions() const;
  void Broadcast(const std::string& method, const Json& params);
};

}  // namespace mcp
