// ElasticTaskQueue (http_task_queue.h).
#include "mcp/http_task_queue.h"

#include <algorithm>
#include <thread>

namespace mcp {

ElasticTaskQueue::ElasticTaskQueue(size_t min_threads, size_t max_threads,
                                   std::chrono::milliseconds idle_exit)
    : s_(std::make_shared<State>()) {
  s_->min_threads = min_threads;
  s_->max_threads = std::max({max_threads, min_threads, size_t{1}});
  s_->idle_exit = idle_exit;
  std::lock_guard lock(s_->mu);
  for (size_t i = 0; i < min_threads; ++i) SpawnLocked(s_);
}

ElasticTaskQueue::~ElasticTaskQueue() { shutdown(); }

void ElasticTaskQueue::SpawnLocked(const std::shared_ptr<State>& s) {
  ++s->threads;
  // Detached: a thread that exits when idle cannot be joined by anyone in particular;
  // shutdown() waits on all_exited instead.
  std::thread([s] { Work(s); }).detach();
}

void ElasticTaskQueue::enqueue(std::function<void()> fn) {
  std::lock_guard lock(s_->mu);
  s_->jobs.push_back(std::move(fn));
  // Every queued job needs an idle thread; make one when there are fewer idle threads than
  // jobs (several enqueues can arrive before any idle thread wakes up).
  if (s_->jobs.size() > s_->idle && s_->threads < s_->max_threads) SpawnLocked(s_);
  s_->work.notify_one();
}

void ElasticTaskQueue::Work(const std::shared_ptr<State>& s) {
  std::unique_lock lock(s->mu);
  for (;;) {
    ++s->idle;
    bool woke =
        s->work.wait_for(lock, s->idle_exit, [&s] { return s->shutdown || !s->jobs.empty(); });
    --s->idle;
    if (!s->jobs.empty()) {
      std::function<void()> job = std::move(s->jobs.front());
      s->jobs.pop_front();
      lock.unlock();
      job();
      job = nullptr;  // the connection's state goes before the lock is taken again
      lock.lock();
      continue;
    }
    if (s->shutdown || (!woke && s->threads > s->min_threads)) break;
  }
  if (--s->threads == 0) s->all_exited.notify_all();
}

void ElasticTaskQueue::shutdown() {
  std::unique_lock lock(s_->mu);
  s_->shutdown = true;
  s_->work.notify_all();
  s_->all_exited.wait(lock, [this] { return s_->threads == 0; });
}

size_t ElasticTaskQueue::threads() const {
  std::lock_guard lock(s_->mu);
  return s_->threads;
}

}  // namespace mcp
