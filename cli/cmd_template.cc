// `mcpcell template build|list|show|delete`: the operator's side of the template store in
// <state_dir>/templates/built (sandbox/template_store.h). A policy names a template with
// `filesystem.template = "NAME"` or "NAME@VERSION" (docs/templates.md).
//
//   mcpcell template build NAME --from DIR|ROOTFS.tar[.gz|.zst] [--pip-wheels DIR
//       --pip-requirements FILE] [--npm-packages DIR]
//   mcpcell template build NAME --debian-suite bookworm      (needs mmdebstrap)
//
// Building runs on the host as the server's user (root for a root server); baking runs the
// installers inside a cell over the new rootfs. Exit status: 0 done, 2 anything refused or
// failed (the message names the cause).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/command.h"
#include "sandbox/state_dir.h"
#include "sandbox/template_store.h"

namespace mcpcell::cli {
namespace {

constexpr int kFailed = 2;

struct TemplateOptions {
  std::string state_dir = sandbox::DefaultStateDir();
  std::string ref;  // NAME, NAME@VERSION
  std::string from;
  std::string debian_suite;
  sandbox::BakeRequest bake;
};

int Fail(const std::string& what) {
  std::fprintf(stderr, "mcpcell template: %s\n", what.c_str());
  return kFailed;
}

nlohmann::json Summary(const sandbox::TemplateInfo& t) {
  return {{"name", t.name},       {"version", t.version}, {"ref", t.ref()},
          {"created", t.created}, {"source", t.source},   {"digest", t.digest},
          {"files", t.files},     {"bytes", t.bytes},     {"packages", t.packages},
          {"rootfs", t.rootfs()}};
}

// The staging rootfs filled from --from or --debian-suite; the source as template.json says it.
Result<std::string> Fill(const TemplateOptions& o, const sandbox::TemplateBuild& build) {
  if (o.from.empty() == o.debian_suite.empty())
    return Error::Msg("give exactly one of --from and --debian-suite");
  if (!o.debian_suite.empty()) {
    if (Status s = sandbox::DebootstrapTemplateRootfs(o.debian_suite, build.rootfs(), build.dir());
        !s)
      return s.error();
    return "debian:" + o.debian_suite;
  }
  if (Status s = sandbox::FillTemplateRootfs(o.from, build.rootfs()); !s) return s.error();
  return "from:" + o.from;
}

int RunBuild(TemplateOptions o) {
  if (Status s = sandbox::CheckTemplateName(o.ref); !s) return Fail(s.error().message);
  if (Status s = sandbox::EnsureStateDir(o.state_dir); !s) return Fail(s.error().message);
  sandbox::TemplateStore store(o.state_dir);
  auto build = store.Begin(o.ref);
  if (!build) return Fail(build.error().message);
  auto source = Fill(o, *build);
  if (!source) return Fail(source.error().message);
  o.bake.state_dir = o.state_dir;
  if (!o.bake.pip_wheels.empty() || !o.bake.npm_packages.empty()) {
    if (Status s = sandbox::CheckCellsCanReachStateDir(o.state_dir); !s)
      return Fail(s.error().message);
  }
  auto packages = sandbox::BakePackages(build->rootfs(), o.bake);
  if (!packages) return Fail("baking packages: " + packages.error().message);
  auto info = store.Commit(*build, *source, *packages);
  if (!info) return Fail(info.error().message);
  std::printf("%s\n", Summary(*info).dump(2).c_str());
  return 0;
}

int RunList(const TemplateOptions& o) {
  auto list = sandbox::TemplateStore(o.state_dir).List();
  if (!list) return Fail(list.error().message);
  std::printf("%-32s  %-27s  %8s  %-16s  %s\n", "TEMPLATE", "CREATED", "FILES", "DIGEST", "SOURCE");
  for (const auto& t : *list)
    std::printf("%-32s  %-27s  %8llu  %-16.16s  %s\n", t.ref().c_str(), t.created.c_str(),
                static_cast<unsigned long long>(t.files), t.digest.c_str(), t.source.c_str());
  return 0;
}

int RunShow(const TemplateOptions& o) {
  auto t = sandbox::TemplateStore(o.state_dir).Find(o.ref);
  if (!t) return Fail(t.error().message);
  std::printf("%s\n", Summary(*t).dump(2).c_str());
  return 0;
}

int RunDelete(const TemplateOptions& o) {
  if (Status s = sandbox::TemplateStore(o.state_dir).Delete(o.ref); !s)
    return Fail(s.error().message);
  std::printf("deleted %s\n", o.ref.c_str());
  return 0;
}

CLI::App* Add(CLI::App* parent, const char* name, const char* help, TemplateOptions* o) {
  CLI::App* sub = parent->add_subcommand(name, help);
  sub->add_option("--state-dir", o->state_dir, "The server's state dir");
  return sub;
}

void AddBuild(CLI::App* tmpl, const std::shared_ptr<TemplateOptions>& o, int* exit_code) {
  CLI::App* b = Add(tmpl, "build", "Build the next version of a template", o.get());
  b->add_option("name", o->ref, "Template name: 1-64 of A-Z a-z 0-9 . _ -")->required();
  b->add_option("--from", o->from, "A rootfs directory, or a .tar, .tar.gz or .tar.zst of one");
  b->add_option("--debian-suite", o->debian_suite, "Build a Debian rootfs with mmdebstrap");
  b->add_option("--pip-wheels", o->bake.pip_wheels, "Bake in wheels from this directory")
      ->check(CLI::ExistingDirectory);
  b->add_option("--pip-requirements", o->bake.pip_requirements,
                "The requirements file pip installs from --pip-wheels")
      ->check(CLI::ExistingFile);
  b->add_option("--npm-packages", o->bake.npm_packages,
                "Bake in every *.tgz of this directory (npm install --global --offline)")
      ->check(CLI::ExistingDirectory);
  b->add_option("--init", o->bake.init_path,
                "mcpcell-init for the bake cell (default: next to mcpcell)");
  b->callback([o, exit_code] { *exit_code = RunBuild(*o); });
}

const bool kRegistered = RegisterCommand("template", [](CLI::App& parent, int* exit_code) {
  auto o = std::make_shared<TemplateOptions>();
  CLI::App* tmpl =
      parent.add_subcommand("template", "Build, list, show and delete versioned cell templates");
  tmpl->require_subcommand(1);
  tmpl->add_option("--state-dir", o->state_dir, "The server's state dir")->capture_default_str();
  AddBuild(tmpl, o, exit_code);
  Add(tmpl, "list", "Every version of every template", o.get())->callback([o, exit_code] {
    *exit_code = RunList(*o);
  });
  CLI::App* show = Add(tmpl, "show", "One template's record (NAME: its latest)", o.get());
  show->add_option("template", o->ref, "NAME or NAME@VERSION")->required();
  show->callback([o, exit_code] { *exit_code = RunShow(*o); });
  CLI::App* del = Add(tmpl, "delete", "Delete one version (NAME@VERSION)", o.get());
  del->add_option("template", o->ref, "NAME@VERSION")->required();
  del->callback([o, exit_code] { *exit_code = RunDelete(*o); });
});

}  // namespace
}  // namespace mcpcell::cli
