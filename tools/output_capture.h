// OutputCapture: what a tool result keeps of one output stream of a program: the first
// and the last `keep_bytes / 2` bytes, and the total count. Memory stays bounded however
// much the program writes (a 200 MB flood costs keep_bytes).
//
// Threading: used by the one thread that runs the exec.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace mcpcell::tools {

class OutputCapture {
 public:
  explicit OutputCapture(size_t keep_bytes)
      : head_cap_(keep_bytes - keep_bytes / 2), tail_cap_(keep_bytes / 2) {}
  void Append(std::string_view chunk);
  uint64_t total() const { return total_; }
  bool truncated() const { return total_ > head_.size() + tail_size(); }
  // Head, a marker naming how much was left out (and where the rest is, if saved), tail.
  // `saved_bytes`: how much of the output the saved copy holds when it was capped below
  // total() (0: all of it). Valid UTF-8 (invalid bytes become U+FFFD).
  std::string Render(const std::string& saved_path, uint64_t saved_bytes = 0) const;

 private:
  size_t tail_size() const { return tail_full_ ? tail_cap_ : tail_pos_; }
  std::string Tail() const;

  size_t head_cap_, tail_cap_;
  std::string head_;
  std::string tail_;  // ring buffer of tail_cap_ bytes once full
  size_t tail_pos_ = 0;
  bool tail_full_ = false;
  uint64_t total_ = 0;
};

}  // namespace mcpcell::tools
