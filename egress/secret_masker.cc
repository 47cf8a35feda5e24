#include "egress/secret_masker.h"

#include <algorithm>

#include "base/base64.h"

namespace mcpcell::egress {

SecretMasker::SecretMasker(const std::vector<SecretMask>& masks) {
  for (const SecretMask& m : masks) {
    if (m.value.empty()) continue;
    needles_.push_back({m.value, m.placeholder});
    needles_.push_back({Base64Encode(m.value), Base64Encode(m.placeholder)});
  }
  // At one position the longest needle wins (a value that is a prefix of another's).
  std::sort(needles_.begin(), needles_.end(),
            [](const Needle& a, const Needle& b) { return a.from.size() > b.from.size(); });
  for (const Needle& n : needles_) longest_ = std::max(longest_, n.from.size());
}

bool SecretMasker::CouldGrow(std::string_view data, size_t at, size_t length) const {
  std::string_view rest = data.substr(at);
  for (const Needle& n : needles_)
    if (n.from.size() > length && n.from.size() > rest.size() && n.from.starts_with(rest))
      return true;
  return false;
}

size_t SecretMasker::Scan(std::string_view data, size_t pos, size_t limit, bool final,
                          std::string* out) const {
  for (;;) {
    size_t best = std::string_view::npos;
    const Needle* hit = nullptr;
    for (const Needle& n : needles_) {
      size_t at = data.find(n.from, pos);
      if (at < best && at < limit) {
        best = at;
        hit = &n;
      }
    }
    if (!hit || (!final && CouldGrow(data, best, hit->from.size()))) return pos;
    out->append(data.substr(pos, best - pos));
    out->append(hit->to);
    pos = best + hit->from.size();
  }
}

void SecretMasker::Mask(std::string_view data, size_t pos, bool final, size_t* held,
                        std::string* out) const {
  pos = Scan(data, pos, std::string_view::npos, final, out);
  // Every needle starting before `safe` would have fitted and been found above.
  size_t safe = data.size();
  if (!final && longest_ > 0) safe = data.size() >= longest_ - 1 ? data.size() - (longest_ - 1) : 0;
  safe = std::max(safe, pos);
  out->append(data.substr(pos, safe - pos));
  *held = data.size() - safe;
}

void SecretMasker::Feed(std::string_view data, std::string* out) {
  if (needles_.empty()) {
    out->append(data);
    return;
  }
  size_t held = 0;
  if (data.size() < longest_) {  // short piece: join it to the held bytes
    carry_.append(data);
    Mask(carry_, 0, false, &held, out);
    carry_.erase(0, carry_.size() - held);
    return;
  }
  // A needle that starts in the held bytes ends within the first longest_ - 1 bytes of data:
  // mask that small window, then the piece where the window left off, without copying it.
  size_t skip = 0;
  if (!carry_.empty()) {
    size_t c = carry_.size();
    carry_.append(data.substr(0, longest_ - 1));
    size_t pos = Scan(carry_, 0, c, false, out);
    if (pos < c) out->append(carry_, pos, c - pos);
    skip = std::max(pos, c) - c;
  }
  Mask(data, skip, false, &held, out);
  carry_.assign(data.substr(data.size() - held));
}

std::string SecretMasker::Feed(std::string_view data) {
  std::string out;
  Feed(data, &out);
  return out;
}

void SecretMasker::Finish(std::string* out) {
  size_t held = 0;
  Mask(carry_, 0, true, &held, out);
  carry_.clear();
}

std::string SecretMasker::Finish() {
  std::string out;
  Finish(&out);
  return out;
}

std::string SecretMasker::MaskAll(std::string_view data) const {
  size_t held = 0;
  std::string out;
  Mask(data, 0, true, &held, &out);
  return out;
}

}  // namespace mcpcell::egress
