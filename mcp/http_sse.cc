// HttpServer: SSE answers. ServeSse attaches a connection to a stream; NextSse tells the
// connection (on its I/O strand) what to write next, never blocking; LeaveSse undoes the
// attachment when that connection is done with it, however it ended.
#include "mcp/http_server_impl.h"

namespace mcp {

SseStep HttpServer::Impl::NextSse(const SseAttachment& a, int& next, std::function<void()> waker) {
  HttpChannel& ch = *a.entry->channel;
  Stream& st = *a.stream;
  SseStep step;
  std::lock_guard lock(ch.mu);
  if (st.attach_gen != a.gen) {
    step.kind = SseStep::kDisplaced;
    return step;
  }
  for (const auto& [seq, data] : st.events) {
    if (seq < next) continue;
    step.frames += "id: " + std::to_string(st.id) + "_" + std::to_string(seq) +
                   "\nevent: message\ndata: " + data + "\n\n";
    next = seq + 1;
  }
  if (!step.frames.empty()) {
    step.kind = SseStep::kWrite;
    return step;
  }
  if (st.finished() || ch.closed || stopping) {
    st.attached = false;
    st.wake = nullptr;
    if (st.finished() && !st.standalone) ch.streams.erase(st.id);
    step.kind = SseStep::kEnd;
    return step;
  }
  // A legacy session ends with its stream, and a POST stream's calls are cancelled when its
  // client is gone for good (Housekeep): probe those often so a gone client is noticed; the
  // standalone GET stream only needs keep-alives.
  step.kind = SseStep::kWait;
  step.probe = ch.legacy || !st.standalone ? kPostProbe : kKeepAlive;
  st.wake = std::move(waker);
  return step;
}

void HttpServer::Impl::LeaveSse(const SseAttachment& a) {
  auto& ch = a.entry->channel;
  {
    std::lock_guard lock(ch->mu);
    if (a.stream->attach_gen == a.gen) {
      a.stream->attached = false;
      a.stream->wake = nullptr;
    }
  }
  a.entry->last_used_ms = NowMs();
  --a.entry->active;
  if (ch->ephemeral) {
    // A new-era request's session ends with its stream, answered or not (a client that goes
    // away cancels its request). Close waits for handlers: not on an I/O thread.
    auto session = a.entry->session;
    if (stopping) {
      session->Close();
    } else {
      handlers.enqueue([session] { session->Close(); });
    }
    return;
  }
  if (!ch->legacy) return;
  // A legacy session lives as long as its one GET stream. Closing it calls the
  // application (on_session_closed), which may take a while: not on an I/O thread.
  auto entry = a.entry;
  if (stopping) {
    CloseSession(entry, "SSE stream closed");
  } else {
    handlers.enqueue([this, entry] { CloseSession(entry, "SSE stream closed"); });
  }
}

void HttpServer::Impl::ServeSse(HttpResponse& res, const std::shared_ptr<HttpSessionEntry>& entry,
                                const std::shared_ptr<Stream>& st, int from, bool priming) {
  SseAttachment a;
  a.entry = entry;
  a.stream = st;
  a.from = from;
  if (priming) a.preamble = "id: " + std::to_string(st->id) + "_0\ndata: \n\n";
  if (entry->channel->legacy) {
    a.preamble = "event: endpoint\ndata: " + opts.legacy_messages_path +
                 "?sessionId=" + entry->http_id + "\n\n";
  }
  {
    std::lock_guard lock(entry->channel->mu);
    a.gen = ++st->attach_gen;
    st->attached = true;
    st->Wake();  // a connection this one displaces sees its attachment is gone
    entry->channel->cv.notify_all();
  }
  ++entry->active;
  // Whatever becomes of the answer (written, dropped with its connection, never sent),
  // the attachment is undone exactly once, when the last copy of the lease goes.
  a.lease = std::shared_ptr<void>(nullptr, [this, copy = a](void*) mutable {
    copy.lease.reset();
    LeaveSse(copy);
  });
  res.status = 200;
  res.set_header("Cache-Control", "no-cache");
  if (!entry->channel->ephemeral) res.set_header("Mcp-Session-Id", entry->http_id);
  res.content_type = "text/event-stream";
  res.sse = std::move(a);
}

}  // namespace mcp
