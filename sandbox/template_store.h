// The template store: versioned, immutable root filesystems a policy can name as its cells'
// lower layer (`filesystem.template = "NAME"` or "NAME@VERSION"), next to the "host"
// template (PrepareHostTemplate, linux/overlay.h).
//
//   <state_dir>/templates/built/<NAME>/<VERSION>/rootfs/        the tree, the cells' lower
//   <state_dir>/templates/built/<NAME>/<VERSION>/template.json  name, version, created,
//                                                               source, digest, packages
//   <state_dir>/templates/built/.tmp-<random>/                  a build in progress
//   <state_dir>/templates/built/lock                            flock taken by Commit/Delete
//
// A build fills a staging dir (FillTemplateRootfs, BakePackages), then Commit hashes the
// tree (TemplateDigest), writes template.json and renames the dir to the next version of
// its name (1, 2, 3...), so a version is never seen half-made and never changes. Files are
// owned by whoever built them (root on a server: "nobody" inside a cell, readable like the
// host's /usr), setuid and setgid bits dropped, directories 0755 up to the rootfs so the
// cells' own host uids reach it.
//
// Threading: a TemplateStore holds only paths; several processes may share a store (the
// lock serialises version numbering and deletion).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"

namespace mcpcell::sandbox {

inline constexpr const char* kHostTemplateName = "host";

// "NAME" (version 0: the latest) or "NAME@VERSION". Names are 1-64 of [A-Za-z0-9._-], not
// "." or "..", and not "host" (the built-in template).
struct TemplateRef {
  std::string name;
  uint32_t version = 0;
};
Result<TemplateRef> ParseTemplateRef(const std::string& text);
Status CheckTemplateName(const std::string& name);
std::string TemplateRefText(const std::string& name, uint32_t version);  // "name@3"

struct TemplateInfo {
  // Default member initializers so designated initializers build under -Wextra.
  std::string name = {};
  uint32_t version = 0;
  std::string created = {};  // RFC 3339, UTC
  std::string source = {};   // what it was built from ("from:/srv/rootfs", "debian:bookworm")
  std::string digest = {};   // TemplateDigest of rootfs/
  uint64_t files = 0;        // regular files
  uint64_t bytes = 0;        // their sizes
  std::vector<std::string> packages = {};  // baked in: "pip: req.txt from 3 wheels", ...
  std::string dir = {};                    // <root>/<name>/<version>
  std::string rootfs() const { return dir + "/rootfs"; }
  std::string ref() const { return TemplateRefText(name, version); }
};

// The SHA-256 over the tree's entries in path order: path, type, permission bits, owner,
// size, and the content's SHA-256 (files) or target (symlinks). Times are left out, so the
// same tree digests the same wherever and whenever it was copied.
struct TreeDigest {
  std::string sha256;
  uint64_t files = 0;
  uint64_t bytes = 0;
};
Result<TreeDigest> TemplateDigest(const std::string& rootfs);

// A build's staging dir; removed by the destructor unless committed.
class TemplateBuild {
 public:
  TemplateBuild(std::string name, std::string staging)
      : name_(std::move(name)), dir_(std::move(staging)) {}
  TemplateBuild(TemplateBuild&& other) noexcept;
  TemplateBuild& operator=(TemplateBuild&&) = delete;
  ~TemplateBuild();
  const std::string& name() const { return name_; }
  const std::string& dir() const { return dir_; }
  std::string rootfs() const { return dir_ + "/rootfs"; }

 private:
  friend class TemplateStore;
  std::string name_;
  std::string dir_;  // empty once committed or moved from
};

class TemplateStore {
 public:
  explicit TemplateStore(const std::string& state_dir);
  const std::string& root() const { return root_; }

  // Checks the name and makes an empty rootfs/ in a fresh staging dir.
  Result<TemplateBuild> Begin(const std::string& name) const;
  // Digests the build, records it and renames it in as the name's next version.
  Result<TemplateInfo> Commit(TemplateBuild& build, const std::string& source,
                              const std::vector<std::string>& packages) const;
  // Every version of every name, by name then version. A missing store holds none.
  Result<std::vector<TemplateInfo>> List() const;
  // "NAME" (its latest version) or "NAME@VERSION". Unknown: the error lists what exists.
  Result<TemplateInfo> Find(const std::string& ref) const;
  // Only "NAME@VERSION": a version a running server's compiled policy pins keeps working
  // for the cells it already has, but new cells of that server fail; delete with care.
  Status Delete(const std::string& ref) const;

 private:
  std::string root_;
};

// Fills `rootfs` (an empty dir) from `from`: a directory, or a tar archive (.tar, .tar.gz,
// .tgz, .tar.zst, .tar.xz; by content, not name). Refused, naming the entry: absolute paths,
// "..", hard links outside the tree, symlinks whose relative target climbs above the root,
// writing through a symlink, device nodes, fifos and sockets. Modes (minus setuid and
// setgid), symlinks and hard links are kept; owners are not.
Status FillTemplateRootfs(const std::string& from, const std::string& rootfs);
// `mmdebstrap --variant=minbase SUITE` into a tar and FillTemplateRootfs from it; an error
// saying so when mmdebstrap is not installed.
Status DebootstrapTemplateRootfs(const std::string& suite, const std::string& rootfs,
                                 const std::string& scratch_dir);

// Packages baked in offline (template_store_bake.cc): each installer runs inside a cell made
// over the staging rootfs with the inputs bound read-only, writing under a root of its own
// in the cell's workspace, which is then copied into the rootfs.
struct BakeRequest {
  std::string pip_wheels;        // host dir of wheels (bound at /mcpcell-bake/wheels)
  std::string pip_requirements;  // host requirements file (bound at /mcpcell-bake/req.txt)
  std::string npm_packages;      // host dir of npm tarballs (*.tgz)
  std::string state_dir;
  std::string init_path;  // mcpcell-init; empty: next to the running program
};
// What was baked, one line per installer (TemplateInfo::packages).
Result<std::vector<std::string>> BakePackages(const std::string& rootfs, const BakeRequest& req);

}  // namespace mcpcell::sandbox
