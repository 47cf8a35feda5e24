// HttpServer: GET (the standalone stream, or a stream resumed from Last-Event-ID), the
// legacy HTTP+SSE transport (2024-11-05) and DELETE.
#include "mcp/http_server_impl.h"

namespace mcp {

void HttpServer::Impl::HandleGet(const HttpRequest& req, HttpResponse& res) {
  if (!CheckHostOrigin(req, res)) return;
  auto tenant = Authenticate(req, res);
  if (!tenant) return;
  if (Lower(req.get_header_value("Accept")).find("text/event-stream") == std::string::npos) {
    JsonError(res, 406, "Not Acceptable: GET needs \"Accept: text/event-stream\"");
    return;
  }
  auto entry = FindSession(req, res, *tenant);
  if (!entry) return;
  auto& ch = entry->channel;
  std::shared_ptr<Stream> st;
  int from = 1;
  if (req.has_header("Last-Event-ID")) {
    std::string last = req.get_header_value("Last-Event-ID");
    size_t us = last.find('_');
    int sid = 0, seq = 0;
    try {
      if (us == std::string::npos) throw std::invalid_argument("no _");
      sid = std::stoi(last.substr(0, us));
      seq = std::stoi(last.substr(us + 1));
    } catch (const std::exception&) {
      JsonError(res, 400,
                "Bad Request: Last-Event-ID \"" + last +
                    "\" is not an event id of "
                    "this server");
      return;
    }
    std::lock_guard lock(ch->mu);
    st = ch->Find(sid);
    if (!st) {
      JsonError(res, 404, "Not Found: stream of event " + last + " is finished or unknown");
      return;
    }
    from = seq + 1;
  } else {
    std::lock_guard lock(ch->mu);
    st = ch->Find(ch->standalone_id);
    if (st && st->attached) {
      JsonError(res, 409, "Conflict: this session already has an open GET stream");
      return;
    }
    if (!st) st = ch->NewStream(true);
  }
  ServeSse(res, entry, st, from, false);
}

void HttpServer::Impl::HandleLegacySse(const HttpRequest& req, HttpResponse& res) {
  if (!CheckHostOrigin(req, res)) return;
  auto tenant = Authenticate(req, res);
  if (!tenant) return;
  if (Lower(req.get_header_value("Accept")).find("text/event-stream") == std::string::npos) {
    JsonError(
        res, 406,
        "Not Acceptable: GET " + opts.legacy_sse_path + " needs \"Accept: text/event-stream\"");
    return;
  }
  if (tenant->max_sessions && TenantSessions(tenant->name) >= tenant->max_sessions) {
    res.set_header("Retry-After", "60");
    JsonError(res, 429,
              "Too Many Requests: tenant " + tenant->name +
                  " has reached its limit "
                  "of " +
                  std::to_string(tenant->max_sessions) +
                  " live sessions; end one or retry after one expires");
    return;
  }
  auto entry = std::make_shared<HttpSessionEntry>();
  entry->http_id = RandomHex(16);
  entry->tenant = tenant->name;
  entry->quotas = *tenant;
  entry->channel = std::make_shared<HttpChannel>();
  entry->channel->legacy = true;
  entry->last_used_ms = NowMs();
  std::shared_ptr<Stream> st;
  {
    std::lock_guard lock(entry->channel->mu);
    st = entry->channel->NewStream(true);
  }
  entry->session =
      server.Connect(std::make_unique<HttpSessionTransport>(entry->channel), SessionTenant(*entry));
  {
    std::lock_guard lock(mu);
    sessions[entry->http_id] = entry;
  }
  ServeSse(res, entry, st, 1, false);
}

void HttpServer::Impl::HandleLegacyMessage(const HttpRequest& req, HttpResponse& res) {
  if (!CheckHostOrigin(req, res)) return;
  auto tenant = Authenticate(req, res);
  if (!tenant) return;
  std::string id = req.get_param_value("sessionId");
  std::shared_ptr<HttpSessionEntry> entry;
  {
    std::lock_guard lock(mu);
    auto it = sessions.find(id);
    if (it != sessions.end() && it->second->tenant == tenant->name && it->second->channel->legacy) {
      entry = it->second;
    }
  }
  if (!entry || entry->session->closed()) {
    JsonError(
        res, 404,
        "Not Found: no SSE session \"" + id + "\"; open GET " + opts.legacy_sse_path + " first");
    return;
  }
  std::string ctype = Lower(req.get_header_value("Content-Type"));
  if (ctype.rfind("application/json", 0) != 0) {
    JsonError(res, 415, "Unsupported Media Type: Content-Type must be application/json");
    return;
  }
  if (RefuseOversizedBody(req, res, *tenant) || RefuseTooDeepBody(req, res)) return;
  if (Json::parse(req.body, nullptr, false).is_discarded()) {
    JsonError(res, 400, "Parse error: the body is not valid JSON", kParseError);
    return;
  }
  entry->last_used_ms = NowMs();
  Deliver(*entry->channel, req.body);
  res.status = 202;
  res.set_content("Accepted", "text/plain");
}

void HttpServer::Impl::HandleDelete(const HttpRequest& req, HttpResponse& res) {
  if (!CheckHostOrigin(req, res)) return;
  auto tenant = Authenticate(req, res);
  if (!tenant) return;
  auto entry = FindSession(req, res, *tenant);
  if (!entry) return;
  CloseSession(entry, "deleted by the client");
  res.status = 200;
}

}  // namespace mcp
