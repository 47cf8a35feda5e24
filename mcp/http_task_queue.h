// ElasticTaskQueue: the pool the HTTP server runs its request handlers on, grown on demand.
//
// A handler may block for a while (initialize waits for the session's answer; DELETE and
// the application's routes call into the application), so handlers do not run on the I/O
// threads. Streams are not tasks here: an open SSE stream holds no thread. The pool starts
// `min_threads` threads, adds one whenever a task arrives and no thread is idle (up to
// `max_threads`), and lets a thread above the minimum exit after `idle_exit` without work.
// Beyond `max_threads`, tasks wait in the queue.
//
// Private to mcp/http_*. Threading: enqueue from any thread; shutdown from the thread that
// ends the server; it waits for every worker. A task enqueued after shutdown still runs.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

namespace mcp {

class ElasticTaskQueue {
 public:
  ElasticTaskQueue(size_t min_threads, size_t max_threads, std::chrono::milliseconds idle_exit);
  ~ElasticTaskQueue();  // shutdown()

  void enqueue(std::function<void()> fn);
  // Runs what is queued, then ends every thread and waits for them.
  void shutdown();

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
