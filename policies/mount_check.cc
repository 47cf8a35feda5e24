// The dangerous-mount rules (see mount_check.h).
#include "policies/mount_check.h"

#include <pwd.h>
#include <sys/stat.h>

#include <climits>
#include <cstdlib>
#include <set>
#include <vector>

namespace mcpcell::policies {
namespace {

bool IsUnder(const std::string& path, const std::string& dir) {
  if (dir == "/") return true;
  return path == dir || (path.size() > dir.size() && path.compare(0, dir.size(), dir) == 0 &&
                         path[dir.size()] == '/');
}

// "/a//b/./c/" -> "/a/b/c"; ".." components make it invalid (empty result).
std::string Lexical(const std::string& path) {
  std::vector<std::string> parts;
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string::npos) j = path.size();
    std::string part = path.substr(i, j - i);
    if (part == "..") return "";
    if (!part.empty() && part != ".") parts.push_back(part);
    i = j + 1;
  }
  std::string out;
  for (const auto& p : parts) out += "/" + p;
  return out.empty() ? "/" : out;
}

std::string Resolve(const std::string& path) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) return "";
  return buf;
}

const std::vector<std::string>& RuntimeSockets() {
  static const std::vector<std::string> kSockets = {
      "/run/docker.sock",     "/var/run/docker.sock", "/run/containerd",     "/var/run/containerd",
      "/run/podman",          "/var/run/podman",      "/run/crio",           "/var/run/crio",
      "/run/dockershim.sock", "/var/lib/docker",      "/var/lib/containerd", "/var/lib/containers",
  };
  return kSockets;
}

bool IsRuntimeSocketName(const std::string& path) {
  std::string base = path.substr(path.rfind('/') + 1);
  for (const char* name : {"docker.sock", "containerd.sock", "podman.sock", "crio.sock",
                           "cri-dockerd.sock", "dockershim.sock"}) {
    if (base == name) return true;
  }
  return false;
}

// Home directories: $HOME, and those of human users (uid >= 1000) and root.
std::set<std::string> HomeDirs() {
  std::set<std::string> homes;
  if (const char* h = std::getenv("HOME"); h && *h == '/') homes.insert(Lexical(h));
  ::setpwent();
  while (struct passwd* pw = ::getpwent()) {
    if ((pw->pw_uid >= 1000 && pw->pw_uid < 65534) || pw->pw_uid == 0) {
      if (pw->pw_dir && pw->pw_dir[0] == '/') homes.insert(Lexical(pw->pw_dir));
    }
  }
  ::endpwent();
  homes.erase("/");
  return homes;
}

// Why `path` (absolute, normalised) is dangerous, or "" when it is not.
std::string Danger(const std::string& path, const std::string& state_dir) {
  if (path == "/") return "it is the host's root filesystem";
  for (const char* dir : {"/proc", "/sys", "/dev", "/boot", "/root", "/etc"}) {
    if (IsUnder(path, dir)) return std::string("it is or is under ") + dir;
  }
  if (path == "/home") return "it is /home, every user's home directory";
  if (IsUnder(path, "/home") && path.find('/', 6) == std::string::npos) {
    return "it is a whole home directory (mount a project directory inside it instead)";
  }
  for (const std::string& home : HomeDirs()) {
    if (path == home) return "it is a whole home directory (mount a subdirectory instead)";
  }
  if (IsRuntimeSocketName(path)) return "it is a container runtime socket";
  for (const std::string& sock : RuntimeSockets()) {
    if (IsUnder(path, sock) || IsUnder(sock, path)) {
      return "it is or holds a container runtime socket or state (" + sock + ")";
    }
    std::string resolved = Resolve(sock);
    if (!resolved.empty() && (IsUnder(path, resolved) || IsUnder(resolved, path))) {
      return "it is or holds a container runtime socket or state (" + sock + ")";
    }
  }
  if (!state_dir.empty()) {
    for (const std::string& s : {Lexical(state_dir), Resolve(state_dir)}) {
      if (!s.empty() && (IsUnder(path, s) || IsUnder(s, path))) {
        return "it is, holds or is inside the server's state directory (" + s + ")";
      }
    }
  }
  return "";
}

}  // namespace

Status CheckMountSource(const std::string& source, const std::string& state_dir) {
  if (source.empty() || source[0] != '/') {
    return Error::Msg("\"" + source + "\" is not an absolute path");
  }
  std::string lexical = Lexical(source);
  if (lexical.empty()) return Error::Msg("\"" + source + "\" has \"..\" components");
  if (std::string why = Danger(lexical, state_dir); !why.empty()) {
    return Error::Msg("refusing to mount \"" + source + "\": " + why);
  }
  struct stat st;
  if (::stat(source.c_str(), &st) != 0) return Error::Sys("stat(\"" + source + "\")");
  std::string resolved = Resolve(source);
  if (resolved.empty()) return Error::Sys("realpath(\"" + source + "\")");
  if (std::string why = Danger(resolved, state_dir); !why.empty()) {
    return Error::Msg("refusing to mount \"" + source + "\": it resolves to \"" + resolved +
                      "\" and " + why);
  }
  if (S_ISSOCK(st.st_mode)) {
    return Error::Msg("refusing to mount \"" + source + "\": it is a socket");
  }
  return Ok();
}

Status CheckMountTarget(const std::string& target) {
  if (target.empty() || target[0] != '/') {
    return Error::Msg("\"" + target + "\" is not an absolute path");
  }
  if (Lexical(target) != target) {
    return Error::Msg("\"" + target +
                      "\" is not a clean path (no \"//\", \".\", \"..\" or trailing /)");
  }
  if (target == "/" || target == "/workspace") {
    return Error::Msg("\"" + target + "\" is reserved by the cell");
  }
  for (const char* dir : {"/proc", "/sys", "/dev"}) {
    if (IsUnder(target, dir)) return Error::Msg("\"" + target + "\" is under " + dir);
  }
  return Ok();
}

}  // namespace mcpcell::policies
