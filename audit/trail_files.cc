#include "audit/trail_files.h"

#include <dirent.h>

#include <algorithm>
#include <cctype>

#include "audit/record.h"

namespace mcpcell::audit {

std::string AuditDir(const std::string& state_dir) { return state_dir + "/audit"; }

std::string RotatedFileName(uint64_t first_seq, std::chrono::system_clock::time_point first_time) {
  return "audit-" + std::to_string(first_seq) + "-" + FormatCompactTime(first_time) + ".jsonl";
}

namespace {
// first seq of "audit-<seq>-<time>.jsonl", or 0 if the name is not a rotated file's.
uint64_t RotatedFirstSeq(const std::string& name) {
  const std::string prefix = "audit-", suffix = ".jsonl";
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0)
    return 0;
  uint64_t seq = 0;
  size_t i = prefix.size();
  for (; i < name.size() && std::isdigit(static_cast<unsigned char>(name[i])); ++i)
    seq = seq * 10 + static_cast<uint64_t>(name[i] - '0');
  if (i == prefix.size() || i >= name.size() || name[i] != '-') return 0;
  return seq;
}
}  // namespace

Result<std::vector<TrailFile>> ListTrailFiles(const std::string& dir) {
  DIR* d = opendir(dir.c_str());
  if (!d) return Error::Sys("opendir(\"" + dir + "\")");
  std::vector<TrailFile> files;
  bool have_current = false;
  while (dirent* e = readdir(d)) {
    std::string name = e->d_name;
    if (name == kCurrentFileName) {
      have_current = true;
    } else if (uint64_t seq = RotatedFirstSeq(name); seq != 0) {
      files.push_back({name, dir + "/" + name, seq, false});
    }
  }
  closedir(d);
  std::sort(files.begin(), files.end(),
            [](const TrailFile& a, const TrailFile& b) { return a.first_seq < b.first_seq; });
  if (have_current) files.push_back({kCurrentFileName, dir + "/" + kCurrentFileName, 0, true});
  return files;
}

}  // namespace mcpcell::audit
