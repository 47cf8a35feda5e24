// HttpServer: the session store over time: closing a session, idle expiry, and the
// POST streams whose client went away.
#include "mcp/http_server_impl.h"

namespace mcp {

void HttpServer::Impl::CloseSession(const std::shared_ptr<HttpSessionEntry>& entry,
                                    const std::string& reason) {
  {
    std::lock_guard lock(mu);
    auto it = sessions.find(entry->http_id);
    if (it == sessions.end() || it->second != entry) return;  // already closing
    sessions.erase(it);
  }
  entry->session->Close();
  entry->channel->Close();
  log::Info("http: session " + entry->session->id() + " (tenant " + entry->tenant +
            ") closed: " + reason);
  if (opts.on_session_closed) opts.on_session_closed(entry->session->id(), entry->tenant, reason);
}

bool HttpServer::CloseSession(const std::string& id, const std::string& reason) {
  std::shared_ptr<HttpSessionEntry> entry;
  {
    std::lock_guard lock(impl_->mu);
    // By Mcp-Session-Id, or by the mcp::Session id (Session::id(), what the embedder's
    // hooks see; it need not be the same).
    for (const auto& [http_id, e] : impl_->sessions) {
      if (http_id == id || e->session->id() == id) entry = e;
    }
    if (!entry || id.empty()) return false;
  }
  // As housekeeping closes an expired one: the channel's Close wakes its streams and the
  // handlers waiting on it, which then find it closed.
  impl_->CloseSession(entry, reason);
  return true;
}

void HttpServer::Impl::Housekeep() {
  std::unique_lock lock(hk_mu);
  while (!stopping) {
    hk_cv.wait_for(lock, std::chrono::seconds(1));
    if (stopping) break;
    std::vector<std::pair<std::shared_ptr<HttpSessionEntry>, std::string>> doomed;
    {
      std::lock_guard l(mu);
      int64_t now = NowMs();
      for (auto& [id, e] : sessions) {
        if (e->session->closed()) {
          doomed.emplace_back(e, "transport closed");
        } else if (e->active == 0 && e->channel->InFlight() == 0 &&
                   now - e->last_used_ms > IdleTimeout(*e).count()) {
          doomed.emplace_back(
              e, "idle for more than " + std::to_string(IdleTimeout(*e).count() / 1000) + " s");
        }
      }
    }
    lock.unlock();
    for (auto& [e, why] : doomed) CloseSession(e, why);
    ReapUnattachedStreams();
    lock.lock();
  }
}

void HttpServer::Impl::ReapUnattachedStreams() {
  std::vector<std::shared_ptr<HttpSessionEntry>> all;
  {
    std::lock_guard l(mu);
    for (auto& [id, e] : sessions) all.push_back(e);
  }
  const int64_t now = NowMs();
  const int64_t grace = opts.resume_grace.count();
  for (auto& e : all) {
    HttpChannel& ch = *e->channel;
    std::vector<Json> cancels;
    {
      std::lock_guard l(ch.mu);
      if (ch.legacy) continue;  // one stream, which ends the session
      for (auto it = ch.streams.begin(); it != ch.streams.end();) {
        Stream& st = *it->second;
        if (st.standalone || st.attached) {
          st.unattached_since_ms = 0;
          ++it;
          continue;
        }
        if (st.unattached_since_ms == 0) st.unattached_since_ms = now;
        if (now - st.unattached_since_ms < grace) {
          ++it;
          continue;
        }
        if (!st.cancelled && !st.pending.empty()) {
          st.cancelled = true;
          for (const auto& [key, id] : st.pending) cancels.push_back(id);
        }
        if (st.finished()) {
          ch.Retire(st.id);
          it = ch.streams.erase(it);
        } else {
          ++it;
        }
      }
    }
    for (const Json& id : cancels) {
      Json note = {{"jsonrpc", "2.0"},
                   {"method", "notifications/cancelled"},
                   {"params",
                    {{"requestId", id},
                     {"reason",
                      "the client's connection closed and the stream was not "
                      "resumed within " +
                          std::to_string(grace / 1000) + " s"}}}};
      log::Info("http: session " + e->session->id() + ": cancelling request " + id.dump() +
                " (its client went away)");
      Deliver(ch, note.dump());
      ch.ForgetCancelled({note});
    }
  }
}

}  // namespace mcp
