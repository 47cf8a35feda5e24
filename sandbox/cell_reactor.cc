// CellReactor: a fixed set of threads running one io_context. See cell_reactor.h.
#include "sandbox/cell_reactor.h"

#include <algorithm>

namespace mcpcell::sandbox {

// The work guard keeps run() from returning while no exec is in flight; the context's
// concurrency hint says how many threads run it, so Asio's scheduler locks accordingly.
CellReactor::CellReactor(int threads) : io_(std::max(1, threads)), work_(io_.get_executor()) {
  const int n = std::max(1, threads);
  threads_.reserve(n);
  for (int i = 0; i < n; ++i) threads_.emplace_back([this] { io_.run(); });
}

CellReactor::~CellReactor() {
  work_.reset();
  io_.stop();
  for (std::thread& t : threads_) t.join();
}

CellReactor& CellReactor::Default() {
  static CellReactor* const reactor = new CellReactor(1);  // never destroyed: see the header
  return *reactor;
}

bool CellReactor::on_reactor_thread() const {
  const std::thread::id self = std::this_thread::get_id();
  return std::any_of(threads_.begin(), threads_.end(),
                     [&](const std::thread& t) { return t.get_id() == self; });
}

}  // namespace mcpcell::sandbox
