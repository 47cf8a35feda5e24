#include "tools/process_table.h"

#include <string.h>

#include <algorithm>
#include <map>

namespace mcpcell::tools {

std::string ProcessTable::NextId(const std::string& key) {
  std::lock_guard lock(mu_);
  return "p" + std::to_string(sessions_[key].next_id++);
}

void ProcessTable::Add(const std::string& key, std::weak_ptr<sandbox::CellSession> session,
                       std::shared_ptr<BackgroundProcess> process) {
  std::lock_guard lock(mu_);
  SessionProcesses& s = sessions_[key];
  s.session = std::move(session);
  s.processes.push_back(std::move(process));
}

size_t ProcessTable::Running(const std::string& key) {
  std::vector<std::shared_ptr<BackgroundProcess>> all = List(key);
  size_t running = 0;
  for (const auto& p : all) {
    auto r = p->exec->Poll(std::chrono::milliseconds(0));
    if (r.ok() && !r->has_value()) ++running;
  }
  return running;
}

std::shared_ptr<BackgroundProcess> ProcessTable::Find(const std::string& key,
                                                      const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return nullptr;
  for (const auto& p : it->second.processes)
    if (p->id == id) return p;
  return nullptr;
}

std::vector<std::shared_ptr<BackgroundProcess>> ProcessTable::List(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return {};
  return it->second.processes;
}

void ProcessTable::Remove(const std::string& key, const std::string& id) {
  std::lock_guard lock(mu_);
  auto it = sessions_.find(key);
  if (it == sessions_.end()) return;
  std::erase_if(it->second.processes, [&](const auto& p) { return p->id == id; });
}

uint64_t ProcessTable::Cursor(const BackgroundProcess& p) {
  std::lock_guard lock(mu_);
  return p.read_cursor;
}

void ProcessTable::SetCursor(BackgroundProcess& p, uint64_t cursor) {
  std::lock_guard lock(mu_);
  p.read_cursor = std::max(p.read_cursor, cursor);
}

std::shared_ptr<PythonInterpreter> ProcessTable::Interpreter(const std::string& key) {
  std::lock_guard lock(mu_);
  auto& slot = sessions_[key].python;
  if (!slot) slot = std::make_shared<PythonInterpreter>();
  return slot;
}

ProcessState ProcessTable::Inspect(BackgroundProcess& p, const std::string& cell_id,
                                   std::chrono::milliseconds wait, const std::stop_token& stop) {
  ProcessState s = InspectProcess(p, cell_id, wait, stop);
  if (s.state != "running") ReportEnd(p, s);
  return s;
}

void ProcessTable::ReportEnd(BackgroundProcess& p, const ProcessState& s) {
  {
    std::lock_guard lock(mu_);
    if (p.end_reported) return;
    p.end_reported = true;
  }
  if (on_end_) on_end_(p, s);
}

void ProcessTable::ReportDropped(std::vector<std::shared_ptr<BackgroundProcess>>& dropped,
                                 const std::string& why) {
  for (auto& p : dropped) {
    // Its own cell: an exit init reported before the end is the real one; else it ends
    // now with the cell.
    ProcessState s = InspectProcess(*p, p->cell_id);
    if (s.state == "running") {
      s.state = "stopped";
      s.detail = "stopped: " + why + " (the cell and its processes end with the session)";
    }
    ReportEnd(*p, s);
  }
}

void ProcessTable::EndSession(const std::string& key, const std::string& why) {
  std::vector<std::shared_ptr<BackgroundProcess>> dropped;
  std::shared_ptr<PythonInterpreter> python;  // released outside mu_
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(key);
    if (it == sessions_.end()) return;
    dropped = std::move(it->second.processes);
    python = std::move(it->second.python);
    sessions_.erase(it);
  }
  ReportDropped(dropped, why);
}

void ProcessTable::EndAll(const std::string& why) {
  std::vector<std::string> keys;
  {
    std::lock_guard lock(mu_);
    for (const auto& [key, s] : sessions_) keys.push_back(key);
  }
  for (const std::string& key : keys) EndSession(key, why);
}

size_t ProcessTable::sessions() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

void ProcessTable::Prune() {
  std::vector<std::shared_ptr<BackgroundProcess>> dropped;  // reported outside mu_
  std::unique_lock lock(mu_);
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    // A session with only an interpreter slot and no process yet has no CellSession here.
    if (it->second.processes.empty()) {
      ++it;
      continue;
    }
    std::shared_ptr<sandbox::CellSession> session = it->second.session.lock();
    if (!session || session->closed()) {
      for (auto& p : it->second.processes) dropped.push_back(std::move(p));
      it = sessions_.erase(it);
      continue;
    }
    // Ended processes beyond the cap, oldest first; running ones always stay.
    auto& list = it->second.processes;
    size_t ended = 0;
    for (const auto& p : list) {
      auto r = p->exec->Poll(std::chrono::milliseconds(0));
      if (!r.ok() || r->has_value()) ++ended;
    }
    for (auto p = list.begin(); p != list.end() && ended > kMaxEndedProcesses;) {
      auto r = (*p)->exec->Poll(std::chrono::milliseconds(0));
      if (r.ok() && !r->has_value()) {
        ++p;
        continue;
      }
      dropped.push_back(std::move(*p));  // its end is reported below, if not yet
      p = list.erase(p);
      --ended;
    }
    ++it;
  }
  lock.unlock();
  ReportDropped(dropped, "the session ended");
}

ProcessState InspectProcess(BackgroundProcess& p, const std::string& cell_id,
                            std::chrono::milliseconds wait, const std::stop_token& stop) {
  ProcessState s;
  if (p.cell_id != cell_id) {
    s.state = "stopped";
    s.detail =
        "stopped: the cell it ran in ended (the session's cell was hibernated, restored from "
        "a snapshot or replaced); its output up to then is in " +
        p.output_path + " when the workspace was kept";
    return s;
  }
  auto r = p.exec->Poll(wait, stop);
  if (!r.ok()) {
    s.state = "stopped";
    s.detail = "stopped: " + r.error().message;
    return s;
  }
  if (!r->has_value()) {
    s.state = "running";
    s.detail = "running (pid " + std::to_string(p.exec->pid()) + " in the cell)";
    return s;
  }
  const sandbox::ExecResult& e = **r;
  s.cpu_ms = static_cast<uint64_t>((e.user_cpu + e.system_cpu).count() / 1000);
  s.peak_memory_bytes = e.peak_memory_bytes;
  if (e.signaled) {
    const char* abbrev = sigabbrev_np(e.signo);
    s.state = "killed";
    s.signal = abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(e.signo);
    s.detail = "killed by " + s.signal;
  } else {
    s.state = "exited";
    s.exit_code = e.exit_code;
    s.detail = "exited with code " + std::to_string(e.exit_code);
  }
  return s;
}

}  // namespace mcpcell::tools
