// ElasticTaskQueue: the thread pool cpp-httplib serves connections on, grown on demand.
//
// cpp-httplib runs one connection per task until the connection closes, and an open SSE
// stream (every MCP client keeps a GET stream, and each call in flight has its POST
// stream) is a connection that stays open. A fixed pool of N threads therefore stalls every
// session once N streams are open: connection N+1 waits in the queue, unanswered, until a
// stream ends. This pool starts `min_threads` threads, adds one whenever a task arrives and
// no thread is idle (up to `max_threads`), and lets a thread above the minimum exit after
// `idle_exit` without work. Beyond `max_threads`, tasks wait in the queue (each holds one
// accepted socket; the process's fd limit bounds them).
//
// Private to mcp/http_server.cc (includes httplib.h). Threading: enqueue from the listener
// thread; shutdown once, from the thread that stops the server; it waits for every worker.
#pragma once

#include <httplib.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace mcp {

class ElasticTaskQueue : public httplib::TaskQueue {
 public:
  ElasticTaskQueue(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_exit);
  ~ElasticTaskQueue() override;  // shutdown()

  void enqueue(std::function<void()> fn) override;
  // Runs what is queued, then ends every thread and waits for them.
  void shutdown() override;

  size_t threads() const;

 private:
  // Shared with the (detached) workers, so a worker that has just announced its exit may
  // still unlock the mutex after shutdown() returned and the queue is gone.
  struct State {
    size_t min_threads = 0;
    size_t max_threads = 0;
    std::chrono::milliseconds idle_exit{0};
    std::mutex mu;
    std::condition_variable work;
    std::condition_variable all_exited;
    std::deque<std::function<void()>> jobs;
    size_t threads = 0;
    size_t idle = 0;
    bool shutdown = false;
  };
  static void SpawnLocked(const std::shared_ptr<State>& s);
  static void Work(const std::shared_ptr<State>& s);

  std::shared_ptr<State> s_;
};

}  // namespace mcp
