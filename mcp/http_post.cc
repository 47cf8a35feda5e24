// HttpServer: POST, the client's messages: headers, body, request ids, quotas, then the
// answers on the POST's own SSE stream; and initialize, which makes a session.
#include "mcp/http_server_impl.h"

namespace mcp {

bool HttpServer::Impl::CheckPostHeaders(const HttpRequest& req, HttpResponse& res) {
  std::string ctype = Lower(req.get_header_value("Content-Type"));
  if (ctype.rfind("application/json", 0) != 0) {
    JsonError(
        res, 415,
        "Unsupported Media Type: Content-Type must be application/json, got \"" + ctype + "\"");
    return false;
  }
  std::string accept = Lower(req.get_header_value("Accept"));
  bool accepts_json = accept.find("application/json") != std::string::npos ||
                      accept.find("*/*") != std::string::npos;
  bool accepts_sse = accept.find("text/event-stream") != std::string::npos ||
                     accept.find("*/*") != std::string::npos;
  if (!accepts_json || !accepts_sse) {
    JsonError(res, 406,
              "Not Acceptable: Accept must list both application/json and "
              "text/event-stream");
    return false;
  }
  return true;
}

std::optional<std::vector<Json>> HttpServer::Impl::ParsePostBody(const HttpRequest& req,
                                                                 HttpResponse& res,
                                                                 const HttpTenant& tenant,
                                                                 Json& body) {
  if (RefuseOversizedBody(req, res, tenant) || RefuseTooDeepBody(req, res)) return std::nullopt;
  body = Json::parse(req.body, nullptr, false);
  if (body.is_discarded()) {
    JsonError(res, 400, "Parse error: the body is not valid JSON", kParseError);
    return std::nullopt;
  }
  std::vector<Json> items;
  if (body.is_array()) {
    for (auto& v : body) items.push_back(v);
  } else {
    items.push_back(body);
  }
  if (items.empty() ||
      !std::all_of(items.begin(), items.end(), [](const Json& v) { return v.is_object(); })) {
    JsonError(res, 400,
              "Invalid Request: the body must be a JSON-RPC message or a non-empty "
              "array of them");
    return std::nullopt;
  }
  return items;
}

std::optional<std::vector<std::string>> HttpServer::Impl::RequestKeys(
    HttpChannel& ch, const std::vector<Json>& items, HttpResponse& res) {
  std::vector<std::string> keys;
  for (const Json& v : items) {
    if (v.contains("method") && v.contains("id")) {
      // The answer to a request is routed to its stream by id. An id the session cannot
      // echo (it answers id null) or one already in flight would leave this POST waiting
      // for an answer that never comes to it.
      const Json& rid = v["id"];
      if (!jsonrpc::IsValidId(rid)) {
        JsonError(
            res, 400,
            "Invalid Request: a request id must be a string or an integer, got " + rid.dump());
        return std::nullopt;
      }
      keys.push_back(jsonrpc::IdKey(rid));
    }
    if (v.value("method", "") == "initialize") {
      JsonError(res, 400, "Invalid Request: this session is already initialized");
      return std::nullopt;
    }
  }
  std::lock_guard lock(ch.mu);
  std::set<std::string> seen;
  for (const std::string& key : keys) {
    if (ch.by_request.count(key) || !seen.insert(key).second) {
      JsonError(res, 409,
                "Conflict: request id " + key +
                    " is already in use by a request in flight in this session; use a new "
                    "id for each request");
      return std::nullopt;
    }
  }
  return keys;
}

bool HttpServer::Impl::RefuseOverCallQuota(HttpSessionEntry& entry, size_t calls,
                                           HttpResponse& res) {
  size_t limit = entry.quotas.max_concurrent_calls;
  if (limit == 0 || entry.channel->InFlight() + calls <= limit) return false;
  res.set_header("Retry-After", "1");
  JsonError(res, 429,
            "Too Many Requests: limit of " + std::to_string(limit) +
                " concurrent calls per session reached (tenant " + entry.tenant +
                "); retry when a call has finished");
  return true;
}

std::shared_ptr<Stream> HttpServer::Impl::OpenPostStream(HttpChannel& ch,
                                                         const std::vector<Json>& items) {
  std::lock_guard lock(ch.mu);
  std::shared_ptr<Stream> st = ch.NewStream(false);
  for (const Json& v : items) {
    if (!v.contains("method") || !v.contains("id")) continue;
    std::string key = jsonrpc::IdKey(v["id"]);
    st->pending[key] = v["id"];
    ch.by_request[key] = st->id;
    const Json* params = v.contains("params") ? &v["params"] : nullptr;
    if (params && params->is_object() && params->contains("_meta") &&
        (*params)["_meta"].is_object() && (*params)["_meta"].contains("progressToken")) {
      std::string token = (*params)["_meta"]["progressToken"].dump();
      ch.by_progress[token] = st->id;
      ch.progress_of[key] = token;
    }
  }
  return st;
}

void HttpServer::Impl::HandlePost(const HttpRequest& req, HttpResponse& res) {
  if (!CheckHostOrigin(req, res)) return;
  auto tenant = Authenticate(req, res);
  if (!tenant || !CheckPostHeaders(req, res)) return;
  Json body;
  auto items = ParsePostBody(req, res, *tenant, body);
  if (!items) return;
  if (IsNewEraPost(req, body)) {
    HandleNewEraPost(req, res, *tenant, body);
    return;
  }
  if (body.is_object() && body.value("method", "") == "initialize" && body.contains("id")) {
    Initialize(req, res, *tenant, body);
    return;
  }
  auto entry = FindSession(req, res, *tenant);
  if (!entry) return;
  ++entry->active;
  struct Done {
    HttpSessionEntry& e;
    ~Done() {
      e.last_used_ms = NowMs();
      --e.active;
    }
  } done{*entry};
  auto& ch = entry->channel;
  auto keys = RequestKeys(*ch, *items, res);
  if (!keys) return;
  if (keys->empty()) {  // notifications and responses only
    Deliver(*ch, req.body);
    ch->ForgetCancelled(*items);
    res.status = 202;
    return;
  }
  if (RefuseOverCallQuota(*entry, keys->size(), res)) return;
  std::shared_ptr<Stream> st = OpenPostStream(*ch, *items);
  bool priming = entry->session->protocol_version() >= "2025-11-25";
  ServeSse(res, entry, st, 1, priming);
  Deliver(*ch, req.body);
  ch->ForgetCancelled(*items);
}

void HttpServer::Impl::Deliver(HttpChannel& ch, const std::string& text) {
  std::lock_guard lock(ch.deliver_mu);
  if (ch.callbacks.on_message) ch.callbacks.on_message(text);
}

void HttpServer::Impl::Initialize(const HttpRequest& req, HttpResponse& res,
                                  const HttpTenant& tenant, const Json& body) {
  if (req.has_header("Mcp-Session-Id")) {
    // Re-initializing within a session is not allowed; a stale id just starts fresh.
    std::lock_guard lock(mu);
    auto it = sessions.find(req.get_header_value("Mcp-Session-Id"));
    if (it != sessions.end() && it->second->tenant == tenant.name &&
        !it->second->session->closed()) {
      JsonError(res, 400, "Invalid Request: this session is already initialized");
      return;
    }
  }
  if (tenant.max_sessions && TenantSessions(tenant.name) >= tenant.max_sessions) {
    res.set_header("Retry-After", "60");
    JsonError(res, 429,
              "Too Many Requests: tenant " + tenant.name +
                  " has reached its limit "
                  "of " +
                  std::to_string(tenant.max_sessions) +
                  " live sessions; end one (DELETE) or retry after one expires");
    return;
  }
  auto entry = NewEntry(RandomHex(16), tenant);
  std::string answer = ConnectInitialized(entry, body["id"], req.body);
  Json reply = Json::parse(answer, nullptr, false);
  if (answer.empty() || reply.is_discarded() || !reply.contains("result")) {
    entry->session->Close();
    if (answer.empty()) {
      JsonError(res, 500, "Internal error: initialize was not answered", kInternalError);
    } else {
      res.status = 200;  // a JSON-RPC error: delivered as is, no session made
      res.set_content(answer, "application/json");
    }
    return;
  }
  {
    std::lock_guard lock(mu);
    sessions[entry->http_id] = entry;
  }
  log::Info("http: session " + entry->session->id() + " opened for tenant " + tenant.name);
  if (opts.on_session_opened) opts.on_session_opened(entry->http_id, *entry->session);
  res.status = 200;
  res.set_header("Mcp-Session-Id", entry->http_id);
  res.set_content(answer, "application/json");
}

std::shared_ptr<HttpSessionEntry> HttpServer::Impl::NewEntry(const std::string& http_id,
                                                             const HttpTenant& tenant) {
  auto entry = std::make_shared<HttpSessionEntry>();
  entry->http_id = http_id;
  entry->tenant = tenant.name;
  entry->quotas = tenant;
  entry->channel = std::make_shared<HttpChannel>();
  entry->last_used_ms = NowMs();
  return entry;
}

std::string HttpServer::Impl::ConnectInitialized(const std::shared_ptr<HttpSessionEntry>& entry,
                                                 const Json& id, const std::string& initialize) {
  std::string key = jsonrpc::IdKey(id);
  std::shared_ptr<Stream> st;
  {
    std::lock_guard lock(entry->channel->mu);
    st = entry->channel->NewStream(false);
    st->pending[key] = id;
    entry->channel->by_request[key] = st->id;
  }
  entry->session =
      server.Connect(std::make_unique<HttpSessionTransport>(entry->channel), SessionTenant(*entry));
  Deliver(*entry->channel, initialize);
  std::string answer;
  std::unique_lock lock(entry->channel->mu);
  entry->channel->cv.wait_for(lock, kInitTimeout,
                              [&] { return !st->events.empty() || entry->channel->closed; });
  if (!st->events.empty()) answer = st->events.front().second;
  entry->channel->streams.erase(st->id);
  entry->channel->Retire(st->id);
  return answer;
}

std::shared_ptr<HttpSessionEntry> HttpServer::Impl::Revive(const std::string& http_id,
                                                           const HttpRequest& req,
                                                           HttpResponse& res,
                                                           const HttpTenant& tenant) {
  if (!opts.revive_session) return nullptr;
  std::lock_guard revive_lock(revive_mu);  // one revival at a time: never two for one id
  {
    std::lock_guard lock(mu);
    if (auto it = sessions.find(http_id); it != sessions.end())  // revived meanwhile
      return it->second->tenant == tenant.name ? it->second : nullptr;
  }
  auto entry = NewEntry(http_id, tenant);
  auto revived = opts.revive_session(http_id, SessionTenant(*entry));
  if (!revived) return nullptr;
  if (tenant.max_sessions && TenantSessions(tenant.name) >= tenant.max_sessions) {
    res.set_header("Retry-After", "60");
    JsonError(res, 429,
              "Too Many Requests: tenant " + tenant.name + " has reached its limit of " +
                  std::to_string(tenant.max_sessions) +
                  " live sessions; end one (DELETE) or retry to resume this one later");
    return nullptr;
  }
  std::string version = req.get_header_value("MCP-Protocol-Version");
  if (version.empty()) version = revived->protocol_version;
  const Json id = "mcp-revive";
  Json init = {{"jsonrpc", "2.0"},
               {"id", id},
               {"method", "initialize"},
               {"params",
                {{"protocolVersion", version},
                 {"capabilities", revived->client_capabilities},
                 {"clientInfo", revived->client_info}}}};
  std::string answer = ConnectInitialized(entry, id, init.dump());
  Json reply = Json::parse(answer, nullptr, false);
  if (reply.is_discarded() || !reply.contains("result")) {
    entry->session->Close();
    log::Warn("http: session " + http_id + " could not be revived: " +
              (answer.empty() ? std::string("initialize was not answered") : answer));
    return nullptr;
  }
  Deliver(*entry->channel, R"({"jsonrpc":"2.0","method":"notifications/initialized"})");
  {
    std::lock_guard lock(mu);
    sessions[http_id] = entry;
  }
  log::Info("http: session " + entry->session->id() + " revived as " + http_id + " for tenant " +
            tenant.name);
  if (opts.on_session_opened) opts.on_session_opened(http_id, *entry->session);
  return entry;
}

}  // namespace mcp
