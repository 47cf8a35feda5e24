// ServeAudit's recovery after a crash (serve_audit.h), at Open: an earlier server on this
// trail that ended without `server.stop` (kill -9, a power cut) gets a `recovered` record
// naming it and its last record, and the sessions it left open get their `session.end`
// ("recovered after a crash"). A torn or non-verifying tail is the trail's own recovery
// (audit/trail.h), written before this. Apart from serve_audit.cc to keep that file's size.
#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "audit/record.h"
#include "audit/trail_files.h"
#include "mcp/log.h"
#include "serve/serve_audit.h"

namespace mcpcell::serve {
namespace {

// What one record says about servers and sessions; nothing else of it is kept.
struct Entry {
  std::string type, server, session, tenant, hash, stopped_server;
  uint64_t seq = 0;
  int64_t pid = 0;
  nlohmann::json usage;  // of a `usage` record
};

std::vector<Entry> ReadEntries(const std::string& path) {
  std::vector<Entry> out;
  std::ifstream in(path, std::ios::binary);
  for (std::string line; std::getline(in, line);) {
    auto r = audit::ParseRecordLine(line);
    if (!r) continue;  // a damaged line: the trail's own `recovered` names it
    Entry e;
    e.type = audit::StringField(*r, "type");
    e.server = audit::StringField(*r, "server");
    e.session = audit::StringField(*r, "session");
    e.tenant = audit::StringField(*r, "tenant");
    e.hash = audit::StringField(*r, "hash");
    e.stopped_server = audit::StringField(*r, "stopped_server");
    e.seq = audit::UintField(*r, "seq");
    if (e.type == "server.start" && r->contains("pid") && (*r)["pid"].is_number_integer())
      e.pid = (*r)["pid"].get<int64_t>();
    if (e.type == "usage" && r->contains("usage")) e.usage = (*r)["usage"];
    out.push_back(std::move(e));
  }
  return out;
}

// One earlier server run as its records tell it.
struct ServerRun {
  bool started = false;
  bool stopped = false;  // server.stop, or a `recovered` record names it
  int64_t pid = 0;
  uint64_t last_seq = 0;
  std::string last_hash;
};

struct Unended {
  std::string tenant;
  nlohmann::json usage;  // its last usage record's figures
};

// The trail read forward: each server's run, and each (server, session) still open.
struct TrailState {
  std::map<std::string, ServerRun> servers;
  std::map<std::pair<std::string, std::string>, Unended> open;

  void Add(const Entry& e) {
    if (e.type == "recovered" && !e.stopped_server.empty())
      servers[e.stopped_server].stopped = true;
    const std::pair<std::string, std::string> key{e.server, e.session};
    if (e.type == "session.start") {
      open[key] = {e.tenant, nullptr};
    } else if (e.type == "session.end") {
      open.erase(key);
    } else if (e.type == "usage" && open.count(key)) {
      open[key].usage = e.usage;
    }
    if (e.server.empty()) return;
    ServerRun& run = servers[e.server];
    if (run.stopped) return;  // records written for it after its end (its sessions' ends)
    run.last_seq = e.seq;
    run.last_hash = e.hash;
    if (e.type == "server.start") {
      run.started = true;
      run.pid = e.pid;
    }
    if (e.type == "server.stop") run.stopped = true;
  }
};

}  // namespace

// The files are read from the newest back, only as far as needed: until every server seen
// without an end (server.stop or a `recovered` naming it) and not running has its
// server.start, so its sessions' starts are in what was read. A trail of many rotated files
// is thus not read whole at each start. Sessions of servers still running on this trail
// (their lock in <audit dir>/servers held) are theirs to end.
void ServeAudit::EndCrashedSessions() {
  const std::string dir = audit::AuditDir(options_.state_dir);
  auto files = audit::ListTrailFiles(dir);
  if (!files) {
    mcp::log::Warn("audit: crashed servers not looked for: " + files.error().message);
    return;
  }
  std::map<std::string, bool> alive;  // by server id
  auto is_alive = [&](const std::string& server) {
    if (server == server_id_) return true;
    auto it = alive.find(server);
    if (it == alive.end()) it = alive.emplace(server, ServerAlive(dir, server)).first;
    return it->second;
  };
  std::vector<std::vector<Entry>> read;  // newest file first
  std::set<std::string> ended, started, seen;
  for (auto f = files->rbegin(); f != files->rend(); ++f) {
    read.push_back(ReadEntries(f->path));
    for (const Entry& e : read.back()) {
      if (!e.server.empty()) seen.insert(e.server);
      if (e.type == "server.start") started.insert(e.server);
      if (e.type == "server.stop") ended.insert(e.server);
      if (e.type == "recovered" && !e.stopped_server.empty()) ended.insert(e.stopped_server);
    }
    bool more = false;
    for (const std::string& s : seen)
      more = more || (!ended.count(s) && !started.count(s) && !is_alive(s));
    if (!more) break;
  }
  TrailState state;
  for (auto file = read.rbegin(); file != read.rend(); ++file)
    for (const Entry& e : *file) state.Add(e);
  // Each crashed server's `recovered`, then its open sessions' ends, oldest server first.
  std::vector<std::pair<uint64_t, std::string>> crashed;
  for (const auto& [server, run] : state.servers)
    if (!run.stopped && !is_alive(server)) crashed.emplace_back(run.last_seq, server);
  std::sort(crashed.begin(), crashed.end());
  for (const auto& [last_seq, server] : crashed) {
    const ServerRun& run = state.servers[server];
    Append(
        "recovered", "", "", "",
        {{"reason", "server " + server + (run.pid ? " (pid " + std::to_string(run.pid) + ")" : "") +
                        " stopped without server.stop"},
         {"stopped_server", server},
         {"after_seq", run.last_seq},
         {"after_hash", run.last_hash}});
  }
  for (const auto& [key, o] : state.open) {
    if (is_alive(key.first)) continue;
    nlohmann::json fields = {{"reason", "recovered after a crash"}};
    if (!o.usage.is_null()) fields["usage"] = o.usage;
    if (Status st = trail_->AppendFor(key.first, "session.end", o.tenant, key.second, "", fields);
        !st)
      mcp::log::Warn("audit: session.end not recorded: " + st.error().message);
  }
}

}  // namespace mcpcell::serve
