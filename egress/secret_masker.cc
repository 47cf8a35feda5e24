#include "egress/secret_masker.h"

#include <algorithm>

#include "egress/base64.h"

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

std::string SecretMasker::Mask(std::string_view data, bool final, size_t* held) const {
  std::string out;
  size_t pos = 0;
  for (;;) {
    size_t best = std::string_view::npos;
    const Needle* hit = nullptr;
    for (const Needle& n : needles_) {
      size_t at = data.find(n.from, pos);
      if (at < best) {
        best = at;
        hit = &n;
      }
    }
    if (!hit) break;
    out.append(data.substr(pos, best - pos));
    out += hit->to;
    pos = best + hit->from.size();
  }
  // Every needle starting before `safe` would have fitted and been found above.
  size_t safe = data.size();
  if (!final && longest_ > 0) safe = data.size() >= longest_ - 1 ? data.size() - (longest_ - 1) : 0;
  safe = std::max(safe, pos);
  out.append(data.substr(pos, safe - pos));
  *held = data.size() - safe;
  return out;
}

std::string SecretMasker::Feed(std::string_view data) {
  if (needles_.empty()) return std::string(data);
  carry_.append(data);
  size_t held = 0;
  std::string out = Mask(carry_, false, &held);
  carry_.erase(0, carry_.size() - held);
  return out;
}

std::string SecretMasker::Finish() {
  size_t held = 0;
  std::string out = Mask(carry_, true, &held);
  carry_.clear();
  return out;
}

std::string SecretMasker::MaskAll(std::string_view data) const {
  size_t held = 0;
  return Mask(data, true, &held);
}

}  // namespace mcpcell::egress
