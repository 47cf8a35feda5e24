// The Connection's steps for placeholder secrets (proxy.h, docs/secrets.md): refusing a
// plain-HTTP request that carries a placeholder, in its head or later in its body, and
// handing an allowed CONNECT to a host of the cell's secrets over to an Interception.
// Same class and threading as connection.cc (the cell's strand).
#include <chrono>

#include "egress/connection.h"
#include "egress/intercept.h"
#include "egress/secret_substitution.h"

namespace mcpcell::egress {

bool Connection::RefusePlaceholder(std::string_view raw) {
  const std::vector<SecretGrant>& grants = cell_->cfg.secrets;
  if (grants.empty()) return false;
  std::optional<SecretRefusal> refusal =
      RefusePlainHttp(raw, grants, request_.target.host, request_.port());
  if (!refusal) return false;
  if (cell_->shared.interception->on_secret) {
    try {
      cell_->shared.interception->on_secret(SecretEvent{cell_->cfg.session_id, refusal->secret,
                                                        Target(), refusal->surface, "refused",
                                                        refusal->Line(), refusal->end_session});
    } catch (...) {
      // Like the audit sink: never takes the proxy thread down.
    }
  }
  if (phase_ == Phase::kPipe) {  // body bytes went upstream already: cut both sides
    cell_->counters.refused++;
    decision_ = "deny";
    Note(refusal->Line());
    TellRefusal(refusal->Line());
    Finish();
    return true;
  }
  cell_->counters.refused++;
  decision_ = "deny";
  reason_ = refusal->Line();
  Respond(403, refusal->Line());
  return true;
}

void Connection::StartInterception() {
  phase_ = Phase::kPipe;
  last_activity_ = std::chrono::steady_clock::now();
  ArmTimer(cell_->cfg.idle_timeout);
  auto self = shared_from_this();
  InterceptHooks hooks;
  hooks.bytes = [self](bool up, uint64_t n) {
    (up ? self->bytes_up_ : self->bytes_down_) += n;
    (up ? self->cell_->counters.bytes_up : self->cell_->counters.bytes_down) += n;
  };
  hooks.activity = [self] { self->last_activity_ = std::chrono::steady_clock::now(); };
  hooks.note = [self](const std::string& text) { self->Note(text); };
  hooks.refusal = [self](const std::string& line) { self->TellRefusal(line); };
  hooks.done = [self](const std::string& why) {
    if (!why.empty()) self->Note(why);
    self->Finish();
  };
  std::string already = std::move(in_);
  in_.clear();
  interception_ = std::make_shared<Interception>(*cell_->shared.interception, cell_->cfg,
                                                 request_.target.host, request_.port(), client_,
                                                 std::move(already), upstream_, std::move(hooks));
  interception_->Start();
}

// Plain-HTTP body bytes about to go upstream: a placeholder in them (or straddling the
// previous read) is refused. True when the connection was cut.
bool Connection::ScanBody(size_t n) {
  up_tail_.append(up_buf_.get(), n);
  if (RefusePlaceholder(up_tail_)) return true;
  size_t keep = LongestPlaceholder(cell_->cfg.secrets);
  if (up_tail_.size() > keep) up_tail_.erase(0, up_tail_.size() - keep);
  return false;
}

}  // namespace mcpcell::egress
