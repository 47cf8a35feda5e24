// The filesystem section of a policy file: template, workspace (ephemeral, a host directory,
// or a named workspace the tenant owns) and what a busy one does, and the mounts, each
// checked by policies/mount_check.h (see loader_sections.h).
#include <set>
#include <string>

#include "policies/loader_sections.h"
#include "policies/mount_check.h"
#include "policies/workspace_name.h"
#include "sandbox/template_store.h"

namespace mcpcell::policies {
namespace {

void ReadMount(TomlReader& r, const toml::node& node, const std::string& at, MountPolicy* out) {
  if (!node.is_table()) {
    r.Fail(node.source(), at,
           "expected a table {source, target, mode}, got " + TomlReader::TypeName(node));
    return;
  }
  const toml::table& t = *node.as_table();
  r.OnlyKeys(t, at, {"source", "target", "mode"});
  for (const char* required : {"source", "target"}) {
    if (!r.failed() && !t.get(required))
      r.Fail(t.source(), at, std::string("missing \"") + required + "\"");
  }
  r.String(t, at, "source", &out->source);
  r.String(t, at, "target", &out->target);
  std::string mode = "ro";
  r.String(t, at, "mode", &mode, {"ro", "rw"});
  out->writable = mode == "rw";
  if (r.failed()) return;
  if (Status s = CheckMountSource(out->source, r.options().state_dir); !s) {
    r.Fail(t.get("source")->source(), at + ".source", s.error().message);
    return;
  }
  if (Status s = CheckMountTarget(out->target); !s) {
    r.Fail(t.get("target")->source(), at + ".target", s.error().message);
  }
}

// "host", or a built template (sandbox/template_store.h) pinned here to the version it has
// now, so every cell the policy makes gets the same tree. Without a state dir only the
// syntax is checked (CompileCellSpec resolves it then).
void ReadTemplate(TomlReader& r, const toml::table& t, FilesystemPolicy* out) {
  const toml::node* node = t.get("template");
  if (r.failed() || !node || out->template_name == sandbox::kHostTemplateName) return;
  Result<std::string> pinned = out->template_name;
  if (r.options().state_dir.empty()) {
    if (auto ref = sandbox::ParseTemplateRef(out->template_name); !ref) pinned = ref.error();
  } else if (auto info = sandbox::TemplateStore(r.options().state_dir).Find(out->template_name)) {
    pinned = info->ref();
  } else {
    pinned = info.error();
  }
  if (!pinned) return r.Fail(node->source(), "filesystem.template", pinned.error().message);
  out->template_name = *pinned;
}

// filesystem.workspace: "ephemeral", "persistent" (with workspace_dir) or
// "persistent:NAME" (a workspace the session's tenant owns, policies/workspace_name.h).
void ReadWorkspaceMode(TomlReader& r, const toml::table& t, FilesystemPolicy* out) {
  std::string ws = "ephemeral";
  r.String(t, "filesystem", "workspace", &ws);
  if (r.failed()) return;
  static const std::string kNamed = "persistent:";
  if (ws.rfind(kNamed, 0) == 0) {
    const std::string name = ws.substr(kNamed.size());
    if (Status s = CheckWorkspaceName(name); !s) {
      r.Fail(t.get("workspace")->source(), "filesystem.workspace", s.error().message);
      return;
    }
    out->workspace = WorkspaceMode::kPersistent;
    out->workspace_name = name;
    return;
  }
  if (ws != "ephemeral" && ws != "persistent") {
    r.Fail(t.get("workspace")->source(), "filesystem.workspace",
           "\"" + ws + "\" is not one of \"ephemeral\", \"persistent\", \"persistent:NAME\"");
    return;
  }
  out->workspace = ws == "persistent" ? WorkspaceMode::kPersistent : WorkspaceMode::kEphemeral;
}

}  // namespace

void ReadFilesystem(TomlReader& r, const toml::table& root, FilesystemPolicy* out) {
  const toml::table* t = r.Table(root, "", "filesystem");
  if (!t) return;
  const std::string p = "filesystem";
  r.OnlyKeys(*t, p, {"template", "workspace", "workspace_dir", "workspace_busy", "mounts"});
  r.String(*t, p, "template", &out->template_name);
  ReadTemplate(r, *t, out);
  ReadWorkspaceMode(r, *t, out);
  std::string busy = "refuse";
  r.String(*t, p, "workspace_busy", &busy, {"refuse", "wait"});
  out->workspace_busy = busy == "wait" ? WorkspaceBusy::kWait : WorkspaceBusy::kRefuse;
  r.String(*t, p, "workspace_dir", &out->workspace_dir);
  if (r.failed()) return;
  const toml::node* dir = t->get("workspace_dir");
  if (dir && !out->workspace_name.empty()) {
    r.Fail(dir->source(), "filesystem.workspace_dir",
           "a named workspace (\"persistent:" + out->workspace_name +
               "\") lives in the server's state directory: give workspace_dir only with "
               "workspace = \"persistent\"");
    return;
  }
  if (out->workspace == WorkspaceMode::kPersistent && out->workspace_name.empty() &&
      out->workspace_dir.empty()) {
    r.Fail(t->source(), "filesystem.workspace_dir",
           "a persistent workspace needs workspace_dir (a host directory), or name one the "
           "tenant owns: workspace = \"persistent:NAME\"");
    return;
  }
  if (dir && out->workspace == WorkspaceMode::kEphemeral) {
    r.Fail(dir->source(), "filesystem.workspace_dir",
           "only a persistent workspace has a host directory (set workspace = \"persistent\")");
    return;
  }
  if (dir && out->workspace_dir.front() != '/') {
    r.Fail(dir->source(), "filesystem.workspace_dir",
           "\"" + out->workspace_dir + "\" is not an absolute path");
    return;
  }
  const toml::node* mounts = t->get("mounts");
  if (!mounts) return;
  if (!mounts->is_array()) {
    r.Fail(mounts->source(), "filesystem.mounts",
           "expected an array of tables ([[filesystem.mounts]]), got " +
               TomlReader::TypeName(*mounts));
    return;
  }
  size_t i = 0;
  std::set<std::string> targets;
  for (const toml::node& m : *mounts->as_array()) {
    std::string at = "filesystem.mounts[" + std::to_string(i++) + "]";
    MountPolicy mount;
    ReadMount(r, m, at, &mount);
    if (r.failed()) return;
    if (!targets.insert(mount.target).second) {
      r.Fail(m.source(), at + ".target", "\"" + mount.target + "\" is mounted twice");
      return;
    }
    out->mounts.push_back(std::move(mount));
  }
}

}  // namespace mcpcell::policies
