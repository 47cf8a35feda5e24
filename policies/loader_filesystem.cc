// The filesystem section of a policy file: template, workspace, and the mounts, each
// checked by policies/mount_check.h (see loader_sections.h).
#include <set>
#include <string>

#include "policies/loader_sections.h"
#include "policies/mount_check.h"
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

}  // namespace

void ReadFilesystem(TomlReader& r, const toml::table& root, FilesystemPolicy* out) {
  const toml::table* t = r.Table(root, "", "filesystem");
  if (!t) return;
  const std::string p = "filesystem";
  r.OnlyKeys(*t, p, {"template", "workspace", "workspace_dir", "mounts"});
  r.String(*t, p, "template", &out->template_name);
  ReadTemplate(r, *t, out);
  std::string ws = "ephemeral";
  r.String(*t, p, "workspace", &ws, {"ephemeral", "persistent"});
  out->workspace = ws == "persistent" ? WorkspaceMode::kPersistent : WorkspaceMode::kEphemeral;
  r.String(*t, p, "workspace_dir", &out->workspace_dir);
  if (r.failed()) return;
  const toml::node* dir = t->get("workspace_dir");
  if (out->workspace == WorkspaceMode::kPersistent && out->workspace_dir.empty()) {
    r.Fail(t->source(), "filesystem.workspace_dir",
           "a persistent workspace needs workspace_dir (a host directory)");
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
