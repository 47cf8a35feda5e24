#include "mcp/tasks.h"

#include <openssl/rand.h>

#include <cstdio>
#include <ctime>
#include <iterator>
#include <stdexcept>

#include "mcp/era2026.h"
#include "mcp/session_impl.h"

namespace mcp {

namespace {

// 128 random bits: a task id is the capability to read the task's result, so it must not
// be guessable (the tenant check stops other tenants, this stops the tenant's other users).
std::string NewTaskId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) {
    throw RpcException(kInternalError, "RAND_bytes failed: cannot mint a task id");
  }
  static const char* kHex = "0123456789abcdef";
  std::string id;
  for (unsigned char b : bytes) {
    id.push_back(kHex[b >> 4]);
    id.push_back(kHex[b & 15]);
  }
  return id;
}

std::string NowIso8601() {
  auto now = std::chrono::system_clock::now();
  std::time_t secs = std::chrono::system_clock::to_time_t(now);
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()) % 1000;
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[40];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  char out[48];
  std::snprintf(out, sizeof(out), "%s.%03dZ", buf, static_cast<int>(ms.count()));
  return out;
}

const char* StatusName(Task::Status s) {
  switch (s) {
    case Task::Status::kWorking:
      return "working";
    case Task::Status::kInputRequired:
      return "input_required";
    case Task::Status::kCompleted:
      return "completed";
    case Task::Status::kFailed:
      return "failed";
    case Task::Status::kCancelled:
      return "cancelled";
  }
  return "working";
}

}  // namespace

const char* TaskSupportName(TaskSupport support) {
  switch (support) {
    case TaskSupport::kForbidden:
      return "forbidden";
    case TaskSupport::kOptional:
      return "optional";
    case TaskSupport::kRequired:
      return "required";
  }
  return "forbidden";
}

bool DeclaresTasks(const Json& client_capabilities) {
  if (!client_capabilities.is_object()) return false;
  auto ext = client_capabilities.find("extensions");
  return ext != client_capabilities.end() && ext->is_object() && ext->contains(kTasksExtension);
}

RpcError MissingTasksExtension(const std::string& why) {
  return {era2026::kMissingClientCapability,
          "Missing required client capability: extensions[\"" + std::string(kTasksExtension) +
              "\"] (" + why + ")",
          {{"requiredCapabilities", {{"extensions", {{kTasksExtension, Json::object()}}}}}}};
}

// ---- Task ----

Task::Task(std::string tenant, std::shared_ptr<RequestState> run)
    : id_(NewTaskId()),
      tenant_(std::move(tenant)),
      run_(std::move(run)),
      created_at_(NowIso8601()),
      updated_at_(created_at_) {}

void Task::Touch() { updated_at_ = NowIso8601(); }

void Task::End(Status status) {
  status_ = status;
  ended_ = std::chrono::steady_clock::now();
  pending_ = Json::object();
  Touch();
  cv_.notify_all();
}

Task::Start Task::WaitStart(std::chrono::milliseconds threshold) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, threshold, [&] { return finished_ || asks_input_ || ended_.has_value(); });
  if (finished_ || ended_) return Start::kFinished;
  return asks_input_ ? Start::kAsksInput : Start::kOutlived;
}

void Task::Publish() {
  std::lock_guard lock(mu_);
  published_ = true;
}

bool Task::published() const {
  std::lock_guard lock(mu_);
  return published_;
}

void Task::Complete(Json tool_result) {
  std::lock_guard lock(mu_);
  finished_ = true;
  if (ended_) return;  // cancelled first: the late result is not reported
  result_ = std::move(tool_result);
  End(Status::kCompleted);
}

void Task::Fail(RpcError error) {
  std::lock_guard lock(mu_);
  finished_ = true;
  if (ended_) return;
  error_ = std::move(error);
  End(Status::kFailed);
}

void Task::NeedsRound(Json input_requests, Json state) {
  std::lock_guard lock(mu_);
  finished_ = true;
  if (ended_) return;
  if (published_) {
    // A published task has no request left to answer input_required on.
    error_ = {kInternalError,
              "the tool asked for input with an input_required result after its call became a "
              "task; a task asks through Context::AwaitInput",
              nullptr};
    End(Status::kFailed);
    return;
  }
  round_ = {std::move(input_requests), std::move(state)};
  End(Status::kCompleted);
}

Task::Status Task::status() const {
  std::lock_guard lock(mu_);
  return status_;
}

Json Task::result() const {
  std::lock_guard lock(mu_);
  return result_;
}

RpcError Task::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

std::optional<std::pair<Json, Json>> Task::round() const {
  std::lock_guard lock(mu_);
  return round_;
}

Json Task::AwaitInput(const Json& input_requests) {
  std::unique_lock lock(mu_);
  if (ended_) throw RpcException(kRequestCancelled, "the task was cancelled");
  for (const auto& [key, request] : input_requests.items()) pending_[key] = request;
  status_ = Status::kInputRequired;
  asks_input_ = true;
  Touch();
  cv_.notify_all();
  auto answered = [&] {
    for (const auto& [key, unused] : input_requests.items()) {
      if (!answers_.contains(key)) return false;
    }
    return true;
  };
  cv_.wait(lock, [&] { return ended_.has_value() || answered(); });
  if (ended_) throw RpcException(kRequestCancelled, "the task was cancelled");
  Json out = Json::object();
  for (const auto& [key, unused] : input_requests.items()) {
    out[key] = answers_[key];
    answers_.erase(key);
  }
  return out;
}

void Task::OnInput(std::function<void(const Json&)> fn) {
  std::lock_guard lock(mu_);
  on_input_.push_back(std::move(fn));
}

void Task::SetStatusMessage(std::string message) {
  std::lock_guard lock(mu_);
  if (ended_) return;
  status_message_ = std::move(message);
  Touch();
}

void Task::Deliver(const Json& responses) {
  std::vector<std::function<void(const Json&)>> callbacks;
  {
    std::lock_guard lock(mu_);
    if (ended_) return;
    for (const auto& [key, value] : responses.items()) {
      if (pending_.erase(key) > 0) answers_[key] = value;
    }
    if (status_ == Status::kInputRequired && pending_.empty()) status_ = Status::kWorking;
    Touch();
    callbacks = on_input_;
    cv_.notify_all();
  }
  for (const auto& fn : callbacks) fn(responses);
}

void Task::Cancel() {
  {
    std::lock_guard lock(mu_);
    if (ended_) return;
    status_message_ = "cancelled by the client";
    End(Status::kCancelled);
  }
  run_->Cancel();  // the handler sees ctx.cancelled() and its OnCancel callbacks run
}

bool Task::ExpiredAt(std::chrono::steady_clock::time_point now,
                     std::chrono::milliseconds ttl) const {
  std::lock_guard lock(mu_);
  return ended_ && finished_ && now - *ended_ >= ttl;
}

Json Task::Created(std::chrono::milliseconds ttl, std::chrono::milliseconds poll_interval) const {
  std::lock_guard lock(mu_);
  return {{"resultType", "task"},
          {"taskId", id_},
          {"status", StatusName(status_)},
          {"createdAt", created_at_},
          {"lastUpdatedAt", updated_at_},
          {"ttlMs", ttl.count()},
          {"pollIntervalMs", poll_interval.count()}};
}

Json Task::Detailed(std::chrono::milliseconds ttl, std::chrono::milliseconds poll_interval) const {
  std::lock_guard lock(mu_);
  Json j = {{"taskId", id_},
            {"status", StatusName(status_)},
            {"createdAt", created_at_},
            {"lastUpdatedAt", updated_at_},
            {"ttlMs", ttl.count()},
            {"pollIntervalMs", poll_interval.count()}};
  if (!status_message_.empty()) j["statusMessage"] = status_message_;
  if (status_ == Status::kInputRequired) j["inputRequests"] = pending_;
  if (status_ == Status::kCompleted) j["result"] = result_;
  if (status_ == Status::kFailed) j["error"] = error_.ToJson();
  return j;
}

// ---- TaskStore ----

void TaskStore::DropExpired() {
  auto now = std::chrono::steady_clock::now();
  for (auto it = tasks_.begin(); it != tasks_.end();) {
    it = it->second->ExpiredAt(now, limits_.ttl) ? tasks_.erase(it) : std::next(it);
  }
}

std::optional<RpcError> TaskStore::Admit(const std::shared_ptr<Task>& task) {
  std::lock_guard lock(mu_);
  DropExpired();
  size_t count = 0;
  for (const auto& [key, unused] : tasks_) count += key.first == task->tenant() ? 1 : 0;
  if (limits_.max_per_tenant != 0 && count >= limits_.max_per_tenant) {
    return RpcError{kInvalidRequest,
                    "too many tasks: this client's tenant already has " + std::to_string(count) +
                        " tasks (running, or finished and kept for their ttl), the most the "
                        "server allows (max_tasks_per_tenant); cancel some or wait for them to "
                        "expire",
                    nullptr};
  }
  tasks_[{task->tenant(), task->id()}] = task;
  return std::nullopt;
}

void TaskStore::Remove(const Task& task) {
  std::lock_guard lock(mu_);
  tasks_.erase({task.tenant(), task.id()});
}

std::shared_ptr<Task> TaskStore::Find(const std::string& tenant, const std::string& task_id) {
  std::lock_guard lock(mu_);
  DropExpired();
  auto it = tasks_.find({tenant, task_id});
  if (it == tasks_.end() || !it->second->published()) return nullptr;
  return it->second;
}

void TaskStore::CancelAll() {
  std::vector<std::shared_ptr<Task>> all;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, task] : tasks_) all.push_back(task);
  }
  for (const auto& task : all) task->Cancel();
}

}  // namespace mcp
