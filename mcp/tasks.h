// The Tasks extension of the 2026-07-28 era (`io.modelcontextprotocol/tasks`): a tools/call
// that outlives a threshold answers `resultType: "task"` and the client polls tasks/get for
// its status, its pending input requests and, at the end, its result or error; tasks/update
// brings input to the running call and tasks/cancel cancels it (the handler sees
// ctx.cancelled(), as for notifications/cancelled).
//
// A Task is the state shared by the tools/call that starts it, the handler's thread and the
// tasks/* requests that come later (on other connections, as other sessions). A TaskStore,
// one per Server, keeps tasks keyed by (tenant, task id): another tenant's id is "not
// found". A task is admitted into the store when its call starts (so the per-tenant cap is
// checked before the handler runs) but is visible to tasks/get only once published, i.e.
// once its call has answered with the task. A finished task is kept `ttl` after its end;
// a running one is never dropped.
//
// Threading: every method of Task and TaskStore takes its own lock and may be called from
// any thread; input callbacks run with no lock held, on the thread of tasks/update.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "mcp/types.h"

namespace mcp {

inline constexpr const char* kTasksExtension = "io.modelcontextprotocol/tasks";

// Whether a tool's calls may become tasks (Tool::task_support; tools/list's
// execution.taskSupport). kRequired: a call always answers with a task, and a client that
// did not declare the extension gets kMissingClientCapability.
enum class TaskSupport { kForbidden, kOptional, kRequired };
const char* TaskSupportName(TaskSupport support);  // "forbidden", "optional", "required"

// Whether `client_capabilities` (a request's) declare the tasks extension.
bool DeclaresTasks(const Json& client_capabilities);
// kMissingClientCapability naming the extension in data.requiredCapabilities.extensions.
RpcError MissingTasksExtension(const std::string& why);

struct RequestState;

class Task {
 public:
  enum class Status { kWorking, kInputRequired, kCompleted, kFailed, kCancelled };
  // What the tools/call waiting on a task's first moments saw (WaitStart).
  enum class Start { kFinished, kAsksInput, kOutlived };

  Task(std::string tenant, std::shared_ptr<RequestState> run);

  const std::string& id() const { return id_; }
  const std::string& tenant() const { return tenant_; }

  // ---- the call's side ----
  // Blocks until the handler ends, asks for input through AwaitInput, or `threshold` passes.
  Start WaitStart(std::chrono::milliseconds threshold);
  void Publish();  // tasks/get may see it from now on
  bool published() const;
  // The handler's end: a tool result, a protocol error, or an input_required round of the
  // request itself (ctx.RequireInput before the task was published).
  void Complete(Json tool_result);
  void Fail(RpcError error);
  void NeedsRound(Json input_requests, Json state);
  // What the handler ended with (valid after kFinished).
  Status status() const;
  Json result() const;
  RpcError error() const;
  // The handler's RequireInput, when it ended that way.
  std::optional<std::pair<Json, Json>> round() const;

  // ---- the handler's side ----
  // Marks `input_requests` pending (status input_required) and blocks until tasks/update
  // answered every one of their keys; returns those answers. Throws RpcException
  // (kRequestCancelled) when the task is cancelled meanwhile.
  Json AwaitInput(const Json& input_requests);
  void OnInput(std::function<void(const Json& responses)> fn);
  void SetStatusMessage(std::string message);

  // ---- tasks/* ----
  // tasks/get's DetailedTask, without resultType (the session adds it).
  Json Detailed(std::chrono::milliseconds ttl, std::chrono::milliseconds poll_interval) const;
  // The CreateTaskResult a tools/call answers with.
  Json Created(std::chrono::milliseconds ttl, std::chrono::milliseconds poll_interval) const;
  // tasks/update: answers pending input requests and hands `responses` to the handler's
  // OnInput callbacks. Ignored once the task has ended.
  void Deliver(const Json& responses);
  // tasks/cancel (or the call's cancellation, or shutdown): status cancelled at once, then
  // the handler's request is cancelled. Idempotent; ignored once the task has ended.
  void Cancel();
  // Whether the task has ended, its handler returned, and `ttl` has passed since its end
  // (by `now`): it may be dropped. A running task never expires.
  bool ExpiredAt(std::chrono::steady_clock::time_point now, std::chrono::milliseconds ttl) const;

 private:
  void Touch();             // under mu_: lastUpdatedAt = now
  void End(Status status);  // under mu_

  const std::string id_;
  const std::string tenant_;
  const std::shared_ptr<RequestState> run_;
  const std::string created_at_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Status status_ = Status::kWorking;
  bool published_ = false;
  bool asks_input_ = false;
  bool finished_ = false;  // the handler returned (status may still be kCancelled)
  std::string updated_at_;
  std::string status_message_;
  Json result_;
  RpcError error_;
  std::optional<std::pair<Json, Json>> round_;
  Json pending_ = Json::object();  // input requests not answered yet
  Json answers_ = Json::object();  // answers not yet taken by AwaitInput
  std::vector<std::function<void(const Json&)>> on_input_;
  std::optional<std::chrono::steady_clock::time_point> ended_;
};

class TaskStore {
 public:
  struct Limits {
    std::chrono::milliseconds ttl;
    std::chrono::milliseconds poll_interval;
    size_t max_per_tenant;
  };
  explicit TaskStore(Limits limits) : limits_(limits) {}

  const Limits& limits() const { return limits_; }
  // Admits a new task for `tenant`; an error naming the cap when the tenant has
  // max_per_tenant tasks (expired ones are dropped first).
  std::optional<RpcError> Admit(const std::shared_ptr<Task>& task);
  // Forgets a task whose call answered without it (it finished within the threshold).
  void Remove(const Task& task);
  // The published task `task_id` of `tenant`, or nullptr.
  std::shared_ptr<Task> Find(const std::string& tenant, const std::string& task_id);
  // Cancels every task, at shutdown.
  void CancelAll();

 private:
  void DropExpired();  // under mu_

  const Limits limits_;
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Task>> tasks_;
};

}  // namespace mcp
