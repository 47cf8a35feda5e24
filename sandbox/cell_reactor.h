// CellReactor: the I/O context on which cells' asynchronous requests run (issue 29: no
// thread waits on a cell).
//
// One boost::asio::io_context run by a fixed number of threads (1-2 are plenty: a handler
// only reads what is ready and never blocks), made by whoever makes cells and passed to
// them (CellCreateOptions::reactor, or CellChannel::ExecAsync's io_context). An exec's
// event socket, its output pipes, its stdin and its clock (timeout, kill grace, drain) are
// waited on here, so a program that runs for an hour holds no thread, only a few fds.
//
// Every cell's control socket is waited on here too (CellChannel::Options::io, or the
// process's Default() reactor), so the server's thread count does not grow with cells.
//
// Threading: the threads start in the constructor and stay until the destructor, which
// stops the context and joins them; the number never changes with load. Every cell that
// uses the reactor must be destroyed before it (a cell's destruction completes its execs'
// callbacks by posting them here). Handlers of one exec are serialised by that exec's own
// lock, so two threads never run one exec's steps at once.
#pragma once

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <thread>
#include <vector>

namespace mcpcell::sandbox {

class CellReactor {
 public:
  // `threads` >= 1 (0 is taken as 1).
  explicit CellReactor(int threads = 1);
  ~CellReactor();  // stops the context and joins the threads
  CellReactor(const CellReactor&) = delete;
  CellReactor& operator=(const CellReactor&) = delete;

  // The process's reactor for cells and channels given none (CellChannel::Options::io):
  // one thread, started on first use and never stopped (the object is never destroyed, so
  // a cell held until the process exits is never outlived by it).
  static CellReactor& Default();

  boost::asio::io_context& context() { return io_; }
  int thread_count() const { return static_cast<int>(threads_.size()); }
  // True on one of this reactor's threads (callers that must not block it can check).
  bool on_reactor_thread() const;

 private:
  boost::asio::io_context io_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
};

}  // namespace mcpcell::sandbox
