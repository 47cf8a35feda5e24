// Multi-round requests of 2026-07-28 (input_required results): what a retry brings back is
// checked before its handler runs, and what a handler asks for is turned into the result,
// its state sealed by the server's RequestStateMac. See Context::RequireInput.
#include <algorithm>
#include <set>

#include "mcp/session_impl.h"

namespace mcp {

namespace {

// The requests that may answer input_required (the spec's list, tasks/result aside).
bool CarriesInputRounds(const std::string& method) {
  static const std::set<std::string, std::less<>> kMethods = {"tools/call", "prompts/get",
                                                              "resources/read"};
  return kMethods.count(method) > 0;
}

// What a sealed state is bound to: the method and the tool, prompt or resource it names, so
// the state of one tool's call cannot be replayed into another's.
std::string Binding(const std::string& method, const Json& params) {
  const char* field = method == "resources/read" ? "uri" : "name";
  Json target = params.is_object() ? params.value(field, Json()) : Json();
  return method + " " + (target.is_string() ? target.get<std::string>() : target.dump());
}

RpcError Bad(const std::string& what) {
  return {kInvalidParams, "Invalid params: " + what, nullptr};
}

}  // namespace

std::optional<RpcError> Session::Impl::AdmitInputRound(const Json& params,
                                                       RequestState& state) const {
  if (!CarriesInputRounds(state.method) || !params.is_object()) return std::nullopt;
  // requestState first: it says which input requests the server made, which the responses
  // must answer.
  Json asked = Json::array();
  if (auto sealed = params.find("requestState"); sealed != params.end()) {
    if (!sealed->is_string()) return Bad("\"requestState\" must be the string the server sent");
    auto opened = server->state_mac.Open(Binding(state.method, params), sealed->get<std::string>());
    if (auto* why = std::get_if<std::string>(&opened)) return Bad(*why);
    Json envelope = std::get<Json>(std::move(opened));
    if (!envelope.is_object() || !envelope.contains("asked") || !envelope["asked"].is_array()) {
      return Bad("\"requestState\" was not made by this server's input_required result");
    }
    asked = envelope["asked"];
    state.request_state = envelope.value("state", Json());
  }
  if (auto responses = params.find("inputResponses"); responses != params.end()) {
    if (!responses->is_object()) {
      return Bad("\"inputResponses\" must be an object of {key: the client's result}, got " +
                 std::string(responses->type_name()));
    }
    for (const auto& [key, value] : responses->items()) {
      if (!value.is_object()) {
        return Bad("inputResponses[\"" + key + "\"] must be an object (a result), got " +
                   value.type_name());
      }
      if (std::find(asked.begin(), asked.end(), Json(key)) == asked.end()) {
        return Bad("inputResponses[\"" + key + "\"] answers nothing the server asked for" +
                   (asked.empty() ? std::string(" (the retry carries no requestState naming "
                                                "the input requests)")
                                  : " (it asked for " + asked.dump() + ")"));
      }
    }
    state.input_responses = *responses;
  }
  return std::nullopt;
}

Json Session::Impl::InputRequiredResult(const std::string& method, const Json& params,
                                        const InputRequired& need) const {
  if (!CarriesInputRounds(method)) {
    throw RpcException(kInternalError, "the handler of " + method +
                                           " asked for client input, but only tools/call, "
                                           "prompts/get and resources/read may");
  }
  if (!need.input_requests.is_object() || need.input_requests.empty()) {
    throw RpcException(kInternalError, "the handler of " + method +
                                           " asked for client input without input requests");
  }
  // The sealed state always names the keys asked for, so a retry's inputResponses can be
  // checked against them (AdmitInputRound); the handler's own state rides along.
  Json asked = Json::array();
  for (const auto& [key, unused] : need.input_requests.items()) asked.push_back(key);
  Json envelope = {{"asked", std::move(asked)}, {"state", need.state}};
  return {{"resultType", "input_required"},
          {"inputRequests", need.input_requests},
          {"requestState", server->state_mac.Seal(Binding(method, params), envelope)}};
}

}  // namespace mcp
