#include "tools/output_capture.h"

#include "base/utf8.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

void OutputCapture::Append(std::string_view chunk) {
  total_ += chunk.size();
  if (head_.size() < head_cap_) {
    size_t take = std::min(chunk.size(), head_cap_ - head_.size());
    head_.append(chunk.substr(0, take));
    chunk.remove_prefix(take);
  }
  if (chunk.empty() || tail_cap_ == 0) return;
  if (tail_.size() < tail_cap_) tail_.resize(tail_cap_);
  if (chunk.size() >= tail_cap_) {  // the chunk alone fills the ring
    chunk = chunk.substr(chunk.size() - tail_cap_);
    tail_.assign(chunk);
    tail_pos_ = 0;
    tail_full_ = true;
    return;
  }
  for (char c : chunk) {
    tail_[tail_pos_++] = c;
    if (tail_pos_ == tail_cap_) {
      tail_pos_ = 0;
      tail_full_ = true;
    }
  }
}

std::string OutputCapture::Tail() const {
  if (!tail_full_) return tail_.substr(0, tail_pos_);
  return tail_.substr(tail_pos_) + tail_.substr(0, tail_pos_);
}

std::string OutputCapture::Render(const std::string& saved_path, uint64_t saved_bytes) const {
  std::string tail = Tail();
  if (!truncated()) return ToValidUtf8(head_ + tail);
  uint64_t omitted = total_ - head_.size() - tail.size();
  std::string marker = "\n[... " + std::to_string(omitted) + " bytes omitted";
  if (!saved_path.empty() && saved_bytes > 0 && saved_bytes < total_) {
    marker += "; the first " + std::to_string(saved_bytes) + " of " + std::to_string(total_) +
              " bytes are in " + saved_path +
              " (use read_file; the rest was not kept: the saved copy is capped)";
  } else if (!saved_path.empty()) {
    marker += "; the full output is in " + saved_path + " (use read_file)";
  }
  marker += " ...]\n";
  return ToValidUtf8(head_) + marker + ToValidUtf8(tail);
}

}  // namespace mcpcell::tools
