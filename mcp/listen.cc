// subscriptions/listen (2026-07-28): the stream through which a new-era client receives
// list-changed and resource-updated notifications, in place of today's GET stream and
// resources/subscribe. The request stays open (it is never answered while the session
// lives; on HTTP its POST is an SSE stream): the server first acknowledges the notification
// types it will honor, then sends each matching notification with the request, tagged with
// the subscription id (the request's id). Cancelling the request or closing the session
// ends the subscription.
#include <algorithm>
#include <variant>

#include "mcp/session_impl.h"

namespace mcp {

namespace {

constexpr const char* kMetaSubscriptionId = "io.modelcontextprotocol/subscriptionId";

// Serializes a listen stream's acknowledgement with the notifications sent to listen
// streams, so none is sent before an acknowledgement and none is missed between it and its
// subscription's start. One for the process: both are quick (a queued send).
std::mutex listen_mu;

// The filter flag that opts in to a list_changed notification, and the capability that
// offers it; nullptr for other methods.
struct ListChange {
  const char* method;
  const char* flag;
  const char* feature;
};
constexpr ListChange kListChanges[] = {
    {"notifications/tools/list_changed", "toolsListChanged", "tools"},
    {"notifications/prompts/list_changed", "promptsListChanged", "prompts"},
    {"notifications/resources/list_changed", "resourcesListChanged", "resources"},
};

// The part of the client's filter this server honors, or the error naming the bad field.
// Filter fields this server does not know are left out of the acknowledgement (the spec's
// way to say "not honored") rather than refused, so a client of a later revision still
// gets the ones it shares with us.
std::variant<Json, RpcError> AcceptedFilter(const Json& params, const Json& caps,
                                            bool resource_subscriptions) {
  auto bad = [](const std::string& what) {
    return RpcError{kInvalidParams, "Invalid params: " + what, nullptr};
  };
  auto filter = params.find("notifications");
  if (filter == params.end() || !filter->is_object()) {
    return bad("\"notifications\" must be an object saying which notifications to send");
  }
  Json accepted = Json::object();
  for (const auto& change : kListChanges) {
    auto flag = filter->find(change.flag);
    if (flag == filter->end()) continue;
    if (!flag->is_boolean()) {
      return bad("notifications." + std::string(change.flag) + " must be a boolean");
    }
    if (flag->get<bool>() && caps.contains(change.feature)) accepted[change.flag] = true;
  }
  if (auto uris = filter->find("resourceSubscriptions"); uris != filter->end()) {
    if (!uris->is_array()) return bad("notifications.resourceSubscriptions must be an array");
    for (const Json& uri : *uris) {
      if (!uri.is_string()) {
        return bad("notifications.resourceSubscriptions must list URIs (strings), got " +
                   uri.dump());
      }
    }
    if (resource_subscriptions && caps.contains("resources")) {
      accepted["resourceSubscriptions"] = *uris;
    }
  }
  return accepted;
}

// Whether a subscription with `filter` asked for `method` (with `params`).
bool Wants(const Json& filter, const std::string& method, const Json& params) {
  for (const auto& change : kListChanges) {
    if (method == change.method) return filter.value(change.flag, false);
  }
  if (method == "notifications/resources/updated" && params.is_object()) {
    const Json uris = filter.value("resourceSubscriptions", Json::array());
    return std::find(uris.begin(), uris.end(), params.value("uri", Json())) != uris.end();
  }
  return false;
}

}  // namespace

void Session::Impl::Listen(const std::shared_ptr<RequestState>& state, const Json& params,
                           Reply reply) {
  auto accepted = AcceptedFilter(params.is_object() ? params : Json::object(),
                                 server->Capabilities(), server->options.resource_subscriptions);
  if (auto* error = std::get_if<RpcError>(&accepted)) {
    reply.Fail(*error);
    return;
  }
  Json filter = std::get<Json>(std::move(accepted));
  // The acknowledgement goes first: nothing of this subscription may precede it. Under
  // listen_mu no notification is sent between it and the subscription's start, so none
  // is missed either.
  std::lock_guard sending(listen_mu);
  NotifyRelated("notifications/subscriptions/acknowledged",
                {{"notifications", filter}, {"_meta", {{kMetaSubscriptionId, state->id}}}},
                state->id);
  {
    std::lock_guard lock(mu);
    listeners[state->key] = {state->id, std::move(filter),
                             std::make_shared<Reply>(std::move(reply))};
  }
  std::weak_ptr<Session> weak_session = weak;
  state->OnCancel([weak_session, key = state->key] {
    auto s = weak_session.lock();
    if (!s) return;
    std::shared_ptr<Reply> held;  // released after the lock: its end reaches the session
    {
      std::lock_guard lock(s->impl_->mu);
      auto it = s->impl_->listeners.find(key);
      if (it == s->impl_->listeners.end()) return;
      held = std::move(it->second.reply);
      s->impl_->listeners.erase(it);
    }
  });
}

bool Session::Impl::NotifyListeners(const std::string& method, const Json& params) {
  std::lock_guard sending(listen_mu);  // see Listen
  std::vector<Json> ids;
  {
    std::lock_guard lock(mu);
    for (const auto& [key, listener] : listeners) {
      if (Wants(listener.filter, method, params)) ids.push_back(listener.id);
    }
  }
  bool sent = false;
  for (const Json& id : ids) {
    Json tagged = params.is_object() ? params : Json::object();
    tagged["_meta"][kMetaSubscriptionId] = id;
    sent = NotifyRelated(method, std::move(tagged), id) || sent;
  }
  return sent;
}

bool Session::Impl::ListensTo(const std::string& uri) const {
  std::lock_guard lock(mu);
  for (const auto& [key, listener] : listeners) {
    if (Wants(listener.filter, "notifications/resources/updated", {{"uri", uri}})) return true;
  }
  return false;
}

}  // namespace mcp
