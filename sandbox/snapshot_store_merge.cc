// A cell that runs over snapshot P has P's layers as overlay lowers and its own uppers. Its
// snapshot is P's entries with the uppers applied as overlayfs would show them: an upper
// entry replaces P's entry at its path (and, unless both are dirs, everything under it); an
// opaque upper dir hides everything of P under it; a whiteout hides P's path and is kept
// (it may hide something of the template below P too).
#include <algorithm>
#include <map>

#include "sandbox/snapshot_store_internal.h"

namespace mcpcell::sandbox::snapshot {
namespace {

using Type = SnapshotEntry::Type;

void EraseUnder(std::map<std::string, SnapshotEntry>& entries, const std::string& path) {
  // Every path below `path` sorts after path + "/" and before path + "0" ('/' + 1).
  const std::string from = path.empty() ? "" : path + "/";
  auto it = entries.lower_bound(from);
  while (it != entries.end() && (from.empty() || it->first.compare(0, from.size(), from) == 0)) {
    if (it->first.empty()) {  // the layer's top stays
      ++it;
      continue;
    }
    it = entries.erase(it);
  }
}

SnapshotLayer MergeLayer(const SnapshotLayer& lower, const SnapshotLayer& upper) {
  std::map<std::string, SnapshotEntry> merged;
  for (const SnapshotEntry& e : lower.entries) merged[e.path] = e;
  for (const SnapshotEntry& e : upper.entries) {
    auto old = merged.find(e.path);
    bool both_dirs = old != merged.end() && old->second.type == Type::kDir && e.type == Type::kDir;
    if (!both_dirs || e.opaque) EraseUnder(merged, e.path);
    merged[e.path] = e;
  }
  // Sorted by path, a dir comes before everything under it, as CheckLayers wants.
  SnapshotLayer out;
  out.name = upper.name;
  for (auto& [path, e] : merged) out.entries.push_back(std::move(e));
  return out;
}

}  // namespace

std::vector<SnapshotLayer> MergeOnto(const std::vector<SnapshotLayer>& parent,
                                     std::vector<SnapshotLayer> upper) {
  std::vector<SnapshotLayer> out;
  for (const SnapshotLayer& p : parent) {
    auto it = std::find_if(upper.begin(), upper.end(),
                           [&](const SnapshotLayer& u) { return u.name == p.name; });
    out.push_back(it == upper.end() ? p : MergeLayer(p, *it));
  }
  for (SnapshotLayer& u : upper) {
    bool in_parent = std::any_of(parent.begin(), parent.end(),
                                 [&](const SnapshotLayer& p) { return p.name == u.name; });
    if (!in_parent) out.push_back(std::move(u));
  }
  return out;
}

}  // namespace mcpcell::sandbox::snapshot
