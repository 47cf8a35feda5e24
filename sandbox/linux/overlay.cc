// The cell's root filesystem: template preparation and overlay mounts (see overlay.h).
#include "sandbox/linux/overlay.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string_view>
#include <vector>

#include "sandbox/linux/idmap_mount.h"
#include "sandbox/linux/mounts.h"

namespace mcpcell::sandbox {
namespace {

// Bump when the template's content rules change, so old templates are not reused.
// v3: copies keep the host's modification times (v2 stamped them with the copy time).
// v4: the name carries a fingerprint of the host entries copied (HostTemplateFingerprint).
constexpr const char* kTemplateVersion = "host-v4";
constexpr off_t kMaxCopiedFileBytes = 8 << 20;
constexpr int kMaxCopyDepth = 4;

// Host /etc entries a cell gets. Everything else (shadow, gshadow, ssh, sudoers,
// ssl/private, machine-id, pip.conf/npmrc/gitconfig that may hold tokens) stays out.
constexpr const char* kEtcFiles[] = {
    "ld.so.cache", "ld.so.conf", "protocols",  "services", "ethertypes",     "rpc",
    "networks",    "mime.types", "host.conf",  "gai.conf", "debian_version", "issue",
    "os-release",  "localtime",  "timezone",   "inputrc",  "bash.bashrc",    "profile",
    "shells",      "magic",      "magic.mime", "mailcap",  "locale.alias",   "ca-certificates.conf",
};
constexpr const char* kEtcDirs[] = {
    "alternatives", "ld.so.conf.d", "profile.d", "ssl/certs", "ca-certificates",
};
// Directories of the skeleton: mount points and the usual top-level layout.
constexpr const char* kSkeletonDirs[] = {
    "usr", "etc",     "etc/ssl",   "proc",    "dev", "tmp", "run", "workspace", "home",
    "var", "var/lib", "var/cache", "var/log", "mnt", "opt", "srv", "sys",
};
// Usual merged-/usr symlinks, created when the host has them as symlinks too.
constexpr const char* kUsrSymlinks[] = {"bin", "lib", "lib32", "lib64", "libx32", "sbin"};

// Every host path under /etc the template copies (when it exists), the same list for
// BuildSkeleton and HostTemplateFingerprint: a source copied but not fingerprinted would
// go stale unseen.
const std::vector<std::string>& CopiedEtcEntries() {
  static const auto* entries = [] {
    auto* v = new std::vector<std::string>();
    for (const char* f : kEtcFiles) v->push_back(std::string("/etc/") + f);
    for (const char* d : kEtcDirs) v->push_back(std::string("/etc/") + d);
    // Python's per-version config dirs (/etc/python3, /etc/python3.11).
    v->push_back("/etc/python3");
    for (int minor = 6; minor <= 20; ++minor) v->push_back("/etc/python3." + std::to_string(minor));
    return v;
  }();
  return *entries;
}

// The copy gets the host entry's access and modification times. Python validates a
// cached .pyc by its source's mtime and size: /usr/lib/python3.X/sitecustomize.py links
// to /etc/python3.X/sitecustomize.py, and with a fresh mtime every interpreter start in a
// cell recompiled it (and failed to write the .pyc to the read-only cache), ~10% of
// `python3 -c 'print(1)'`.
Status CopyTimes(const std::string& to, const struct stat& st) {
  const struct timespec times[2] = {st.st_atim, st.st_mtim};
  if (::utimensat(AT_FDCWD, to.c_str(), times, AT_SYMLINK_NOFOLLOW) != 0) {
    return Error::Sys("utimensat(\"" + to + "\")");
  }
  return Ok();
}

Status CopyFile(const std::string& from, const std::string& to, const struct stat& st) {
  if (st.st_size > kMaxCopiedFileBytes) return Ok();  // nothing that big belongs in /etc
  int in = ::open(from.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (in < 0) return errno == EACCES ? Ok() : Error::Sys("open(\"" + from + "\")");
  std::string data;
  char buf[65536];
  for (;;) {
    ssize_t n = ::read(in, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int saved = errno;
      ::close(in);
      return Error::Sys("read(\"" + from + "\")", saved);
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  ::close(in);
  // Never carry setuid/setgid or write-for-others bits into the template.
  if (Status s = WriteWholeFile(to, data, st.st_mode & 0755); !s) return s;
  return CopyTimes(to, st);
}

Status CopyEntry(const std::string& from, const std::string& to, int depth);

Status CopyDir(const std::string& from, const std::string& to, const struct stat& st, int depth) {
  if (depth > kMaxCopyDepth) return Ok();
  if (Status s = MakeDirs(to, 0755); !s) return s;
  DIR* dir = ::opendir(from.c_str());
  if (!dir) return errno == EACCES ? Ok() : Error::Sys("opendir(\"" + from + "\")");
  Status result;
  while (struct dirent* e = ::readdir(dir)) {
    std::string_view name = e->d_name;
    if (name == "." || name == ".." || name == "private") continue;
    result = CopyEntry(from + "/" + e->d_name, to + "/" + e->d_name, depth + 1);
    if (!result) break;
  }
  ::closedir(dir);
  if (!result) return result;
  return CopyTimes(to, st);  // after the entries, whose creation set it to now
}

Status CopyEntry(const std::string& from, const std::string& to, int depth) {
  struct stat st;
  if (::lstat(from.c_str(), &st) != 0) {
    return errno == ENOENT ? Ok() : Error::Sys("lstat(\"" + from + "\")");
  }
  if (S_ISLNK(st.st_mode)) {
    char target[4096];
    ssize_t n = ::readlink(from.c_str(), target, sizeof target - 1);
    if (n < 0) return Error::Sys("readlink(\"" + from + "\")");
    target[n] = '\0';
    if (::symlink(target, to.c_str()) != 0) {
      if (errno == EEXIST) return Ok();
      return Error::Sys("symlink(\"" + std::string(target) + "\", \"" + to + "\")");
    }
    return CopyTimes(to, st);
  }
  if (S_ISDIR(st.st_mode)) return CopyDir(from, to, st, depth);
  if (S_ISREG(st.st_mode)) return CopyFile(from, to, st);
  return Ok();  // devices, fifos, sockets: never part of a template
}

Status BuildSkeleton(const std::string& dir) {
  if (Status s = MakeDirs(dir, 0755); !s) return s;
  for (const char* d : kSkeletonDirs) {
    if (Status s = MakeDirs(dir + "/" + d, 0755); !s) return s;
  }
  if (::chmod((dir + "/tmp").c_str(), 01777) != 0) return Error::Sys("chmod(tmp, 01777)");
  // /var/tmp is the cell's /tmp: a world-writable directory of the shared template could
  // not be written through the overlay (copy-up keeps its host owner, unmapped in a cell).
  if (::symlink("../tmp", (dir + "/var/tmp").c_str()) != 0) {
    return Error::Sys("symlink(\"../tmp\", \"" + dir + "/var/tmp\")");
  }
  if (Status s = MakeDirs(dir + "/root", 0700); !s) return s;
  for (const char* link : kUsrSymlinks) {
    struct stat st;
    std::string host = std::string("/") + link;
    if (::lstat(host.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) continue;
    std::string target = std::string("usr/") + link;
    if (::symlink(target.c_str(), (dir + "/" + link).c_str()) != 0) {
      return Error::Sys("symlink(\"" + target + "\", \"" + dir + "/" + link + "\")");
    }
  }
  for (const std::string& path : CopiedEtcEntries()) {
    if (Status s = CopyEntry(path, dir + path, 0); !s) return s;
  }
  if (Status s = WriteWholeFile(dir + "/etc/nsswitch.conf",
                                "passwd: files\ngroup: files\nshadow: files\nhosts: files dns\n"
                                "networks: files\nprotocols: files\nservices: files\n",
                                0644);
      !s) {
    return s;
  }
  // No resolver: a cell has only `lo`; egress goes through the server's proxy.
  return WriteWholeFile(dir + "/etc/resolv.conf",
                        "# mcpcell: no DNS inside a cell; use HTTP_PROXY/HTTPS_PROXY\n", 0644);
}

Status RemoveTree(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Ok();
  if (S_ISDIR(st.st_mode)) {
    if (DIR* dir = ::opendir(path.c_str())) {
      while (struct dirent* e = ::readdir(dir)) {
        std::string_view name = e->d_name;
        if (name == "." || name == "..") continue;
        (void)RemoveTree(path + "/" + e->d_name);
      }
      ::closedir(dir);
    }
    if (::rmdir(path.c_str()) != 0) return Error::Sys("rmdir(\"" + path + "\")");
    return Ok();
  }
  if (::unlink(path.c_str()) != 0) return Error::Sys("unlink(\"" + path + "\")");
  return Ok();
}

// Where cell init mounts its own filesystems (setup.cc): the host template has them all, a
// built template's rootfs (template_store.h) may not.
constexpr const char* kCellMountPoints[] = {"proc", "dev", "tmp", "run", "workspace"};

// Mount points of the system dirs and the spec's mounts, and those of kCellMountPoints the
// template lacks, created in the upper `upper`.
Status MakeMountTargets(const CellSpec& spec, const std::string& upper) {
  for (const char* dir : kCellMountPoints) {
    struct stat st;
    if (::lstat((spec.rootfs.skeleton_dir + "/" + dir).c_str(), &st) == 0) continue;
    if (Status s = MakeDirs(upper + "/" + dir, 0755); !s) return s;
  }
  for (const std::string& dir : spec.rootfs.system_dirs) {
    if (Status s = MakeDirs(upper + dir, 0755); !s) return s;
  }
  for (const CellMount& m : spec.mounts) {
    struct stat st;
    if (::stat(m.host_path.c_str(), &st) != 0) {
      return Error::Sys("stat(\"" + m.host_path + "\") for the mount at " + m.cell_path);
    }
    if (S_ISDIR(st.st_mode)) {
      if (Status s = MakeDirs(upper + m.cell_path, 0755); !s) return s;
      continue;
    }
    std::string parent = m.cell_path.substr(0, m.cell_path.rfind('/'));
    if (Status s = MakeDirs(upper + parent, 0755); !s) return s;
    if (Status s = MakeEmptyFile(upper + m.cell_path, 0644); !s) return s;
  }
  return Ok();
}

}  // namespace

std::string HostTemplateFingerprint(const std::string& host_root) {
  // FNV-1a, 64 bits: a name, not a defence (the host's /etc is the host admin's).
  uint64_t h = 0xcbf29ce484222325ull;
  auto mix = [&h](const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  };
  auto entry = [&](const std::string& path) {
    mix(path.c_str(), path.size() + 1);
    struct stat st;
    if (::lstat((host_root + path).c_str(), &st) != 0) {
      const int missing = -1;
      mix(&missing, sizeof missing);
      return;
    }
    // A replaced file (new inode: ldconfig, update-ca-certificates, dpkg), an edited one
    // (size, mtime) and a directory that gained, lost or renamed an entry (its mtime).
    const uint64_t fields[] = {static_cast<uint64_t>(st.st_mode), static_cast<uint64_t>(st.st_ino),
                               static_cast<uint64_t>(st.st_size),
                               static_cast<uint64_t>(st.st_mtim.tv_sec),
                               static_cast<uint64_t>(st.st_mtim.tv_nsec)};
    mix(fields, sizeof fields);
  };
  for (const char* link : kUsrSymlinks) entry(std::string("/") + link);
  for (const std::string& path : CopiedEtcEntries()) entry(path);
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

Result<std::string> PrepareHostTemplate(const std::string& state_dir) {
  std::string templates = state_dir + "/templates";
  // One template per state of the host's copied entries: after a host upgrade changes
  // them (a new loader cache, CA certificates, alternatives), the next cell gets a new
  // template instead of the stale copy. Cells made before keep theirs (their overlays
  // hold it), so older templates are left in place.
  std::string final_dir = templates + "/" + kTemplateVersion + "-" + HostTemplateFingerprint("");
  struct stat st;
  if (::stat(final_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return final_dir;
  if (Status s = MakeDirs(templates, 0755); !s) return s.error().Wrap("prepare template");
  // Cell init of a root server runs as an unprivileged host uid and must traverse this.
  if (::chmod(templates.c_str(), 0755) != 0) return Error::Sys("chmod(\"" + templates + "\")");
  // Unique per call, not only per process: two threads of one server (two warm pools
  // filling at once) built into the same directory, and one's rename could publish the
  // other's half-built tree (a template without /workspace: every later cell failed).
  static std::atomic<uint64_t> serial{0};
  char tmp_name[96];
  std::snprintf(tmp_name, sizeof tmp_name, "/.building-%d-%ld-%llu", static_cast<int>(::getpid()),
                static_cast<long>(::time(nullptr)),
                static_cast<unsigned long long>(serial.fetch_add(1)));
  std::string tmp = templates + tmp_name;
  (void)RemoveTree(tmp);
  if (Status s = BuildSkeleton(tmp); !s) {
    (void)RemoveTree(tmp);
    return s.error().Wrap("prepare template " + final_dir);
  }
  // rename(2) makes the template appear complete or not at all; a concurrent builder that
  // lost the race finds the directory taken and discards its copy.
  if (::rename(tmp.c_str(), final_dir.c_str()) != 0) {
    int saved = errno;
    (void)RemoveTree(tmp);
    if (saved != EEXIST && saved != ENOTEMPTY) {
      return Error::Sys("rename(\"" + tmp + "\", \"" + final_dir + "\")", saved);
    }
  }
  return final_dir;
}

Status MountOverlay(const std::vector<std::string>& lowers, const std::string& upper,
                    const std::string& work, const std::string& target) {
  std::string lowerdir;
  for (const std::string& lower : lowers) {
    if (lower.find_first_of(",:\\") != std::string::npos) {
      return Error::Msg("overlay layer path \"" + lower + "\" contains ',', ':' or '\\'");
    }
    lowerdir += (lowerdir.empty() ? "" : ":") + lower;
  }
  for (const std::string* p : {&upper, &work}) {
    if (p->find_first_of(",:\\") != std::string::npos) {
      return Error::Msg("overlay layer path \"" + *p + "\" contains ',', ':' or '\\'");
    }
  }
  // userxattr: inside a user namespace overlayfs may only use user.* xattrs (and it reads
  // a snapshot layer's opaque directories from user.overlay.opaque).
  std::string data =
      "lowerdir=" + lowerdir + ",upperdir=" + upper + ",workdir=" + work + ",userxattr";
  return Mount("overlay", target, "overlay", MS_NOSUID | MS_NODEV, data);
}

namespace {

Status AttachCellLayers(const CellSpec& spec, std::vector<UniqueFd>& layer_mounts,
                        const std::string& scratch) {
  if (layer_mounts.size() != spec.layers.size()) {
    return Error::Msg("the server sent " + std::to_string(layer_mounts.size()) +
                      " layer mounts for " + std::to_string(spec.layers.size()) + " layers");
  }
  for (size_t i = 0; i < layer_mounts.size(); ++i) {
    const std::string target = CellLayerMountPoint(scratch, i);
    if (Status s = MakeDirs(target, 0755); !s) return s;
    if (Status s = AttachMount(layer_mounts[i].get(), target); !s) {
      return s.error().Wrap("layers[" + std::to_string(i) + "] (" + spec.layers[i].host_dir + ")");
    }
  }
  layer_mounts.clear();
  return Ok();
}

}  // namespace

std::string CellLayerMountPoint(const std::string& scratch, size_t index) {
  return scratch + "/lowers/" + std::to_string(index);
}

std::vector<std::string> CellLowerDirs(const CellSpec& spec, const std::string& scratch,
                                       const std::string& target, const std::string& base) {
  std::vector<std::string> lowers;
  for (size_t i = 0; i < spec.layers.size(); ++i) {
    if (spec.layers[i].target == target) lowers.push_back(CellLayerMountPoint(scratch, i));
  }
  if (!base.empty()) lowers.push_back(base);
  return lowers;
}

Status MountCellRoot(const CellSpec& spec, const std::string& hostname, const std::string& scratch,
                     const std::string& root, std::vector<UniqueFd>& layer_mounts) {
  if (Status s = MountTmpfs(scratch, spec.tmpfs.root_upper_bytes, 0755); !s) return s;
  if (Status s = AttachCellLayers(spec, layer_mounts, scratch); !s) return s;
  const std::string upper = scratch + "/layers/root/upper";
  const std::string work = scratch + "/layers/root/work";
  if (Status s = MakeDirs(upper, 0755); !s) return s;
  if (Status s = MakeDirs(work, 0755); !s) return s;
  if (Status s = MakeDirs(root, 0755); !s) return s;
  // Everything the cell's root must add to the template goes into the upper before the
  // overlay exists: the template's directories belong to a host uid the cell's root does
  // not map (root server), so they cannot be written through the overlay. The upper also
  // wins over a snapshot layer's /etc files: a restored or forked cell gets its own
  // hostname and hosts.
  if (Status s = WriteCellEtc(spec, hostname, upper); !s) return s;
  if (Status s = MakeMountTargets(spec, upper); !s) return s;
  std::vector<std::string> lowers = CellLowerDirs(spec, scratch, "/", spec.rootfs.skeleton_dir);
  if (Status s = MountOverlay(lowers, upper, work, root); !s) return s;
  for (size_t i = 0; i < spec.rootfs.system_dirs.size(); ++i) {
    const std::string& dir = spec.rootfs.system_dirs[i];
    std::string layer = scratch + "/layers/sys" + std::to_string(i);
    if (Status m = MakeDirs(layer + "/upper", 0755); !m) return m;
    if (Status m = MakeDirs(layer + "/work", 0755); !m) return m;
    lowers = CellLowerDirs(spec, scratch, dir, dir);
    if (Status m = MountOverlay(lowers, layer + "/upper", layer + "/work", root + dir); !m)
      return m;
  }
  return Ok();
}

bool HasWorkspaceLayer(const CellSpec& spec) {
  for (const CellLayer& l : spec.layers) {
    if (l.target == "/workspace") return true;
  }
  return false;
}

Status MountWorkspaceOverlay(const CellSpec& spec, const std::string& scratch,
                             const std::string& target) {
  // A tmpfs of its own: the workspace's limit (workspace_bytes) applies to it alone, and
  // the server reaches it through one fd (KeepWritableLayersReachable, setup.cc).
  const std::string ws = scratch + "/ws";
  const uint64_t size =
      spec.tmpfs.workspace_bytes > 0 ? spec.tmpfs.workspace_bytes : spec.tmpfs.root_upper_bytes;
  if (Status s = MakeDirs(ws, 0755); !s) return s;
  if (Status s = MountTmpfs(ws, size, 0755); !s) return s;
  if (Status s = MakeDirs(ws + "/upper", 0755); !s) return s;
  if (Status s = MakeDirs(ws + "/work", 0755); !s) return s;
  // The merged directory takes the upper's owner: /workspace is the sandbox user's.
  if (::chown((ws + "/upper").c_str(), spec.sandbox_uid, spec.sandbox_gid) != 0) {
    return Error::Sys("chown(\"" + ws + "/upper\", " + std::to_string(spec.sandbox_uid) + ")");
  }
  return MountOverlay(CellLowerDirs(spec, scratch, "/workspace", ""), ws + "/upper", ws + "/work",
                      target);
}

Status WriteCellEtc(const CellSpec& spec, const std::string& hostname, const std::string& root) {
  if (Status s = MakeDirs(root + "/etc", 0755); !s) return s;
  std::string uid = std::to_string(spec.sandbox_uid);
  std::string gid = std::to_string(spec.sandbox_gid);
  std::string passwd = "root:x:0:0:root:/root:/bin/sh\n" + spec.sandbox_user + ":x:" + uid + ":" +
                       gid + "::/workspace:/bin/sh\n" +
                       "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
  std::string group =
      "root:x:0:\n" + spec.sandbox_user + ":x:" + gid + ":\n" + "nogroup:x:65534:\n";
  std::string hosts = "127.0.0.1\tlocalhost\n127.0.1.1\t" + hostname +
                      "\n::1\tlocalhost ip6-localhost ip6-loopback\n";
  if (Status s = WriteWholeFile(root + "/etc/passwd", passwd, 0644); !s) return s;
  if (Status s = WriteWholeFile(root + "/etc/group", group, 0644); !s) return s;
  if (Status s = WriteWholeFile(root + "/etc/hosts", hosts, 0644); !s) return s;
  return WriteWholeFile(root + "/etc/hostname", hostname + "\n", 0644);
}

}  // namespace mcpcell::sandbox
