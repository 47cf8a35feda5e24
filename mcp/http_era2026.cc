// HttpServer: a 2026-07-28 POST (see era2026.h). No initialize and no Mcp-Session-Id: the
// request names its version in MCP-Protocol-Version and in _meta, is checked against its
// headers, and is served by a Session that lives for this one request. Its answer is JSON
// with the status the spec gives each error, or an SSE stream when the request sends
// progress or log messages, or is still running after kNewEraJsonWait.
#include "mcp/era2026.h"
#include "mcp/http_headers.h"
#include "mcp/http_server_impl.h"

namespace mcp {

namespace {

// How long a POST handler thread waits for a new-era answer before streaming it instead:
// long enough that quick calls (and errors raised by handlers) get their JSON answer and
// HTTP status, short enough that a long call holds no handler thread.
constexpr auto kNewEraJsonWait = std::chrono::seconds(2);

void AnswerError(HttpResponse& res, const Json& id, const RpcError& error) {
  Json response = jsonrpc::MakeError(id, error);
  res.status = era2026::HttpStatusOf(response);
  res.set_content(response.dump(), "application/json");
}

}  // namespace

bool HttpServer::Impl::IsNewEraPost(const HttpRequest& req, const Json& body) const {
  if (req.has_header("Mcp-Session-Id") || !server.options().serve_2026_era) return false;
  // Today's versions need a session: without one they get today's answer (400). Today's
  // clients send no version header with initialize; a new-era client's initialize is
  // answered as the removed method it is (404).
  if (std::string v = req.get_header_value("MCP-Protocol-Version"); !v.empty()) {
    return !IsSupportedVersion(v);
  }
  return body.is_object() && body.contains("method") &&
         era2026::StartsNewEra(body.value("method", ""), body.value("params", Json()));
}

std::optional<RpcError> HttpServer::Impl::CheckNewEraRequest(const HttpRequest& req,
                                                             const Json& body) const {
  // The order of the reference server: header present, _meta complete, header and _meta
  // agree, version supported, then the routing headers.
  if (!req.has_header("MCP-Protocol-Version")) {
    return RpcError{era2026::kHeaderMismatch,
                    "Header mismatch: the MCP-Protocol-Version header is missing", nullptr};
  }
  const std::string header = req.get_header_value("MCP-Protocol-Version");
  const Json params = body.value("params", Json());
  auto parsed = era2026::ParseRequestMeta(params);
  auto* error = std::get_if<RpcError>(&parsed);
  if (error && error->code == kInvalidParams) return *error;
  const Json& version = params["_meta"][era2026::kMetaProtocolVersion];
  if (!version.is_string() || version.get<std::string>() != header) {
    return RpcError{era2026::kHeaderMismatch,
                    "Header mismatch: MCP-Protocol-Version \"" + header +
                        "\" but params._meta says " + version.dump(),
                    nullptr};
  }
  if (error) return *error;
  if (auto mismatch = CheckRoutingHeaders(req, body)) return mismatch;
  if (body.value("method", "") == "tools/call" && params.value("name", Json()).is_string()) {
    Json schema = server.ToolInputSchema(params["name"].get<std::string>());
    return CheckParamHeaders(req, params.value("arguments", Json()), schema);
  }
  return std::nullopt;
}

void HttpServer::Impl::HandleNewEraPost(const HttpRequest& req, HttpResponse& res,
                                        const HttpTenant& tenant, const Json& body) {
  if (!body.is_object()) {
    JsonError(res, 400,
              "Invalid Request: protocol version 2026-07-28 has no batches; send one "
              "JSON-RPC message per POST");
    return;
  }
  if (!body.contains("method") || !body.contains("id")) {
    res.status = 202;  // a notification or response: no session to hand it to
    return;
  }
  const Json& id = body["id"];
  if (!jsonrpc::IsValidId(id)) {
    JsonError(res, 400,
              "Invalid Request: a request id must be a string or an integer, got " + id.dump());
    return;
  }
  if (auto refused = CheckNewEraRequest(req, body)) {
    AnswerError(res, id, *refused);
    return;
  }
  auto entry = NewEntry(RandomHex(16), tenant);
  auto& ch = entry->channel;
  ch->ephemeral = true;
  entry->session =
      server.Connect(std::make_unique<HttpSessionTransport>(ch), SessionTenant(*entry));
  std::shared_ptr<Stream> st = OpenPostStream(*ch, {body});
  Deliver(*ch, req.body);
  std::string answer;
  {
    std::unique_lock lock(ch->mu);
    ch->cv.wait_for(lock, kNewEraJsonWait, [&] { return !st->events.empty() || ch->closed; });
    if (st->finished() && st->events.size() == 1) {
      answer = st->events.front().second;
      ch->streams.erase(st->id);
      ch->Retire(st->id);
    }
  }
  if (answer.empty()) {
    ServeSse(res, entry, st, 1, false);  // LeaveSse closes the session
    return;
  }
  entry->session->Close();
  Json response = Json::parse(answer, nullptr, false);
  res.status = era2026::HttpStatusOf(response);
  res.set_content(answer, "application/json");
}

}  // namespace mcp
