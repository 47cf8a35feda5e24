// The Tasks extension's side of a session (tasks.h): a tools/call that may become a task,
// and tasks/get, tasks/update, tasks/cancel. The task outlives the session that started it
// (on HTTP a new-era session lives for one POST): its handler runs with a request state of
// its own on the server's worker pool, and the store is the server's, keyed by tenant.
#include "mcp/log.h"
#include "mcp/session_impl.h"

namespace mcp {

namespace {

// The handler's own request state: the call's identity and what its _meta said, but not
// in the session's in_flight table, so closing the session does not cancel the task.
std::shared_ptr<RequestState> DetachedRun(const RequestState& call) {
  auto run = std::make_shared<RequestState>();
  run->id = call.id;
  run->key = call.key;
  run->method = call.method;
  run->meta = call.meta;
  run->era_meta = call.era_meta;
  run->input_responses = call.input_responses;
  run->request_state = call.request_state;
  return run;
}

// The task whose id params.taskId names, of this client's tenant; -32602 otherwise.
std::shared_ptr<Task> FindTask(TaskStore& store, const std::string& tenant, const Json& params) {
  auto id = params.find("taskId");
  if (id == params.end() || !id->is_string()) {
    throw RpcException(kInvalidParams, "Invalid params: \"taskId\" must be a string");
  }
  auto task = store.Find(tenant, id->get<std::string>());
  if (!task) {
    // Another tenant's task is not found either: ids are not an oracle across tenants.
    throw RpcException(kInvalidParams, "Invalid params: no task " + id->dump() +
                                           " (unknown, expired, or not this client's)");
  }
  return task;
}

}  // namespace

Json Session::Impl::CallToolAsTask(const std::shared_ptr<const Tool>& tool, const Json& args,
                                   Context& ctx) {
  auto self = weak.lock();
  if (!self) throw RpcException(kInternalError, "the session closed");
  auto run = DetachedRun(*RequestOf(ctx));
  auto task = std::make_shared<Task>(tenant, run);
  run->task = task;
  if (auto refused = server->tasks.Admit(task)) throw RpcException(*refused);
  // Until the call has answered with the task, cancelling the call cancels the run.
  ctx.OnCancel([task] {
    if (!task->published()) task->Cancel();
  });
  server->Post([self, tool, args, run, task] {
    Context run_ctx(self, run);
    try {
      task->Complete(self->impl_->RunTool(*tool, args, run_ctx));
    } catch (const InputRequired& need) {
      task->NeedsRound(need.input_requests, need.state);
    } catch (const RpcException& e) {
      task->Fail(e.error());
    } catch (const std::exception& e) {
      task->Fail({kInternalError, std::string("Internal error: ") + e.what(), nullptr});
    }
  });
  const auto& o = server->options;
  Task::Start start = task->WaitStart(o.task_threshold);
  const bool always_task = tool->task_support == TaskSupport::kRequired;
  if (start == Task::Start::kFinished) {
    if (auto round = task->round()) {
      server->tasks.Remove(*task);
      throw InputRequired{round->first, round->second};
    }
    if (task->status() == Task::Status::kCancelled) {
      server->tasks.Remove(*task);
      throw RpcException(kRequestCancelled, "the call was cancelled");
    }
    if (!always_task) {
      server->tasks.Remove(*task);
      if (task->status() == Task::Status::kFailed) throw RpcException(task->error());
      return task->result();
    }
  }
  task->Publish();
  log::Info(id + ": tools/call " + tool->name + " answers with task " + task->id());
  return task->Created(o.task_ttl, o.task_poll_interval);
}

Json Session::Impl::GetTask(const Json& params, Context& ctx) {
  if (!ctx.era_2026()) throw RpcException(kMethodNotFound, "Method not found: tasks/get");
  if (!DeclaresTasks(ctx.client_capabilities())) {
    throw RpcException(MissingTasksExtension("tasks/get belongs to the tasks extension"));
  }
  auto task = FindTask(server->tasks, tenant, params);
  const auto& o = server->options;
  return task->Detailed(o.task_ttl, o.task_poll_interval);
}

Json Session::Impl::UpdateTask(const Json& params, Context& ctx) {
  if (!ctx.era_2026()) throw RpcException(kMethodNotFound, "Method not found: tasks/update");
  if (!DeclaresTasks(ctx.client_capabilities())) {
    throw RpcException(MissingTasksExtension("tasks/update belongs to the tasks extension"));
  }
  auto task = FindTask(server->tasks, tenant, params);
  auto responses = params.find("inputResponses");
  if (responses == params.end() || !responses->is_object()) {
    throw RpcException(kInvalidParams,
                       "Invalid params: \"inputResponses\" must be an object of {key: result}");
  }
  for (const auto& [key, value] : responses->items()) {
    if (!value.is_object()) {
      throw RpcException(kInvalidParams, "Invalid params: inputResponses[\"" + key +
                                             "\"] must be an object (a result), got " +
                                             value.type_name());
    }
  }
  task->Deliver(*responses);
  return Json::object();
}

Json Session::Impl::CancelTask(const Json& params, Context& ctx) {
  if (!ctx.era_2026()) throw RpcException(kMethodNotFound, "Method not found: tasks/cancel");
  if (!DeclaresTasks(ctx.client_capabilities())) {
    throw RpcException(MissingTasksExtension("tasks/cancel belongs to the tasks extension"));
  }
  FindTask(server->tasks, tenant, params)->Cancel();
  return Json::object();
}

}  // namespace mcp
