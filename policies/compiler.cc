// The policy compiler (see compiler.h).
#include "policies/compiler.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <sstream>

#include "base/units.h"
#include "policies/mount_check.h"
#include "policies/package_env.h"
#include "policies/workspace_name.h"
#include "sandbox/template_store.h"

namespace mcpcell::policies {

namespace {

Status MakeDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    std::string part = path.substr(0, i);
    if (::mkdir(part.c_str(), 0755) != 0 && errno != EEXIST) {
      return Error::Sys("mkdir(\"" + part + "\")");
    }
  }
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return Error::Sys("stat(\"" + path + "\")");
  if (!S_ISDIR(st.st_mode)) return Error::Msg("\"" + path + "\" is not a directory");
  return Ok();
}

// A root server maps each cell's sandbox user to a host uid of the cell's own id range,
// unknown before the cell exists, so a directory the cells write to must be writable by
// any uid (files written there are then owned by that cell's host uid, see
// docs/policies.md). An unprivileged server maps the sandbox user to itself: nothing to do.
Status OpenToCells(const std::string& dir) {
  if (::geteuid() != 0) return Ok();
  if (::chmod(dir.c_str(), 0777) != 0) return Error::Sys("chmod(\"" + dir + "\", 0777)");
  return Ok();
}

// Flags are typed by people: a relative path is relative to the current directory.
std::string Absolute(const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return path;
  return std::string(cwd) + "/" + path;
}

// A TOML basic string: quotes, backslashes and control characters escaped (a description
// may span lines), so that the described profile loads again.
std::string Quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (u < 0x20 || u == 0x7f) {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\u%04X", u);
      out += escaped;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string List(const std::vector<std::string>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i ? ", " : "") + Quoted(v[i]);
  return out + "]";
}

}  // namespace

Result<MountPolicy> ParseMountFlag(const std::string& flag) {
  MountPolicy m;
  size_t first = flag.find(':');
  if (first == std::string::npos) return Error::Msg("expected SRC:DST[:ro|rw]");
  m.source = Absolute(flag.substr(0, first));
  std::string rest = flag.substr(first + 1);
  size_t second = rest.find(':');
  m.target = rest.substr(0, second);
  if (second != std::string::npos) {
    std::string mode = rest.substr(second + 1);
    if (mode != "ro" && mode != "rw") {
      return Error::Msg("mode must be \"ro\" or \"rw\", got \"" + mode + "\"");
    }
    m.writable = mode == "rw";
  }
  if (m.source.empty() || m.target.empty()) return Error::Msg("expected SRC:DST[:ro|rw]");
  return m;
}

namespace {

// After overrides: a pause that is not shorter than the idle timeout is an error when the
// pause was asked for on the command line, else off (an --idle-timeout shorter than the
// policy's pause means idle expiry comes first).
Status CheckPauseIdle(TimePolicy& t, bool pause_from_flag) {
  if (t.session_pause_idle.count() == 0 || t.session_pause_idle < t.session_idle) return Ok();
  if (!pause_from_flag) {
    t.session_pause_idle = {};
    return Ok();
  }
  return Error::Msg("--pause-idle-timeout (" + FormatDuration(t.session_pause_idle) +
                    ") must be shorter than the idle timeout (" + FormatDuration(t.session_idle) +
                    ")");
}

}  // namespace

Result<Policy> ApplyOverrides(Policy p, const PolicyOverrides& flags,
                              const std::string& state_dir) {
  PolicyOverrides o = flags;
  o.output_dir = Absolute(o.output_dir);
  o.workspace_dir = Absolute(o.workspace_dir);
  if (o.memory_bytes) p.limits.memory_bytes = *o.memory_bytes;
  if (o.pids) p.limits.pids = *o.pids;
  if (o.cpu_millicores) p.limits.cpu_millicores = *o.cpu_millicores;
  if (o.disk_bytes) p.limits.disk_bytes = *o.disk_bytes;
  if (o.exec_default) p.time.exec_default = *o.exec_default;
  if (o.exec_max) p.time.exec_max = *o.exec_max;
  if (o.session_idle) p.time.session_idle = *o.session_idle;
  if (o.session_max) p.time.session_max = *o.session_max;
  if (o.session_pause_idle) p.time.session_pause_idle = *o.session_pause_idle;
  if (auto s = CheckPauseIdle(p.time, o.session_pause_idle.has_value()); !s) return s.error();
  if (o.output_keep_bytes) p.limits.output_keep_bytes = *o.output_keep_bytes;
  if (o.seccomp) p.isolation.seccomp = *o.seccomp;
  if (p.time.exec_default > p.time.exec_max) {
    return Error::Msg("the default exec timeout (" + FormatDuration(p.time.exec_default) +
                      ") is longer than the maximum (" + FormatDuration(p.time.exec_max) + ")");
  }
  std::vector<MountPolicy> added;
  for (const std::string& flag : o.mounts) {
    auto m = ParseMountFlag(flag);
    if (!m) return m.error().Wrap("--mount " + flag);
    added.push_back(*m);
  }
  if (!o.output_dir.empty()) {
    if (o.output_dir[0] != '/') return Error::Msg("--output " + o.output_dir + ": not absolute");
    if (auto s = MakeDirs(o.output_dir); !s) return s.error().Wrap("--output " + o.output_dir);
    if (auto s = OpenToCells(o.output_dir); !s) return s.error().Wrap("--output " + o.output_dir);
    added.push_back(MountPolicy{o.output_dir, kOutputCellPath, true});
  }
  for (const MountPolicy& m : added) {
    std::string what = m.target == kOutputCellPath && m.source == o.output_dir
                           ? "--output " + m.source
                           : "--mount " + m.source + ":" + m.target;
    if (auto s = CheckMountSource(m.source, state_dir); !s) return s.error().Wrap(what);
    if (auto s = CheckMountTarget(m.target); !s) return s.error().Wrap(what);
    for (const MountPolicy& existing : p.filesystem.mounts) {
      if (existing.target == m.target) {
        return Error::Msg(what + ": \"" + m.target + "\" is already mounted");
      }
    }
    p.filesystem.mounts.push_back(m);
  }
  if (!o.workspace_dir.empty()) {
    if (o.workspace_dir[0] != '/') {
      return Error::Msg("--workspace " + o.workspace_dir + ": not absolute");
    }
    p.filesystem.workspace = WorkspaceMode::kPersistent;
    p.filesystem.workspace_dir = o.workspace_dir;
    p.filesystem.workspace_name.clear();
  }
  // A named workspace is made on first use, under its lock (serve/workspaces.h).
  if (p.filesystem.workspace == WorkspaceMode::kPersistent && p.filesystem.workspace_name.empty()) {
    const std::string& dir = p.filesystem.workspace_dir;
    if (auto s = CheckMountSource(dir, state_dir); !s && s.error().err != ENOENT) {
      return s.error().Wrap("workspace " + dir);
    }
    if (auto s = MakeDirs(dir); !s) return s.error().Wrap("workspace " + dir);
    if (auto s = OpenToCells(dir); !s) return s.error().Wrap("workspace " + dir);
    if (auto s = CheckMountSource(dir, state_dir); !s) return s.error().Wrap("workspace " + dir);
  }
  return p;
}

namespace {

// A built template is the whole root: its rootfs is the lower of "/" and nothing of the
// host's is overlaid. The loader pinned the version; a bare name (a policy parsed without
// a state dir) is pinned here to the latest.
Status ApplyTemplate(const Policy& p, const std::string& state_dir, sandbox::CellSpec& spec) {
  if (p.filesystem.template_name == sandbox::kHostTemplateName) return Ok();
  auto info = sandbox::TemplateStore(state_dir).Find(p.filesystem.template_name);
  if (!info) return info.error().Wrap("policy " + p.name + ": filesystem.template");
  spec.rootfs.skeleton_dir = info->rootfs();
  spec.rootfs.system_dirs = {};
  return Ok();
}

}  // namespace

Result<sandbox::CellSpec> CompileCellSpec(const Policy& p, const std::string& cell_id,
                                          const std::string& state_dir,
                                          const std::string& skeleton_dir) {
  if (p.isolation.backend != "namespaces") {
    return Error::Msg("isolation.backend \"" + p.isolation.backend + "\" is not available");
  }
  sandbox::CellSpec spec = sandbox::DefaultCellSpec(cell_id, state_dir);
  spec.rootfs.skeleton_dir = skeleton_dir;
  if (Status s = ApplyTemplate(p, state_dir, spec); !s) return s.error();
  spec.limits.memory_max_bytes = p.limits.memory_bytes;
  spec.limits.pids_max = p.limits.pids;
  spec.limits.cpu_millicores = p.limits.cpu_millicores;
  spec.rlimits.nofile = p.limits.open_files;
  spec.rlimits.fsize_bytes = p.limits.file_size_bytes;
  spec.tmpfs.root_upper_bytes = p.limits.disk_bytes;
  spec.tmpfs.tmp_bytes = p.limits.tmp_bytes;
  spec.seccomp = p.isolation.seccomp;
  if (p.filesystem.workspace == WorkspaceMode::kPersistent) {
    spec.workspace_host_dir = p.filesystem.workspace_name.empty()
                                  ? p.filesystem.workspace_dir
                                  : NamedWorkspaceDir(state_dir, p.filesystem.workspace_owner,
                                                      p.filesystem.workspace_name);
  } else {
    // The ephemeral workspace shares the policy's disk limit with the writable layers'
    // own cap: writes past it fail with ENOSPC, which the tools report as the disk limit.
    spec.tmpfs.workspace_bytes = p.limits.disk_bytes;
  }
  for (const MountPolicy& m : p.filesystem.mounts) {
    spec.mounts.push_back(sandbox::CellMount{m.source, m.target, m.writable});
  }
  spec.env.push_back("MCPCELL_POLICY=" + p.name);
  // Every cell gets the proxy, also under egress = "deny": a refused request then gets a
  // 403 with its reason instead of a silent connection failure.
  spec.egress_proxy_port = kEgressProxyPort;
  for (std::string& var : EgressProxyEnv()) spec.env.push_back(std::move(var));
  // pip and npm point at the server's package service where the policy enables it.
  AddPackageEnv(p.packages, spec);
  if (HasPlaceholderSecrets(p)) {
    // The proxy intercepts TLS to the secrets' hosts: the cell trusts its CA (no key).
    if (Status s = EnsureCaBundleFile(state_dir); !s) {
      return s.error().Wrap("policy " + p.name + ": the CA bundle for placeholder secrets");
    }
    spec.mounts.push_back(
        sandbox::CellMount{CaBundleHostPath(state_dir), kCellCaBundlePath, false});
    for (std::string& var : CaBundleEnv()) spec.env.push_back(std::move(var));
  }
  if (Status s = sandbox::ValidateCellSpec(spec); !s) {
    return s.error().Wrap("policy " + p.name + " compiles to an invalid cell spec");
  }
  return spec;
}

std::string CaBundleHostPath(const std::string& state_dir) {
  return state_dir + "/egress/ca-bundle.pem";
}

Status EnsureCaBundleFile(const std::string& state_dir) {
  const std::string path = CaBundleHostPath(state_dir);
  if (::access(path.c_str(), F_OK) == 0) return Ok();
  if (Status s = MakeDirs(state_dir + "/egress"); !s) return s;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0 && errno != EEXIST) return Error::Sys("open(\"" + path + "\")");
  if (fd >= 0) ::close(fd);
  return Ok();
}

std::vector<std::string> CaBundleEnv() {
  std::vector<std::string> env;
  for (const char* name :
       {"SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "PIP_CERT", "CURL_CA_BUNDLE"})
    env.push_back(std::string(name) + "=" + kCellCaBundlePath);
  return env;
}

std::vector<std::string> EgressProxyEnv() {
  const std::string url = "http://127.0.0.1:" + std::to_string(kEgressProxyPort);
  const std::string no_proxy = "localhost,127.0.0.1,::1";
  return {
      // curl (and git, through libcurl) reads lower-case http_proxy only, HTTPS_PROXY in
      // either case; Python (urllib, requests, pip), Go and most others read both cases.
      "http_proxy=" + url,
      "https_proxy=" + url,
      "HTTP_PROXY=" + url,
      "HTTPS_PROXY=" + url,
      "no_proxy=" + no_proxy,
      "NO_PROXY=" + no_proxy,
      // npm reads its own settings, not the variables above.
      "npm_config_proxy=" + url,
      "npm_config_https_proxy=" + url,
      "npm_config_noproxy=" + no_proxy,
      // pip's --proxy, for the pip versions whose vendored requests ignores the variables.
      "PIP_PROXY=" + url,
  };
}

Result<egress::CellEgress> CompileCellEgress(const Policy& p) {
  egress::CellEgress cell;
  cell.max_connections = p.network.max_connections;
  cell.idle_timeout = p.network.idle_connection_timeout;
  if (!p.network.egress_allowed) return cell;  // empty allowlist: every request refused
  auto allowlist = egress::Allowlist::Parse(p.network.allow);
  if (!allowlist) return allowlist.error().Wrap("policy " + p.name);
  cell.allowlist = std::move(*allowlist);
  return cell;
}

std::string NetworkSummary(const Policy& p) {
  const std::string proxy = "http://127.0.0.1:" + std::to_string(kEgressProxyPort);
  if (!p.network.egress_allowed) {
    return "no network: the cell has only loopback, and its egress proxy (" + proxy +
           ") refuses every request";
  }
  std::string hosts;
  for (const auto& h : p.network.allow) hosts += (hosts.empty() ? "" : ", ") + h;
  return "egress only through the proxy at " + proxy + " (HTTP_PROXY/HTTPS_PROXY are set; " +
         "names resolve there, not in the cell) to: " + hosts + "; at most " +
         std::to_string(p.network.max_connections) + " connections at a time";
}

namespace {

// [[secrets]] as written: where each value comes from, never the value.
void DescribeSecrets(std::ostringstream& o, const std::vector<SecretPolicy>& secrets) {
  for (const SecretPolicy& s : secrets) {
    o << "\n[[secrets]]\nname = " << Quoted(s.name) << "\nsource = " << Quoted(s.source)
      << "\nmode = " << Quoted(SecretModeName(s.mode)) << "\n";
    if (s.mode == SecretMode::kPlaceholder) {
      o << "hosts = " << List(s.hosts) << "\nsurfaces = " << List(s.surfaces) << "\non_violation = "
        << (s.end_session_on_violation ? "\"block_and_end_session\"" : "\"block\"") << "\n";
    }
    if (s.ttl)
      o << "ttl = " << Quoted(FormatDuration(*s.ttl)) << "\n";
    else
      o << "# ttl: the session's life\n";
  }
}

}  // namespace

std::string DescribePolicy(const Policy& p) {
  std::ostringstream o;
  o << "# effective policy (from " << p.source << ")\n";
  o << "name = " << Quoted(p.name) << "\n";
  if (!p.description.empty()) o << "description = " << Quoted(p.description) << "\n";
  o << "\n[isolation]\nbackend = " << Quoted(p.isolation.backend)
    << "\nseccomp = " << (p.isolation.seccomp ? "true" : "false") << "\n";
  const LimitsPolicy& l = p.limits;
  o << "\n[limits]\nmemory = " << Quoted(FormatSize(l.memory_bytes)) << "\npids = " << l.pids
    << "\ncpus = " << l.cpu_millicores / 1000.0 << "\ndisk = " << Quoted(FormatSize(l.disk_bytes))
    << "\ntmp = " << Quoted(FormatSize(l.tmp_bytes)) << "\nopen_files = " << l.open_files
    << "\nmax_file_size = " << Quoted(FormatSize(l.file_size_bytes))
    << "\noutput_kept = " << Quoted(FormatSize(l.output_keep_bytes))
    << "\narchive_bytes = " << Quoted(FormatSize(l.archive_bytes))
    << "\narchive_ratio = " << l.archive_ratio << "\narchive_entries = " << l.archive_entries
    << "\n";
  const TimePolicy& t = p.time;
  o << "\n[time]\nexec_default = " << Quoted(FormatDuration(t.exec_default))
    << "\nexec_max = " << Quoted(FormatDuration(t.exec_max))
    << "\nsession_idle = " << Quoted(FormatDuration(t.session_idle))
    << "\nsession_max = " << Quoted(FormatDuration(t.session_max)) << "\nsession_pause_idle = "
    << Quoted(t.session_pause_idle.count() == 0 ? "off" : FormatDuration(t.session_pause_idle))
    << "\nworkspace_retention = " << Quoted(FormatDuration(t.workspace_retention)) << "\n";
  const FilesystemPolicy& f = p.filesystem;
  std::string ws = f.workspace == WorkspaceMode::kPersistent ? "persistent" : "ephemeral";
  if (!f.workspace_name.empty()) ws += ":" + f.workspace_name;
  o << "\n[filesystem]\ntemplate = " << Quoted(f.template_name) << "\nworkspace = " << Quoted(ws)
    << "\nworkspace_busy = "
    << (f.workspace_busy == WorkspaceBusy::kWait ? "\"wait\"" : "\"refuse\"") << "\n";
  if (!f.workspace_dir.empty()) o << "workspace_dir = " << Quoted(f.workspace_dir) << "\n";
  for (const MountPolicy& m : f.mounts) {
    o << "\n[[filesystem.mounts]]\nsource = " << Quoted(m.source)
      << "\ntarget = " << Quoted(m.target) << "\nmode = " << (m.writable ? "\"rw\"" : "\"ro\"")
      << "\n";
  }
  o << "\n[network]\negress = " << (p.network.egress_allowed ? "\"allowlist\"" : "\"deny\"")
    << "\n";
  if (!p.network.allow.empty()) o << "allow = " << List(p.network.allow) << "\n";
  o << "max_connections = " << p.network.max_connections << "\n";
  o << "idle_connection_timeout = " << Quoted(FormatDuration(p.network.idle_connection_timeout))
    << "\n";
  const PackagesPolicy& k = p.packages;
  o << "\n[packages]\nmode = "
    << (k.mode == PackagesMode::kOnline    ? "\"online\""
        : k.mode == PackagesMode::kOffline ? "\"offline\""
                                           : "\"disabled\"")
    << "\nregistries = " << List(k.registries) << "\npypi_index = " << Quoted(k.pypi_index)
    << "\nnpm_registry = " << Quoted(k.npm_registry) << "\n";
  if (!k.wheelhouse.empty()) o << "wheelhouse = " << Quoted(k.wheelhouse) << "\n";
  if (!k.npm_offline_dir.empty()) o << "npm_offline_dir = " << Quoted(k.npm_offline_dir) << "\n";
  o << "allow = " << List(k.allow) << "\ndeny = " << List(k.deny)
    << "\nallow_sdist = " << (k.allow_sdist ? "true" : "false")
    << "\nallow_install_scripts = " << (k.allow_install_scripts ? "true" : "false")
    << "\nmax_artifact_size = " << Quoted(FormatSize(k.max_artifact_bytes))
    << "\nallow_direct_registry_access = " << (k.allow_direct_registry_access ? "true" : "false")
    << "\n";
  o << "\n[tools]\ntoolset = " << Quoted(p.tools.toolset) << "\n";
  if (p.tools.enabled.empty())
    o << "# every tool of the toolset\n";
  else
    o << "enabled = " << List(p.tools.enabled) << "\n";
  DescribeSecrets(o, p.secrets);
  return o.str();
}

std::string DescribeCellSpec(const sandbox::CellSpec& s) {
  std::ostringstream o;
  o << "cell spec:\n  state_dir: " << s.state_dir << "\n  rootfs.skeleton_dir: "
    << (s.rootfs.skeleton_dir.empty() ? "(the state dir's template)" : s.rootfs.skeleton_dir)
    << "\n  rootfs.system_dirs:";
  for (const auto& d : s.rootfs.system_dirs) o << " " << d;
  o << "\n  workspace: "
    << (s.workspace_host_dir.empty() ? "ephemeral (<cell dir>/workspace, deleted with the cell)"
                                     : s.workspace_host_dir + " (persistent)")
    << "\n";
  for (const auto& m : s.mounts) {
    o << "  mount: " << m.host_path << " -> " << m.cell_path
      << (m.writable ? " (rw,nosuid,nodev)" : " (ro,nosuid,nodev)") << "\n";
  }
  o << "  limits.memory_max_bytes: " << s.limits.memory_max_bytes << " ("
    << FormatSize(s.limits.memory_max_bytes) << ")\n  limits.pids_max: " << s.limits.pids_max
    << "\n  limits.cpu_millicores: " << s.limits.cpu_millicores
    << "\n  rlimits.nofile: " << s.rlimits.nofile
    << "\n  rlimits.fsize_bytes: " << s.rlimits.fsize_bytes
    << "\n  tmpfs.root_upper_bytes: " << s.tmpfs.root_upper_bytes << " ("
    << FormatSize(s.tmpfs.root_upper_bytes) << ")\n  tmpfs.tmp_bytes: " << s.tmpfs.tmp_bytes
    << "\n  tmpfs.workspace_bytes: " << s.tmpfs.workspace_bytes
    << "\n  sandbox user: " << s.sandbox_user << " (" << s.sandbox_uid << ":" << s.sandbox_gid
    << ")\n  seccomp: " << (s.seccomp ? "on" : "off")
    << "\n  egress_proxy_port: " << s.egress_proxy_port << "\n  env:";
  for (const auto& e : s.env) o << " " << e;
  o << "\n";
  return o.str();
}

}  // namespace mcpcell::policies
