// upload_archive and download_archive: many files into and out of the cell in one call.
// Neither parses an archive in the server: both run cell init's binary in the cell as the
// archive helper (sandbox/init/archive_tool.h), as the sandbox user under the cell's
// limits, and read what it prints strictly (archive_report.h). Extraction refuses what
// could leave the target directory or harm the cell (archive_unpack.h) and lists each
// refusal; packing makes a tar.gz returned as an embedded resource, or, over
// kMaxEmbeddedArchiveBytes, written into the cell and returned as a resource_link
// (workspace_resources.h) that the client reads in windows.
#include <algorithm>
#include <memory>
#include <stop_token>

#include "base/base64.h"
#include "sandbox/cell_channel.h"
#include "tools/archive_report.h"
#include "tools/archive_url.h"
#include "tools/audit_events.h"
#include "tools/cell_note.h"
#include "tools/cell_tools.h"
#include "tools/exec_runner.h"
#include "tools/tool_args.h"
#include "tools/workspace_resources.h"

namespace mcpcell::tools {
namespace {

// How the server starts the helper: an exec'ing child of cell init is still init's image.
constexpr const char* kHelper = "/proc/self/exe";
// Entry lines kept in a result; the counts cover every entry.
constexpr size_t kMaxListedEntries = 1000;
// The helper's report lines for a whole archive (limits.archive_entries lines at most).
constexpr size_t kMaxReportBytes = 64ull << 20;
// download_archive embeds a tar.gz up to this size; a larger one is kept in the cell and
// linked, so a result stays small enough for clients that hold it in a model's context.
constexpr size_t kMaxEmbeddedArchiveBytes = 1 << 20;

std::string MiB(uint64_t bytes) {
  if (bytes < (1 << 20)) return std::to_string(bytes) + " bytes";
  char text[32];
  std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  return text;
}

std::string AbsoluteCellPath(const std::string& path) {
  return path.front() == '/' ? path : "/workspace/" + path;
}

struct UploadArchiveArgs {
  std::string path = "/workspace";
  std::string archive;  // decoded; empty when `url` is given
  std::string url;      // fetched in the cell (archive_url.h)
};

Result<UploadArchiveArgs> ParseUploadArchiveArgs(const mcp::Json& json, uint64_t max_bytes) {
  ArgReader reader(json, {"data", "url", "path"});
  UploadArchiveArgs args;
  const std::optional<std::string> data = reader.OptionalString("data");
  args.url = reader.OptionalString("url").value_or("");
  args.path = reader.OptionalString("path").value_or("/workspace");
  if (Status st = reader.Finish(); !st) return st.error();
  if (std::string e = NulByteError("path", args.path, "a path ends at a NUL byte"); !e.empty())
    return Error::Msg(e);
  if (args.path.empty()) return Error::Msg("arguments.path: empty; name a directory");
  if (data.has_value() == !args.url.empty() || (json.contains("url") && args.url.empty())) {
    return Error::Msg(data ? "arguments: give the archive either in data or by url, not both"
                           : "arguments: give the archive in data (base64) or by url (fetched "
                             "through the sandbox's egress policy)");
  }
  if (!args.url.empty()) {
    if (Status st = CheckArchiveUrl(args.url); !st) return st.error();
    return args;
  }
  auto decoded = Base64Decode(*data);
  if (!decoded) return decoded.error().Wrap("arguments.data");
  if (decoded->empty()) return Error::Msg("arguments.data: the archive is empty");
  if (decoded->size() > max_bytes)
    return Error::Msg("arguments.data: the archive is " + MiB(decoded->size()) + ", over the " +
                      MiB(max_bytes) + " cap for uploads; split it into several archives");
  args.archive = std::move(decoded).value();
  return args;
}

struct DownloadArchiveArgs {
  std::string path = "/workspace";
};

Result<DownloadArchiveArgs> ParseDownloadArchiveArgs(const mcp::Json& json) {
  ArgReader reader(json, {"path"});
  DownloadArchiveArgs args;
  args.path = reader.OptionalString("path").value_or("/workspace");
  if (Status st = reader.Finish(); !st) return st.error();
  if (std::string e = NulByteError("path", args.path, "a path ends at a NUL byte"); !e.empty())
    return Error::Msg(e);
  if (args.path.empty()) return Error::Msg("arguments.path: empty; name a directory");
  return args;
}

// Runs the helper in the calling session's cell; cancellation and the session's end kill
// it. On failure an isError result saying what to do.
struct HelperRun {
  std::optional<sandbox::ExecResult> exec;
  mcp::ToolResult error;
};

HelperRun RunHelper(const LeaseOrError& acquired, mcp::Context& ctx, const std::string& tool,
                    std::vector<std::string> argv, std::string stdin_data, size_t keep_bytes) {
  const sandbox::CellLease& lease = *acquired.lease;
  auto stop = std::make_shared<std::stop_source>();
  ctx.OnCancel([stop] { stop->request_stop(); });
  std::stop_callback on_close(lease.stop_token(), [stop] { stop->request_stop(); });
  sandbox::ExecOptions opts;
  opts.argv = std::move(argv);
  opts.stdin_data = std::move(stdin_data);
  opts.timeout = acquired.config->max_timeout;
  opts.keep_bytes = keep_bytes;
  opts.stop = stop->get_token();
  HelperRun run;
  auto result = lease.Exec(opts);
  if (!result) {
    run.error = SandboxError(tool, result.error(),
                             lease.alive() ? "Try again; if it persists, report it."
                                           : "The cell stopped; the next call gets a fresh cell.");
  } else if (result->cancelled) {
    run.error = mcp::ToolResult::Error(tool + ": cancelled; files already written stay.");
  } else if (result->timed_out || result->signaled) {
    std::string why =
        result->timed_out
            ? "ran past the " + std::to_string(acquired.config->max_timeout.count()) + " s limit"
        : result->oom_killed ? "ran out of the cell's memory"
                             : "was killed by signal " + std::to_string(result->signo);
    run.error = mcp::ToolResult::Error(tool + ": the archive helper " + why +
                                       "; split the work into smaller archives or directories.");
  } else {
    run.exec = std::move(*result);
  }
  return run;
}

mcp::Json EntriesJson(const std::vector<ArchiveEntryReport>& list, bool refused) {
  mcp::Json out = mcp::Json::array();
  for (size_t i = 0; i < list.size() && i < kMaxListedEntries; ++i) {
    const ArchiveEntryReport& e = list[i];
    if (refused)
      out.push_back({{"path", e.path}, {"reason", e.reason}});
    else
      out.push_back({{"path", e.path}, {"kind", e.kind}, {"size", e.size}});
  }
  return out;
}

mcp::ToolResult UnpackResult(const std::string& dir, const UnpackOutcome& o) {
  std::string text = "Extracted " + std::to_string(o.entries) + " entries (" +
                     std::to_string(o.bytes) + " bytes of file data) into " + dir;
  text += o.refused_count ? "; refused " + std::to_string(o.refused_count) + ":\n" : ".\n";
  for (size_t i = 0; i < o.refused.size() && i < kMaxListedEntries; ++i)
    text += "  " + o.refused[i].path + ": " + o.refused[i].reason + "\n";
  if (o.stopped)
    text +=
        "Stopped early at the last refusal above; what was extracted before it stays. To "
        "go on, split the archive or ask for larger limits.archive_* in the policy.\n";
  const bool cut = o.extracted.size() > kMaxListedEntries || o.refused.size() > kMaxListedEntries;
  mcp::ToolResult r = o.stopped ? mcp::ToolResult::Error(text) : mcp::ToolResult::Text(text);
  r.structured_content = {{"path", dir},
                          {"entries", o.entries},
                          {"bytes", o.bytes},
                          {"refused_count", o.refused_count},
                          {"stopped", o.stopped},
                          {"extracted", EntriesJson(o.extracted, false)},
                          {"refused", EntriesJson(o.refused, true)},
                          {"truncated", cut}};
  return r;
}

// The archive at `url`, fetched in the cell through its egress proxy (archive_url.h); on
// failure an isError result in `error`.
std::optional<std::string> FetchArchive(const ToolEnv& env, const LeaseOrError& acquired,
                                        mcp::Context& ctx, const std::string& url,
                                        mcp::ToolResult& error) {
  const std::string cell = acquired.lease->id();
  const uint64_t cap = ArchiveUrlCap(acquired.config->archive_bytes);
  const uint64_t cursor = env.egress ? env.egress->RefusalCursor(cell) : 0;
  HelperRun run =
      RunHelper(acquired, ctx, "upload_archive", ArchiveFetchArgv(url, cap), "", cap + 1);
  if (!run.exec) {
    error = run.error;
    return std::nullopt;
  }
  const std::vector<std::string> refusals =
      env.egress ? env.egress->RefusalsSince(cell, cursor) : std::vector<std::string>{};
  auto fetched = ArchiveFetchOutcome(*run.exec, url, cap, refusals);
  if (!fetched) {
    error = mcp::ToolResult::Error("upload_archive: " + fetched.error().message);
    return std::nullopt;
  }
  return std::move(fetched).value();
}

mcp::ToolResult UploadArchive(const ToolEnv& env, mcp::Context& ctx, const UploadArchiveArgs& args,
                              std::string& note) {
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  note = acquired.lease->replaced_reason();
  const CellToolsConfig& c = *acquired.config;
  const std::string dir = AbsoluteCellPath(args.path);
  std::string fetched;
  if (!args.url.empty()) {
    mcp::ToolResult error;
    auto bytes = FetchArchive(env, acquired, ctx, args.url, error);
    if (!bytes) return error;
    fetched = std::move(*bytes);
  }
  const std::string& archive = args.url.empty() ? args.archive : fetched;
  const size_t input = archive.size();
  HelperRun run = RunHelper(
      acquired, ctx, "upload_archive",
      {kHelper, "unpack", dir, std::to_string(c.archive_bytes), std::to_string(c.archive_ratio),
       std::to_string(c.archive_entries), std::to_string(input)},
      archive, kMaxReportBytes);
  if (!run.exec) return run.error;
  auto outcome = ParseUnpackReport(run.exec->out.data);
  if (!outcome)
    return mcp::ToolResult::Error(
        "upload_archive " + dir + ": " + outcome.error().message +
        ". Send a tar, tar.gz, tar.bz2, tar.xz, tar.zst or zip archive, base64-encoded, in "
        "arguments.data, and a directory you may write (under /workspace or /tmp) as path.");
  return UnpackResult(dir, *outcome);
}

// A tar.gz too large to embed, written under kOutputDir and returned as a resource_link.
// Written in pieces: one control message carries at most a few MiB.
mcp::ToolResult LinkedArchive(const sandbox::CellLease& lease, const std::string& dir,
                              const std::string& tgz, const std::string& text,
                              mcp::Json structured) {
  constexpr size_t kPiece = 1 << 20;
  const std::string path = std::string(kOutputDir) + "/download_archive-" + NewCallId() + ".tar.gz";
  Status st = lease.Mkdir(kOutputDir, 0755, /*parents=*/true);
  for (size_t at = 0; st && at < tgz.size(); at += kPiece)
    st = lease.WriteFileAt(path, at, std::string_view(tgz).substr(at, kPiece), at == 0);
  if (!st)
    return SandboxError("download_archive " + dir, st.error(),
                        "The tar.gz is over the " + MiB(kMaxEmbeddedArchiveBytes) +
                            " that are embedded and could not be kept in the cell; " +
                            WriteHint(st.error()));
  mcp::ToolResult r = mcp::ToolResult::Text(
      text + "; over the " + MiB(kMaxEmbeddedArchiveBytes) +
      " that are embedded, so it is kept in the sandbox at " + path +
      " and linked (resources/read it in windows, or remove the file when done).");
  r.content.push_back(
      WorkspaceResourceLink(path, "application/gzip", tgz.size(), "tar.gz of " + dir));
  structured["archive_path"] = path;
  r.structured_content = std::move(structured);
  return r;
}

mcp::ToolResult DownloadArchive(const ToolEnv& env, mcp::Context& ctx,
                                const DownloadArchiveArgs& args, std::string& note) {
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) return acquired.error;
  note = acquired.lease->replaced_reason();
  const std::string dir = AbsoluteCellPath(args.path);
  const uint64_t cap = env.config.max_read_bytes;
  HelperRun run = RunHelper(acquired, ctx, "download_archive",
                            {kHelper, "pack", dir, std::to_string(cap)}, "", cap + 1);
  if (!run.exec) return run.error;
  auto outcome = ParsePackReport(run.exec->err.data);
  if (!outcome) {
    std::string hint = outcome.error().message.find("passes") != std::string::npos
                           ? "the tar.gz is over the " + MiB(cap) +
                                 " cap for embedded resources; pack a subdirectory, or remove "
                                 "build outputs first"
                           : "name an existing directory (list_files shows them)";
    return mcp::ToolResult::Error("download_archive " + dir + ": " + outcome.error().message +
                                  "; " + hint + ".");
  }
  const std::string& tgz = run.exec->out.data;
  if (tgz.size() != outcome->bytes || run.exec->out.truncated())
    return mcp::ToolResult::Error("download_archive " + dir + ": the helper reported " +
                                  std::to_string(outcome->bytes) + " bytes but sent " +
                                  std::to_string(run.exec->out.total) + "; try again.");
  std::string text = "Packed " + std::to_string(outcome->entries) + " entries of " + dir +
                     " as tar.gz (" + std::to_string(tgz.size()) + " bytes)";
  if (outcome->skipped_count)
    text += "; skipped " + std::to_string(outcome->skipped_count) +
            " special files (FIFOs, sockets, devices)";
  mcp::Json structured = {{"path", dir},
                          {"entries", outcome->entries},
                          {"bytes", tgz.size()},
                          {"skipped", outcome->skipped}};
  if (tgz.size() > kMaxEmbeddedArchiveBytes)
    return LinkedArchive(*acquired.lease, dir, tgz, text, std::move(structured));
  mcp::ToolResult r = mcp::ToolResult::Text(text + ".");
  r.content.push_back({{"type", "resource"},
                       {"resource",
                        {{"uri", "cell://" + dir},
                         {"mimeType", "application/gzip"},
                         {"blob", Base64Encode(tgz)}}}});
  r.structured_content = std::move(structured);
  return r;
}

mcp::Json PathSchema() {
  return {{"type", "string"},
          {"minLength", 1},
          {"maxLength", 4096},
          {"description", "a directory of the cell (default /workspace; relative to it)"}};
}

}  // namespace

mcp::Tool MakeUploadArchiveTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "upload_archive";
  tool.title = "Unpack an archive into the sandbox";
  tool.description =
      "Extracts a tar (plain, .gz, .bz2, .xz, .zst) or zip archive, given base64-encoded in "
      "`data` or fetched from `url` (http/https, through the sandbox's egress policy: only "
      "hosts it allows), into a directory of this session's sandbox (`path`, made if "
      "missing). Entries "
      "that would leave the directory (absolute paths, '..', links out, paths through "
      "symlinks), device nodes, FIFOs and setuid/setgid files are refused and listed; an "
      "archive that expands past the policy's limits stops early.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"data", {{"type", "string"}, {"minLength", 1}, {"description", "the archive, base64"}}},
        {"url",
         {{"type", "string"},
          {"minLength", 8},
          {"maxLength", 4096},
          {"description",
           "instead of data: an http:// or https:// URL of the archive, fetched from inside "
           "the sandbox through its egress proxy (the policy's network.allow decides)"}}},
        {"path", PathSchema()}}},
      // One of data and url: flat schemas have no oneOf, so the parser checks it.
      {"additionalProperties", false}};
  const mcp::Json entry = {{"type", "object"},
                           {"properties",
                            {{"path", {{"type", "string"}}},
                             {"kind", {{"type", "string"}}},
                             {"size", {{"type", "integer"}}},
                             {"reason", {{"type", "string"}}}}},
                           {"required", {"path"}}};
  tool.output_schema = {
      {"type", "object"},
      {"properties",
       {{"path", {{"type", "string"}}},
        {"entries", {{"type", "integer"}}},
        {"bytes", {{"type", "integer"}}},
        {"refused_count", {{"type", "integer"}}},
        {"stopped", {{"type", "boolean"}}},
        {"extracted", {{"type", "array"}, {"items", entry}}},
        {"refused", {{"type", "array"}, {"items", entry}}},
        {"truncated", {{"type", "boolean"}}}}},
      {"required",
       {"path", "entries", "bytes", "refused_count", "stopped", "extracted", "refused"}}};
  tool.annotations = {{"title", tool.title},
                      {"readOnlyHint", false},
                      {"destructiveHint", true},
                      {"openWorldHint", false}};
  tool.handler = WithCellNote(
      [&env](const mcp::Json& json, mcp::Context& ctx, std::string& note) -> mcp::ToolResult {
        auto args = ParseUploadArchiveArgs(json, env.config.max_write_bytes);
        if (!args) return mcp::ToolResult::Error(args.error().message);
        mcp::ToolResult result = UploadArchive(env, ctx, *args, note);
        AuditFileCall(env, ctx, "upload_archive", args->path, result, "bytes");
        return result;
      });
  return tool;
}

mcp::Tool MakeDownloadArchiveTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "download_archive";
  tool.title = "Pack a sandbox directory as tar.gz";
  tool.description =
      "Packs a directory of this session's sandbox (`path`, default /workspace) as tar.gz and "
      "returns it as an embedded resource (application/gzip, base64 blob); over " +
      MiB(kMaxEmbeddedArchiveBytes) +
      " the tar.gz is kept in the sandbox under /workspace/.mcpcell and returned as a "
      "resource_link (read it with resources/read in byte windows). Symlinks are kept as "
      "symlinks; FIFOs, sockets and devices are skipped. Up to " +
      MiB(env.config.max_read_bytes) + " of tar.gz.";
  tool.input_schema = {{"type", "object"},
                       {"properties", {{"path", PathSchema()}}},
                       {"additionalProperties", false}};
  tool.output_schema = {
      {"type", "object"},
      {"properties",
       {{"path", {{"type", "string"}}},
        {"entries", {{"type", "integer"}}},
        {"bytes", {{"type", "integer"}}},
        {"archive_path",
         {{"type", "string"}, {"description", "where a linked (not embedded) tar.gz is kept"}}},
        {"skipped", {{"type", "array"}, {"items", {{"type", "string"}}}}}}},
      {"required", {"path", "entries", "bytes", "skipped"}}};
  tool.annotations = {{"title", tool.title}, {"readOnlyHint", true}, {"openWorldHint", false}};
  tool.handler = WithCellNote(
      [&env](const mcp::Json& json, mcp::Context& ctx, std::string& note) -> mcp::ToolResult {
        auto args = ParseDownloadArchiveArgs(json);
        if (!args) return mcp::ToolResult::Error(args.error().message);
        mcp::ToolResult result = DownloadArchive(env, ctx, *args, note);
        AuditFileCall(env, ctx, "download_archive", args->path, result, "bytes");
        return result;
      });
  return tool;
}

}  // namespace mcpcell::tools
