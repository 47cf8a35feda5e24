// BakePackages (template_store.h): pip and npm run inside a cell made over the staging
// rootfs, so they see the template's own interpreter, libraries and paths, never the
// host's, and nothing they run can reach the host or the network (a cell has only
// loopback). They install as the sandbox user under /workspace/bake (pip's --root, npm's
// --prefix), which is the cell's workspace dir on the host; that tree is moved out, the
// cell destroyed, and the tree merged into the rootfs by the same checked writer as a
// --from source (FillTemplateRootfs), owned by the builder, before the template is digested.
#include <dirent.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "sandbox/cell.h"
#include "sandbox/cell_channel.h"
#include "sandbox/cell_spec.h"
#include "sandbox/state_dir.h"  // RemoveCellDir
#include "sandbox/template_store.h"

namespace mcpcell::sandbox {
namespace {

constexpr const char* kBakeDir = "/mcpcell-bake";
constexpr auto kBakeTimeout = std::chrono::minutes(10);

// pip's --root keeps the distribution's own scheme (Debian: /usr/local/lib/python3.X/
// dist-packages) and skips PEP 668's externally-managed check, which concerns the
// interpreter's live environment, not a tree being assembled.
constexpr const char* kPipScript =
    "command -v python3 >/dev/null 2>&1 || "
    "{ echo \"the template's rootfs has no python3 (on PATH)\" >&2; exit 3; }\n"
    "python3 -m pip --version >/dev/null 2>&1 || "
    "{ echo \"the template's rootfs has python3 but no pip (python3 -m pip)\" >&2; exit 3; }\n"
    "PYTHONNOUSERSITE=1 exec python3 -m pip install --no-index --no-cache-dir "
    "--disable-pip-version-check --no-warn-script-location --root /workspace/bake "
    "--find-links /mcpcell-bake/wheels -r /mcpcell-bake/req.txt\n";

constexpr const char* kNpmScript =
    "command -v npm >/dev/null 2>&1 || "
    "{ echo \"the template's rootfs has no npm (on PATH)\" >&2; exit 3; }\n"
    "exec npm install --global --offline --no-audit --no-fund "
    "--prefix /workspace/bake/usr/local /mcpcell-bake/npm/*.tgz\n";

Status CheckDir(const std::string& flag, const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error::Msg(flag + " \"" + dir + "\": not a directory");
  return Ok();
}

Result<size_t> CountFiles(const std::string& flag, const std::string& dir, const std::string& ext) {
  if (Status s = CheckDir(flag, dir); !s) return s.error();
  size_t n = 0;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* de = readdir(d)) {
      std::string name = de->d_name;
      if (name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0)
        ++n;
    }
    closedir(d);
  }
  if (n == 0) return Error::Msg(flag + " \"" + dir + "\": no " + ext + " files in it");
  return n;
}

Result<std::unique_ptr<Cell>> MakeBakeCell(const std::string& rootfs, const BakeRequest& req) {
  CellSpec spec = DefaultCellSpec(GenerateCellId('b'), req.state_dir);
  spec.rootfs.skeleton_dir = rootfs;
  spec.rootfs.system_dirs = {};
  spec.tmpfs.workspace_bytes = 0;  // a host dir under the cell dir: the host reads it after
  const std::string b = kBakeDir;
  if (!req.pip_wheels.empty()) {
    spec.mounts.push_back({req.pip_wheels, b + "/wheels", false});
    spec.mounts.push_back({req.pip_requirements, b + "/req.txt", false});
  }
  if (!req.npm_packages.empty()) spec.mounts.push_back({req.npm_packages, b + "/npm", false});
  if (Status s = ValidateCellSpec(spec); !s) return s.error();
  CellCreateOptions create;
  create.init_path = req.init_path;
  auto cell = Cell::Create(spec, create);
  if (!cell) return cell.error().Wrap("a cell over the new rootfs");
  return cell;
}

Status RunInstaller(Cell& cell, const char* what, const char* script) {
  ExecOptions exec;
  exec.argv = {"/bin/sh", "-c", script};
  exec.timeout = kBakeTimeout;
  exec.keep_bytes = 64 * 1024;
  auto r = cell.channel().Exec(exec);
  if (!r) return r.error().Wrap(what);
  if (r->timed_out) return Error::Msg(std::string(what) + ": timed out");
  if (r->signaled || r->exit_code != 0) {
    std::string err = r->err.data.empty() ? r->out.data : r->err.data;
    if (err.size() > 2000) err = "..." + err.substr(err.size() - 2000);
    return Error::Msg(std::string(what) + " failed (exit " + std::to_string(r->exit_code) +
                      "): " + err);
  }
  return Ok();
}

// Runs the installers, then moves what they wrote to `out` (beside the rootfs, on the same
// filesystem). The move comes before the cell is destroyed and the copy after: a process
// an installer left running could otherwise swap a directory of the tree for a symlink to
// a host path while the host copies it.
Status BakeInCell(Cell& cell, const BakeRequest& req, const std::string& out) {
  if (!req.pip_wheels.empty()) {
    if (Status s = RunInstaller(cell, "pip install", kPipScript); !s) return s;
  }
  if (!req.npm_packages.empty()) {
    if (Status s = RunInstaller(cell, "npm install", kNpmScript); !s) return s;
  }
  const std::string baked = cell.dir() + "/workspace/bake";
  struct stat st;
  if (lstat(baked.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    return Error::Msg("the installers wrote nothing under /workspace/bake");
  if (rename(baked.c_str(), out.c_str()) != 0)
    return Error::Sys("rename(\"" + baked + "\", \"" + out + "\")");
  return Ok();
}

}  // namespace

Result<std::vector<std::string>> BakePackages(const std::string& rootfs, const BakeRequest& req) {
  std::vector<std::string> baked;
  if (req.pip_wheels.empty() != req.pip_requirements.empty())
    return Error::Msg("--pip-wheels and --pip-requirements go together");
  if (!req.pip_wheels.empty()) {
    auto wheels = CountFiles("--pip-wheels", req.pip_wheels, ".whl");
    if (!wheels) return wheels.error();
    struct stat st;
    if (stat(req.pip_requirements.c_str(), &st) != 0 || !S_ISREG(st.st_mode))
      return Error::Msg("--pip-requirements \"" + req.pip_requirements + "\": not a file");
    const std::string file = req.pip_requirements.substr(req.pip_requirements.rfind('/') + 1);
    baked.push_back("pip: " + file + " from " + std::to_string(*wheels) + " wheels");
  }
  if (!req.npm_packages.empty()) {
    auto tgz = CountFiles("--npm-packages", req.npm_packages, ".tgz");
    if (!tgz) return tgz.error();
    baked.push_back("npm: " + std::to_string(*tgz) + " packages");
  }
  if (baked.empty()) return baked;
  auto cell = MakeBakeCell(rootfs, req);
  if (!cell) return cell.error();
  const std::string out = rootfs.substr(0, rootfs.rfind('/')) + "/baked";
  Status s = BakeInCell(**cell, req, out);
  Status destroyed = (*cell)->Destroy();
  if (s && destroyed) s = FillTemplateRootfs(out, rootfs);
  // Owned by the cell's uid when it was a root server's; never left in the version's dir.
  Status removed = RemoveCellDir(out);
  if (s && !removed) s = removed;
  if (!s) return s.error().Wrap("baked packages");
  if (!destroyed) return destroyed.error().Wrap("destroying the bake cell");
  return baked;
}

}  // namespace mcpcell::sandbox
