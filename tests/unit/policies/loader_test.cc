// The strict loader: good files load with defaults filled in; every kind of bad file is
// refused with file:line:column, the key path and what is wrong.
#include "policies/loader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "egress/allowlist.h"
#include "policies/package_upstreams.h"

namespace mcpcell::policies {
namespace {

std::string ErrorOf(const std::string& text) {
  auto p = ParsePolicy(text, "p.toml");
  return p ? "(loaded)" : p.error().message;
}

TEST(Loader, EmptyFileIsTheDefaults) {
  auto p = ParsePolicy("", "/x/mine.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "mine");
  EXPECT_EQ(p->limits.memory_bytes, 1ull << 30);
  EXPECT_EQ(p->time.exec_default, std::chrono::seconds(60));
  EXPECT_EQ(p->filesystem.workspace, WorkspaceMode::kEphemeral);
  EXPECT_FALSE(p->network.egress_allowed);
  EXPECT_TRUE(p->tools.enabled.empty());
}

TEST(Loader, ReadsEverySection) {
  char tmpl[] = "/tmp/policy-loader-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::filesystem::create_directories(dir + "/src");
  std::string text = R"(
name = "full"
description = "all keys"
[isolation]
backend = "namespaces"
seccomp = false
[limits]
memory = "512MiB"
pids = 100
cpus = 0.25
disk = "2GiB"
tmp = "32MiB"
open_files = 333
max_file_size = "10MB"
output_kept = "8KiB"
snapshot_storage = "5GiB"
[time]
exec_default = "30s"
exec_max = "2h"
session_idle = "10m"
session_max = "1d"
[filesystem]
template = "host"
workspace = "persistent"
workspace_dir = ")" + dir +
                     R"(/ws"
[[filesystem.mounts]]
source = ")" + dir + R"(/src"
target = "/workspace/src"
[[filesystem.mounts]]
source = ")" + dir + R"(/src"
target = "/out"
mode = "rw"
[network]
egress = "allowlist"
allow = ["pypi.org", "*.npmjs.org:443"]
[packages]
mode = "online"
registries = ["pypi"]
pypi_index = "http://127.0.0.1:8080/simple/"
allow = ["pypi:requests", "pypi:numpy>=2,<3"]
deny = ["pypi:evil*"]
allow_sdist = true
max_artifact_size = "64MiB"
[tools]
enabled = ["run_code", "session_info"]
)";
  auto p = ParsePolicy(text, "full.toml");
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "full");
  EXPECT_FALSE(p->isolation.seccomp);
  EXPECT_EQ(p->limits.memory_bytes, 512ull << 20);
  EXPECT_EQ(p->limits.pids, 100u);
  EXPECT_EQ(p->limits.cpu_millicores, 250u);
  EXPECT_EQ(p->limits.disk_bytes, 2ull << 30);
  EXPECT_EQ(p->limits.tmp_bytes, 32ull << 20);
  EXPECT_EQ(p->limits.open_files, 333u);
  EXPECT_EQ(p->limits.file_size_bytes, 10000000u);
  EXPECT_EQ(p->limits.output_keep_bytes, 8192u);
  EXPECT_EQ(p->limits.snapshot_storage_bytes, 5ull << 30);
  EXPECT_EQ(p->time.exec_max, std::chrono::seconds(7200));
  EXPECT_EQ(p->time.session_max, std::chrono::seconds(86400));
  EXPECT_EQ(p->filesystem.workspace, WorkspaceMode::kPersistent);
  EXPECT_EQ(p->filesystem.workspace_dir, dir + "/ws");
  ASSERT_EQ(p->filesystem.mounts.size(), 2u);
  EXPECT_FALSE(p->filesystem.mounts[0].writable);
  EXPECT_TRUE(p->filesystem.mounts[1].writable);
  EXPECT_EQ(p->filesystem.mounts[1].target, "/out");
  EXPECT_TRUE(p->network.egress_allowed);
  EXPECT_EQ(p->network.allow.size(), 2u);
  EXPECT_EQ(p->packages.deny[0], "pypi:evil*");
  EXPECT_EQ(p->packages.mode, PackagesMode::kOnline);
  EXPECT_EQ(p->packages.pypi_index, "http://127.0.0.1:8080/simple/");
  EXPECT_EQ(p->packages.npm_registry, "https://registry.npmjs.org/");  // the default
  EXPECT_TRUE(p->packages.allow_sdist);
  EXPECT_FALSE(p->packages.allow_install_scripts);
  EXPECT_EQ(p->packages.max_artifact_bytes, 64ull << 20);
  EXPECT_EQ(p->tools.enabled.size(), 2u);
}

struct BadCase {
  const char* text;
  const char* error;  // the whole message
};

class LoaderErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(LoaderErrors, NamesFileLineColumnAndKey) {
  EXPECT_EQ(ErrorOf(GetParam().text), GetParam().error);
}

INSTANTIATE_TEST_SUITE_P(
    All, LoaderErrors,
    ::testing::Values(
        BadCase{"[limits]\nmemory = \"lots\"\n",
                "p.toml:2:10: limits.memory: expected a size like \"512MiB\", got \"lots\""},
        BadCase{"[limits]\nmemory = 512\n",
                "p.toml:2:10: limits.memory: expected a size like \"512MiB\", got 512"},
        BadCase{"[limits]\nmemory = \"1MiB\"\n",
                "p.toml:2:10: limits.memory: must be between 16MiB and 1TiB, got \"1MiB\""},
        BadCase{"[limits]\nmemroy = \"1GiB\"\n",
                "p.toml:2:1: limits.memroy: unknown key (known here: memory, pids, cpus, disk, "
                "tmp, open_files, max_file_size, output_kept, snapshot_storage, archive_bytes, "
                "archive_ratio, archive_entries)"},
        BadCase{"colour = \"blue\"\n",
                "p.toml:1:1: colour: unknown key (known here: name, description, isolation, "
                "limits, time, filesystem, network, packages, tools, secrets, audit)"},
        BadCase{"[limits]\npids = \"many\"\n",
                "p.toml:2:8: limits.pids: expected an integer, got a string \"many\""},
        BadCase{"[limits]\npids = 2\n",
                "p.toml:2:8: limits.pids: must be between 8 and 4194304, got 2"},
        BadCase{"[limits]\ncpus = 0\n",
                "p.toml:2:8: limits.cpus: must be between 0.01 and 1024, got 0"},
        BadCase{"[limits]\ncpus = \"two\"\n",
                "p.toml:2:8: limits.cpus: expected a number of CPUs like 1 or 0.5, got a string"},
        BadCase{"limits = 3\n", "p.toml:1:10: limits: expected a table, got an integer"},
        BadCase{"[time]\nexec_max = \"10\"\n",
                "p.toml:2:12: time.exec_max: expected a duration like \"30s\", \"15m\" or "
                "\"2h\", got \"10\""},
        BadCase{"[time]\nexec_default = \"2h\"\nexec_max = \"1h\"\n",
                "p.toml:2:16: time.exec_default: is longer than time.exec_max (2h > 1h)"},
        BadCase{"[time]\nsession_idle = \"40d\"\n",
                "p.toml:2:16: time.session_idle: must be between 1s and 30d, got \"40d\""},
        BadCase{"[isolation]\nbackend = \"docker\"\n",
                "p.toml:2:11: isolation.backend: expected one of \"namespaces\", \"microvm\", "
                "got \"docker\""},
        BadCase{"[isolation]\nbackend = \"microvm\"\n",
                "p.toml:2:11: isolation.backend: \"microvm\" is reserved for a future backend; "
                "only \"namespaces\" exists today"},
        BadCase{"[isolation]\nseccomp = \"yes\"\n",
                "p.toml:2:11: isolation.seccomp: expected true or false, got a string"},
        BadCase{"[filesystem]\nworkspace = \"persistent\"\n",
                "p.toml:1:1: filesystem.workspace_dir: a persistent workspace needs "
                "workspace_dir (a host directory), or name one the tenant owns: workspace = "
                "\"persistent:NAME\""},
        BadCase{"[filesystem]\nworkspace_dir = \"/srv/ws\"\n",
                "p.toml:2:17: filesystem.workspace_dir: only a persistent workspace has a host "
                "directory (set workspace = \"persistent\")"},
        BadCase{"[filesystem]\nworkspace = \"persistent\"\nworkspace_dir = \"ws\"\n",
                "p.toml:3:17: filesystem.workspace_dir: \"ws\" is not an absolute path"},
        BadCase{"[filesystem]\ntemplate = \"al/pine\"\n",
                "p.toml:2:12: filesystem.template: template name \"al/pine\": only A-Z a-z 0-9 . _ "
                "- allowed"},
        BadCase{"[filesystem]\ntemplate = \"alpine@0\"\n",
                "p.toml:2:12: filesystem.template: template \"alpine@0\": the version after '@' "
                "must be 1, 2, 3..."},
        BadCase{"[[filesystem.mounts]]\nsource = \"/\"\ntarget = \"/host\"\n",
                "p.toml:2:10: filesystem.mounts[0].source: refusing to mount \"/\": it is the "
                "host's root filesystem"},
        BadCase{"[[filesystem.mounts]]\nsource = \"/etc\"\ntarget = \"/e\"\n",
                "p.toml:2:10: filesystem.mounts[0].source: refusing to mount \"/etc\": it is or "
                "is under /etc"},
        BadCase{"[[filesystem.mounts]]\nsource = \"/var/run/docker.sock\"\ntarget = \"/d\"\n",
                "p.toml:2:10: filesystem.mounts[0].source: refusing to mount "
                "\"/var/run/docker.sock\": it is a container runtime socket"},
        BadCase{"[[filesystem.mounts]]\nsource = \"/home\"\ntarget = \"/h\"\n",
                "p.toml:2:10: filesystem.mounts[0].source: refusing to mount \"/home\": it is "
                "/home, every user's home directory"},
        BadCase{"[[filesystem.mounts]]\nsource = \"/usr\"\ntarget = \"/proc/x\"\n",
                "p.toml:3:10: filesystem.mounts[0].target: \"/proc/x\" is under /proc"},
        BadCase{"[[filesystem.mounts]]\nsource = \"/usr\"\n",
                "p.toml:1:1: filesystem.mounts[0]: missing \"target\""},
        BadCase{"[[filesystem.mounts]]\nsource = \"/usr\"\ntarget = \"/u\"\nmode = \"wr\"\n",
                "p.toml:4:8: filesystem.mounts[0].mode: expected one of \"ro\", \"rw\", got "
                "\"wr\""},
        BadCase{"[[filesystem.mounts]]\nsource = \"/usr\"\ntarget = \"/u\"\nsuid = true\n",
                "p.toml:4:1: filesystem.mounts[0].suid: unknown key (known here: source, "
                "target, mode)"},
        BadCase{"[[filesystem.mounts]]\nsource = \"/usr\"\ntarget = \"/u\"\n"
                "[[filesystem.mounts]]\nsource = \"/usr\"\ntarget = \"/u\"\n",
                "p.toml:4:1: filesystem.mounts[1].target: \"/u\" is mounted twice"},
        BadCase{"[network]\negress = \"open\"\n",
                "p.toml:2:10: network.egress: expected one of \"deny\", \"allowlist\", got "
                "\"open\""},
        BadCase{"[network]\nallow = [\"pypi.org\"]\n",
                "p.toml:2:9: network.allow: hosts are listed but egress is \"deny\" (set egress "
                "= \"allowlist\")"},
        BadCase{"[network]\negress = \"allowlist\"\n",
                "p.toml:1:1: network.allow: egress = \"allowlist\" needs at least one host"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"pypi.org\", \"bad host\"]\n",
                "p.toml:3:22: network.allow[1]: \"bad host\": control character or space in host"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"pypi.org:99999\"]\n",
                "p.toml:3:10: network.allow[0]: \"pypi.org:99999\": port \"99999\" is not "
                "1..65535"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"a.*.org\"]\n",
                "p.toml:3:10: network.allow[0]: \"a.*.org\": '*' is allowed only as a whole "
                "first label (\"*.example.com\")"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"10.1.2.3/16\"]\n",
                "p.toml:3:10: network.allow[0]: \"10.1.2.3/16\": host bits set in 10.1.2.3/16 "
                "(did you mean 10.1.0.0/16?)"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"127.1\"]\n",
                "p.toml:3:10: network.allow[0]: \"127.1\": numeric host that is not a dotted-quad "
                "IPv4 address"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"a.org\"]\nmax_connections = 0\n",
                "p.toml:4:19: network.max_connections: must be between 1 and 1024, got 0"},
        BadCase{"[network]\negress = \"deny\"\nproxy = \"x\"\n",
                "p.toml:3:1: network.proxy: unknown key (known here: egress, allow, "
                "max_connections, idle_connection_timeout)"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"a.org\", \"a.org\"]\n",
                "p.toml:3:19: network.allow[1]: \"a.org\" is listed twice"},
        BadCase{"[packages]\nregistries = [\"maven\"]\n",
                "p.toml:2:15: packages.registries[0]: unknown registry \"maven\" (known: pypi, "
                "npm)"},
        BadCase{"[packages]\nregistries = [\"crates\"]\n",
                "p.toml:2:15: packages.registries[0]: registry \"crates\" is not supported yet "
                "(the package service serves pypi and npm)"},
        BadCase{"[packages]\nregistries = [\"pypi\"]\nallow = [\"npm:left-pad\"]\n",
                "p.toml:1:1: packages: rule \"npm:left-pad\" names registry \"npm\", which "
                "packages.registries does not list"},
        BadCase{"[packages]\nregistries = [\"pypi\"]\ndeny = [\"requests\"]\n",
                "p.toml:3:9: packages.deny[0]: \"requests\" is not a rule \"<registry>:<name "
                "pattern>[<constraints>]\": no \"<registry>:\""},
        BadCase{"[packages]\nregistries = [\"pypi\"]\nallow = [\"pypi:numpy>=two\"]\n",
                "p.toml:3:10: packages.allow[0]: \"pypi:numpy>=two\" is not a rule "
                "\"<registry>:<name pattern>[<constraints>]\": \"two\" is not a PEP 440 "
                "version: it must start with a number"},
        BadCase{"[packages]\nmode = \"on\"\n",
                "p.toml:2:8: packages.mode: expected one of \"disabled\", \"online\", "
                "\"offline\", got \"on\""},
        BadCase{"[packages]\nmode = \"online\"\n",
                "p.toml:1:1: packages.registries: mode = \"online\" needs at least one registry "
                "(or mode = \"disabled\")"},
        BadCase{"[packages]\nmode = \"offline\"\nregistries = [\"pypi\"]\n",
                "p.toml:1:1: packages.wheelhouse: mode = \"offline\" with registry \"pypi\" "
                "needs a wheelhouse directory"},
        BadCase{"[packages]\nmode = \"offline\"\nregistries = [\"npm\"]\n",
                "p.toml:1:1: packages.npm_offline_dir: mode = \"offline\" with registry \"npm\" "
                "needs npm_offline_dir (a directory of .tgz files)"},
        BadCase{"[packages]\nwheelhouse = \"wheels\"\n",
                "p.toml:2:14: packages.wheelhouse: \"wheels\" must be an absolute path"},
        BadCase{"[packages]\npypi_index = \"http://mirror.example/simple/\"\n",
                "p.toml:2:14: packages.pypi_index: \"http://mirror.example/simple/\": plain "
                "http:// is only allowed to a loopback address; use https://"},
        BadCase{"[packages]\nnpm_registry = \"https://user:pw@registry.example/\"\n",
                "p.toml:2:16: packages.npm_registry: \"https://user:pw@registry.example/\": "
                "credentials in the URL are not supported"},
        BadCase{"[packages]\npypi_index = \"https://pypi.org/simple\"\n",
                "p.toml:2:14: packages.pypi_index: \"https://pypi.org/simple\" must end with "
                "'/'"},
        BadCase{"[packages]\npypi_index = \"ftp://pypi.org/simple/\"\n",
                "p.toml:2:14: packages.pypi_index: \"ftp://pypi.org/simple/\" must start with "
                "https:// (http:// only for a loopback address)"},
        BadCase{"[packages]\nmax_artifact_size = \"10GiB\"\n",
                "p.toml:2:21: packages.max_artifact_size: must be between 1MiB and 4GiB, got "
                "\"10GiB\""},
        BadCase{"[packages]\nallow_scripts = true\n",
                "p.toml:2:1: packages.allow_scripts: unknown key (known here: mode, registries, "
                "pypi_index, npm_registry, wheelhouse, npm_offline_dir, allow, deny, "
                "allow_sdist, allow_install_scripts, max_artifact_size, "
                "allow_direct_registry_access)"},
        BadCase{"[tools]\nenabled = [\"run_code\", \"rm_rf\"]\n",
                "p.toml:2:24: tools.enabled[1]: unknown tool \"rm_rf\" (known: run_code, "
                "run_command, python, process, read_file, write_file, edit_file, list_files, "
                "session_info, pip_install, "
                "npm_install, snapshot_create, snapshot_list, snapshot_restore, snapshot_delete, "
                "upload_archive, download_archive)"},
        BadCase{"[tools]\ntoolset = \"medium\"\n",
                "p.toml:2:11: tools.toolset: expected one of \"core\", \"full\", got \"medium\""},
        BadCase{"[tools]\nenabled = [\"run_code\", \"upload_archive\"]\n",
                "p.toml:2:11: tools.enabled: \"upload_archive\" is not in tools.toolset \"core\" "
                "(set toolset = \"full\" to offer it)"},
        BadCase{"[limits]\narchive_ratio = 1\n",
                "p.toml:2:17: limits.archive_ratio: must be between 2 and 100000, got 1"},
        BadCase{"[limits]\narchive_bytes = \"1KiB\"\n",
                "p.toml:2:17: limits.archive_bytes: must be between 4KiB and 4TiB, got \"1KiB\""},
        BadCase{"[tools]\nenabled = []\n",
                "p.toml:2:11: tools.enabled: is empty: a profile with no tools is useless "
                "(omit the key to enable every tool)"},
        BadCase{"[tools]\nenabled = \"run_code\"\n",
                "p.toml:2:11: tools.enabled: expected an array of strings, got a string"},
        BadCase{"[tools]\nenabled = [1]\n",
                "p.toml:2:12: tools.enabled[0]: expected a string, got an integer"},
        BadCase{"name = \"Bad Name\"\n",
                "p.toml:1:8: name: \"Bad Name\" must be 1 to 64 of [a-z0-9_-]"},
        BadCase{"[limits\nmemory = 1\n",
                "p.toml:1:8: Error while parsing table header: expected ']', saw '\\n'"}));

TEST(Loader, ToolsetDefaultsToCoreAndFullOffersArchivesAndSnapshots) {
  auto core = ParsePolicy("name = \"c\"\n", "c.toml");
  ASSERT_TRUE(core) << core.error().message;
  EXPECT_EQ(core->tools.toolset, "core");
  const auto& core_tools = ToolsetTools("core");
  EXPECT_EQ(std::count(core_tools.begin(), core_tools.end(), "python"), 1);
  EXPECT_EQ(std::count(core_tools.begin(), core_tools.end(), "upload_archive"), 0);
  EXPECT_EQ(std::count(core_tools.begin(), core_tools.end(), "snapshot_create"), 0);
  auto full = ParsePolicy(
      "[tools]\ntoolset = \"full\"\nenabled = [\"run_code\", \"upload_archive\"]\n"
      "[limits]\narchive_bytes = \"64MiB\"\narchive_ratio = 50\narchive_entries = 10\n",
      "f.toml");
  ASSERT_TRUE(full) << full.error().message;
  EXPECT_EQ(full->tools.toolset, "full");
  EXPECT_EQ(full->tools.enabled, (std::vector<std::string>{"run_code", "upload_archive"}));
  EXPECT_EQ(full->limits.archive_bytes, 64ull << 20);
  EXPECT_EQ(full->limits.archive_ratio, 50u);
  EXPECT_EQ(full->limits.archive_entries, 10u);
  for (const std::string& name : KnownToolNames()) {
    const auto& all = ToolsetTools("full");
    EXPECT_EQ(std::count(all.begin(), all.end(), name), 1) << name;
  }
}

TEST(Loader, MissingFileNamesIt) {
  auto p = LoadPolicyFile("/nonexistent/x.toml");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().message, "open(\"/nonexistent/x.toml\"): ENOENT (No such file or directory)");
}

TEST(Loader, StateDirIsRefusedAsAMountSource) {
  char tmpl[] = "/tmp/policy-state-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  std::string state = tmpl;
  LoadOptions options{state};
  auto p = ParsePolicy("[[filesystem.mounts]]\nsource = \"" + state + "\"\ntarget = \"/s\"\n",
                       "p.toml", options);
  std::filesystem::remove_all(state);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("p.toml:2:10: filesystem.mounts[0].source: refusing to mount"),
            std::string::npos)
      << p.error().message;
  EXPECT_NE(p.error().message.find("server's state directory"), std::string::npos);
}

TEST(Loader, ResolvesNamesAndFiles) {
  for (std::string name : {"default", "offline-strict", "dev"}) {
    auto p = ResolvePolicy(name);
    ASSERT_TRUE(p) << name << ": " << p.error().message;
    EXPECT_EQ(p->name, name);
    EXPECT_EQ(p->source, "<builtin:" + name + ">");
  }
  auto missing = ResolvePolicy("nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message,
            "no shipped policy named \"nope\" (shipped: default, dev, offline-strict; or give a "
            "path to a .toml file)");
  auto file = ResolvePolicy("./nope.toml");
  ASSERT_FALSE(file);
  EXPECT_NE(file.error().message.find("open(\"./nope.toml\")"), std::string::npos);
}

// network.allow is read by the egress proxy's own parser: every form it enforces loads.
TEST(Loader, NetworkAllowTakesEveryFormTheProxyEnforces) {
  auto p = ParsePolicy(R"([network]
egress = "allowlist"
allow = ["PyPI.org", "*.wild.test:8443", "203.0.113.7", "[2001:db8::1]:443", "10.1.0.0/16:5432",
         "fd00::/8"]
max_connections = 4
)",
                       "net.toml");
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_TRUE(p->network.egress_allowed);
  EXPECT_EQ(p->network.allow.size(), 6u);
  EXPECT_EQ(p->network.max_connections, 4u);
  auto defaults = ParsePolicy("[network]\negress = \"deny\"\n", "deny.toml");
  ASSERT_TRUE(defaults) << defaults.error().message;
  EXPECT_EQ(defaults->network.max_connections, 32u);
}

TEST(Loader, ShippedProfilesSayWhatTheyPromise) {
  auto def = ResolvePolicy("default");
  auto strict = ResolvePolicy("offline-strict");
  auto dev = ResolvePolicy("dev");
  ASSERT_TRUE(def && strict && dev);
  EXPECT_FALSE(def->network.egress_allowed);
  EXPECT_EQ(def->filesystem.workspace, WorkspaceMode::kEphemeral);
  EXPECT_FALSE(strict->network.egress_allowed);
  EXPECT_LT(strict->limits.memory_bytes, def->limits.memory_bytes);
  EXPECT_LT(strict->limits.pids, def->limits.pids);
  EXPECT_FALSE(strict->tools.enabled.empty());
  EXPECT_LT(strict->tools.enabled.size(), KnownToolNames().size());
  EXPECT_TRUE(dev->network.egress_allowed);
  EXPECT_FALSE(dev->packages.registries.empty());
}

// A policy without a `name` key is named after its file, made into a valid name: the user
// never wrote a name, so an odd file name must not fail the load.
TEST(Loader, NameIsMadeFromTheFileNameWhenTheKeyIsAbsent) {
  struct Row {
    std::string source;
    std::string name;
  };
  for (const Row& row : std::initializer_list<Row>{
           {"My.Policy.toml", "my-policy"},
           {"/etc/mcpcell/My.Policy.toml", "my-policy"},
           {"team_A  v2.toml", "team_a-v2"},
           {"--x--.toml", "x"},
           {"\xc3\x84\xc3\x96-dev.toml", "dev"},  // "ÄÖ-dev.toml"
           {"./policy.conf", "policy-conf"},
           {std::string(100, 'A') + ".toml", std::string(64, 'a')},
           // Cut at 64, then the '-' left at the end goes too.
           {std::string(63, 'a') + ".b.toml", std::string(63, 'a')},
       }) {
    auto p = ParsePolicy("", row.source);
    ASSERT_TRUE(p) << row.source << ": " << p.error().message;
    EXPECT_EQ(p->name, row.name) << row.source;
  }
  // A name that is written wins over the file's.
  auto named = ParsePolicy("name = \"team\"\n", "My.Policy.toml");
  ASSERT_TRUE(named) << named.error().message;
  EXPECT_EQ(named->name, "team");
}

TEST(Loader, PolicyFileWithADottedNameLoads) {
  char tmpl[] = "/tmp/policy-name-XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string path = std::string(tmpl) + "/My.Policy.toml";
  std::ofstream(path) << "[limits]\nmemory = \"2GiB\"\n";
  auto p = LoadPolicyFile(path);
  std::filesystem::remove_all(tmpl);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->name, "my-policy");
  EXPECT_EQ(p->source, path);
}

// Nothing valid left of the file name: the error says where the name came from and how to
// set one, without a line:column of a key that is not in the file.
TEST(Loader, NoNameKeyAndNoneFromTheFileNameSaysHowToSetOne) {
  for (const std::string source : {"....toml", "/x/\xc3\x84\xc3\x96.toml"}) {
    auto p = ParsePolicy("[limits]\nmemory = \"2GiB\"\n", source);
    ASSERT_FALSE(p) << source;
    const std::string file = source.substr(source.rfind('/') + 1);
    EXPECT_EQ(p.error().message, source +
                                     ": no name key, and none can be made from the file name \"" +
                                     file + "\": add name = \"...\" (1 to 64 of [a-z0-9_-])");
  }
}

// A network.allow entry that reaches a host the package service fetches from would let code
// in the cell install past every package rule (pip install --index-url https://pypi.org/...).
INSTANTIATE_TEST_SUITE_P(
    DirectRegistryAccess, LoaderErrors,
    ::testing::Values(
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"crates.io:443\", \"pypi.org:443\"]\n"
                "[packages]\nmode = \"online\"\nregistries = [\"pypi\"]\nallow = [\"pypi:*\"]\n",
                "p.toml:3:27: network.allow[1]: \"pypi.org:443\" reaches pypi.org, an upstream of "
                "the package service (packages.pypi_index): code in the cell could install past "
                "every package rule; remove it, or set packages.allow_direct_registry_access = "
                "true to give up the package rules for direct installs"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"*.pythonhosted.org:443\"]\n"
                "[packages]\nmode = \"online\"\nregistries = [\"pypi\"]\n",
                "p.toml:3:10: network.allow[0]: \"*.pythonhosted.org:443\" reaches "
                "files.pythonhosted.org, an upstream of the package service (PyPI's file host, "
                "for packages.pypi_index): code in the cell could install past every package rule; "
                "remove it, or set packages.allow_direct_registry_access = true to give up the "
                "package rules for direct installs"},
        // No port: 80 and 443.
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"registry.npmjs.org\"]\n"
                "[packages]\nmode = \"online\"\nregistries = [\"npm\"]\n",
                "p.toml:3:10: network.allow[0]: \"registry.npmjs.org\" reaches registry.npmjs.org, "
                "an upstream of the package service (packages.npm_registry): code in the cell "
                "could install past every package rule; remove it, or set "
                "packages.allow_direct_registry_access = true to give up the package rules for "
                "direct installs"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"*.npmjs.org:443\"]\n"
                "[packages]\nmode = \"online\"\nregistries = [\"npm\"]\n",
                "p.toml:3:10: network.allow[0]: \"*.npmjs.org:443\" reaches registry.npmjs.org, "
                "an upstream of the package service (packages.npm_registry): code in the cell "
                "could install past every package rule; remove it, or set "
                "packages.allow_direct_registry_access = true to give up the package rules for "
                "direct installs"},
        // A mirror on its own port; an address upstream matched by a CIDR entry.
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"mirror.example:8443\"]\n"
                "[packages]\nmode = \"online\"\nregistries = [\"pypi\"]\n"
                "pypi_index = \"https://Mirror.Example:8443/simple/\"\n",
                "p.toml:3:10: network.allow[0]: \"mirror.example:8443\" reaches mirror.example, "
                "an upstream of the package service (packages.pypi_index): code in the cell could "
                "install past every package rule; remove it, or set "
                "packages.allow_direct_registry_access = true to give up the package rules for "
                "direct installs"},
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"127.0.0.0/8:8080\"]\n"
                "[packages]\nmode = \"online\"\nregistries = [\"npm\"]\n"
                "npm_registry = \"http://127.0.0.1:8080/\"\n",
                "p.toml:3:10: network.allow[0]: \"127.0.0.0/8:8080\" reaches 127.0.0.1, an "
                "upstream of the package service (packages.npm_registry): code in the cell could "
                "install past every package rule; remove it, or set "
                "packages.allow_direct_registry_access = true to give up the package rules for "
                "direct installs"},
        // Offline mode serves from a directory, but pip pointed at pypi.org would not be.
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"pypi.org\"]\n"
                "[packages]\nmode = \"offline\"\nregistries = [\"pypi\"]\n"
                "wheelhouse = \"/srv/wheels\"\n",
                "p.toml:3:10: network.allow[0]: \"pypi.org\" reaches pypi.org, an upstream of the "
                "package service (packages.pypi_index): code in the cell could install past every "
                "package rule; remove it, or set packages.allow_direct_registry_access = true to "
                "give up the package rules for direct installs"},
        // "Everything on 443" is not in the grammar at all.
        BadCase{"[network]\negress = \"allowlist\"\nallow = [\"*:443\"]\n"
                "[packages]\nmode = \"online\"\nregistries = [\"pypi\"]\n",
                "p.toml:3:10: network.allow[0]: \"*:443\": '*' is allowed only as a whole first "
                "label (\"*.example.com\")"},
        BadCase{"[packages]\nallow_direct_registry_access = \"yes\"\n",
                "p.toml:2:32: packages.allow_direct_registry_access: expected true or false, got "
                "a string"}));

TEST(Loader, RegistryOnTheAllowlistLoadsWithTheOptInOrWithoutPackages) {
  const std::string network =
      "[network]\negress = \"allowlist\"\nallow = [\"pypi.org:443\", "
      "\"files.pythonhosted.org:443\", \"registry.npmjs.org:443\"]\n";
  auto opted_in =
      ParsePolicy(network +
                      "[packages]\nmode = \"online\"\nregistries = [\"pypi\", \"npm\"]\n"
                      "allow_direct_registry_access = true\n",
                  "p.toml");
  ASSERT_TRUE(opted_in) << opted_in.error().message;
  EXPECT_EQ(opted_in->network.allow.size(), 3u);
  EXPECT_TRUE(opted_in->packages.allow_direct_registry_access);
  auto disabled =
      ParsePolicy(network + "[packages]\nmode = \"disabled\"\nregistries = [\"pypi\"]\n", "p.toml");
  ASSERT_TRUE(disabled) << disabled.error().message;
  EXPECT_FALSE(disabled->packages.allow_direct_registry_access);  // the default
  auto no_section = ParsePolicy(network, "p.toml");
  ASSERT_TRUE(no_section) << no_section.error().message;
  // Only the registries the service serves: an npm-only service has no PyPI upstream.
  auto npm_only = ParsePolicy(
      "[network]\negress = \"allowlist\"\nallow = [\"pypi.org:443\"]\n"
      "[packages]\nmode = \"online\"\nregistries = [\"npm\"]\n",
      "p.toml");
  ASSERT_TRUE(npm_only) << npm_only.error().message;
  // Matching is the proxy's: a mirror on 8443 is not reached by an entry for 80 and 443, and
  // "*.pypi.org" is pypi.org's subdomains, not pypi.org.
  auto other_port = ParsePolicy(
      "[network]\negress = \"allowlist\"\nallow = [\"mirror.example\", \"*.pypi.org:443\"]\n"
      "[packages]\nmode = \"online\"\nregistries = [\"pypi\"]\n"
      "pypi_index = \"https://mirror.example:8443/simple/\"\n",
      "p.toml");
  ASSERT_TRUE(other_port) << other_port.error().message;
}

// The shipped dev profile lets pip and npm through the package service only: none of its
// allowlist entries reaches a package upstream.
TEST(Loader, DevProfileReachesNoPackageUpstream) {
  auto dev = ResolvePolicy("dev");
  ASSERT_TRUE(dev) << dev.error().message;
  EXPECT_NE(dev->packages.mode, PackagesMode::kDisabled);
  auto allowlist = egress::Allowlist::Parse(dev->network.allow);
  ASSERT_TRUE(allowlist) << allowlist.error().message;
  for (const char* host : {"pypi.org", "files.pythonhosted.org", "registry.npmjs.org"}) {
    const egress::AllowEntry* e = allowlist->Match(host, 443);
    EXPECT_EQ(e, nullptr) << host << " is reached by \"" << (e ? e->text : "") << "\"";
  }
  EXPECT_NE(allowlist->Match("crates.io", 443), nullptr);  // the rest stays
  EXPECT_NE(allowlist->Match("deb.debian.org", 80), nullptr);
  // The same through the loader's own list of upstreams, which names those three.
  EXPECT_FALSE(dev->packages.allow_direct_registry_access);
  const std::vector<PackageUpstream> upstreams = PackageUpstreams(dev->packages);
  std::vector<std::string> hosts;
  for (const PackageUpstream& up : upstreams) {
    hosts.push_back(up.host.Display() + ":" + std::to_string(up.port));
    EXPECT_EQ(allowlist->Match(up.host, up.port), nullptr) << up.host.Display();
  }
  EXPECT_EQ(hosts, (std::vector<std::string>{"pypi.org:443", "files.pythonhosted.org:443",
                                             "registry.npmjs.org:443"}));
  EXPECT_FALSE(FindDirectRegistryAccess(*dev));
}

}  // namespace
}  // namespace mcpcell::policies
