#include "sandbox/linux/self_exe.h"

#include <limits.h>
#include <unistd.h>

namespace mcpcell::sandbox {

Result<std::string> SiblingOf(std::string_view self_exe, std::string_view name) {
  constexpr std::string_view kDeleted = " (deleted)";
  if (self_exe.empty() || self_exe.front() != '/') {
    return Error::Msg("the running executable's path is not absolute: \"" + std::string(self_exe) +
                      "\"");
  }
  if (self_exe.size() > kDeleted.size() &&
      self_exe.substr(self_exe.size() - kDeleted.size()) == kDeleted) {
    return Error::Msg("the running executable " + std::string(self_exe) +
                      " was removed or replaced since it started (an upgrade?); restart it so "
                      "it and " +
                      std::string(name) + " are of the same version");
  }
  if (name.empty() || name.find('/') != std::string_view::npos) {
    return Error::Msg("not an executable name: \"" + std::string(name) + "\"");
  }
  std::string path(self_exe.substr(0, self_exe.rfind('/') + 1));
  path += name;
  return path;
}

Result<std::string> SiblingExecutable(std::string_view name) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf);
  if (n < 0) return Error::Sys("readlink(\"/proc/self/exe\")");
  if (static_cast<size_t>(n) >= sizeof buf) {
    return Error::Msg("readlink(\"/proc/self/exe\"): the path does not fit in PATH_MAX");
  }
  return SiblingOf(std::string_view(buf, static_cast<size_t>(n)), name);
}

}  // namespace mcpcell::sandbox
