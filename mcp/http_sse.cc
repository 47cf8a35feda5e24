// HttpServer: writing one SSE stream to a connection, from a sequence number on.
#include "mcp/http_server_impl.h"

namespace mcp {

void HttpServer::Impl::WriteStream(const std::shared_ptr<HttpChannel>& ch,
                                   const std::shared_ptr<Stream>& st, int from, uint64_t gen,
                                   const std::string& preamble, httplib::DataSink& sink) {
  auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
  if (!preamble.empty() && !write(preamble)) return;
  int next = from;
  std::unique_lock lock(ch->mu);
  for (;;) {
    if (st->attach_gen != gen) return;  // displaced by a resumption
    bool wrote = false;
    while (true) {
      auto it = std::find_if(st->events.begin(), st->events.end(),
                             [&](const auto& e) { return e.first >= next; });
      if (it == st->events.end()) break;
      std::string frame = "id: " + std::to_string(st->id) + "_" + std::to_string(it->first) +
                          "\nevent: message\ndata: " + it->second + "\n\n";
      next = it->first + 1;
      lock.unlock();
      bool ok = write(frame);
      lock.lock();
      if (!ok) {
        if (st->attach_gen == gen) st->attached = false;
        return;
      }
      wrote = true;
    }
    (void)wrote;
    if (st->finished() || ch->closed || stopping) {
      if (st->attach_gen == gen) st->attached = false;
      if (st->finished() && !st->standalone) ch->streams.erase(st->id);
      lock.unlock();
      sink.done();
      return;
    }
    // A legacy session ends with its stream, and a POST stream's calls are cancelled when
    // its client is gone for good (Housekeep): probe those often so a gone client is
    // noticed; the standalone GET stream only needs keep-alives.
    auto probe = ch->legacy || !st->standalone ? kPostProbe : kKeepAlive;
    if (!ch->cv.wait_for(lock, probe, [&] {
          return st->attach_gen != gen || ch->closed || stopping || st->finished() ||
                 (!st->events.empty() && st->events.back().first >= next);
        })) {
      lock.unlock();
      bool ok = write(": keep-alive\n\n");
      lock.lock();
      if (!ok) {
        if (st->attach_gen == gen) st->attached = false;
        return;
      }
    }
  }
}

void HttpServer::Impl::ServeSse(httplib::Response& res,
                                const std::shared_ptr<HttpSessionEntry>& entry,
                                const std::shared_ptr<Stream>& st, int from, bool priming) {
  std::string preamble;
  if (priming) preamble = "id: " + std::to_string(st->id) + "_0\ndata: \n\n";
  if (entry->channel->legacy) {
    preamble = "event: endpoint\ndata: " + opts.legacy_messages_path +
               "?sessionId=" + entry->http_id + "\n\n";
  }
  uint64_t gen;
  {
    std::lock_guard lock(entry->channel->mu);
    gen = ++st->attach_gen;
    st->attached = true;
    entry->channel->cv.notify_all();
  }
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  res.set_header("Mcp-Session-Id", entry->http_id);
  ++entry->active;
  auto ch = entry->channel;
  std::weak_ptr<HttpSessionEntry> weak = entry;
  res.set_chunked_content_provider(
      "text/event-stream",
      [this, ch, st, from, gen, preamble](size_t, httplib::DataSink& sink) {
        WriteStream(ch, st, from, gen, preamble, sink);
        return true;
      },
      [this, weak, ch, st, gen](bool) {
        {
          std::lock_guard lock(ch->mu);
          if (st->attach_gen == gen) st->attached = false;
        }
        if (auto e = weak.lock()) {
          e->last_used_ms = NowMs();
          --e->active;
          // A legacy session lives as long as its one GET stream.
          if (ch->legacy) CloseSession(e, "SSE stream closed");
        }
      });
}

}  // namespace mcp
