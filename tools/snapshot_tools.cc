// snapshot_create, snapshot_list, snapshot_restore, snapshot_delete: a session's files
// frozen under an id (and an optional name), listed, put back, removed. The tools only read
// their arguments and word the results; the work is ToolEnv::snapshots (snapshots_view.h),
// called with the MCP session's id and tenant and never with a cell lease held (restore
// ends the session's cell, which waits for leases).
#include <algorithm>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "tools/cell_tools.h"
#include "tools/tool_args.h"

namespace mcpcell::tools {
namespace {

constexpr const char* kNameRule =
    "1 to 64 characters of [A-Za-z0-9._-] (letters, digits, '.', '_', '-'; no '/'), not "
    "\".\" or \"..\"";
constexpr const char* kWhatSnapshotsHold =
    "A snapshot holds this session's files: /workspace, and what was written to / and /usr "
    "(e.g. installed packages); not running programs, and never /run/secrets. Snapshots "
    "belong to the tenant (every session of it sees them; no other tenant does). ";
constexpr const char* kListHint = "snapshot_list shows this session's tenant's snapshots.";

// "" when `name` is a valid snapshot name, else what is wrong with it.
std::string SnapshotNameError(const std::string& name) {
  const bool chars_ok = std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
  });
  if (name.empty() || name.size() > 64 || !chars_ok || name == "." || name == "..")
    return "arguments.name: \"" + name + "\" is not a valid snapshot name: it must be " + kNameRule;
  return "";
}

// The calling session's key and tenant; `error` set when its tenant has no policy.
struct Caller {
  std::string session_key;
  std::string tenant;
  std::optional<mcp::ToolResult> error;
};
Caller CallerOf(const ToolEnv& env, const mcp::Context& ctx) {
  Caller c{CallKey(ctx), ctx.session().tenant(), std::nullopt};
  if (!env.snapshots) {
    c.error = mcp::ToolResult::Error("this server has no snapshot store");
  } else if (!env.ConfigFor(c.tenant)) {
    c.error = mcp::ToolResult::Error("no policy is configured for tenant \"" + c.tenant + "\"");
  }
  return c;
}

bool Contains(const std::string& text, const char* part) {
  return text.find(part) != std::string::npos;
}

// The next step for a failed snapshot call, from the view's error.
std::string HintFor(const Error& error, bool restoring) {
  const std::string& m = error.message;
  if (Contains(m, "not found")) return kListHint;
  if (Contains(m, "quota"))
    return "Delete snapshots this tenant no longer needs with snapshot_delete (snapshot_list "
           "shows each one's stored_bytes), or snapshot fewer files.";
  if (Contains(m, "exists already")) return "Choose another name, or delete that snapshot first.";
  if (Contains(m, "snapshot name")) return std::string("A snapshot name is ") + kNameRule + ".";
  if (restoring && (Contains(m, "damaged") || Contains(m, "verif") || Contains(m, "corrupt") ||
                    Contains(m, "digest") || Contains(m, "does not match")))
    return "The snapshot's stored files are damaged, so it was not restored; this session's "
           "files are as they were. Restore another snapshot (snapshot_list) or report this "
           "to the operator.";
  return "";
}

mcp::ToolResult ViewError(const std::string& what, const Error& error, bool restoring = false) {
  return SandboxError(what, error, HintFor(error, restoring));
}

// "12345 bytes" below 1 MiB, else "3.2 MiB (3355443 bytes)".
std::string Bytes(uint64_t n) {
  if (n < (1ull << 20)) return std::to_string(n) + " bytes";
  char mib[32];
  std::snprintf(mib, sizeof mib, "%.1f MiB", static_cast<double>(n) / (1ull << 20));
  return std::string(mib) + " (" + std::to_string(n) + " bytes)";
}

// `id` and, when it has one, ` "name"`.
std::string Label(const SnapshotSummary& s) {
  return s.id + (s.name.empty() ? "" : " (\"" + s.name + "\")");
}

mcp::Json SummaryJson(const SnapshotSummary& s) {
  return {{"id", s.id},         {"name", s.name},   {"created", s.created},
          {"digest", s.digest}, {"files", s.files}, {"stored_bytes", s.stored_bytes}};
}

mcp::Json SummarySchema() {
  auto str = mcp::Json{{"type", "string"}};
  auto integer = mcp::Json{{"type", "integer"}};
  return {{"type", "object"},
          {"properties",
           {{"id", str},
            {"name", {{"type", "string"}, {"description", "empty when it has none"}}},
            {"created", {{"type", "string"}, {"description", "RFC 3339, UTC"}}},
            {"digest", {{"type", "string"}, {"description", "SHA-256 over its entries"}}},
            {"files", integer},
            {"stored_bytes",
             {{"type", "integer"}, {"description", "what the snapshot_storage quota counts"}}}}},
          {"required", {"id", "name", "created", "digest", "files", "stored_bytes"}}};
}

mcp::Json Strings() { return {{"type", "array"}, {"items", {{"type", "string"}}}}; }

// The text lines of `notes`, each "note: ...".
std::string NoteLines(const std::vector<std::string>& notes) {
  std::string text;
  for (const auto& n : notes) text += "note: " + n + "\n";
  return text;
}

uint64_t QuotaLeft(const SnapshotCreated& c) {
  return c.quota_bytes > c.quota_used_bytes ? c.quota_bytes - c.quota_used_bytes : 0;
}

mcp::ToolResult Create(const ToolEnv& env, mcp::Context& ctx, const std::string& name) {
  Caller caller = CallerOf(env, ctx);
  if (caller.error) return *caller.error;
  auto made = env.snapshots->Create(caller.session_key, caller.tenant, name);
  if (!made) return ViewError("snapshot_create", made.error());
  const SnapshotCreated& c = *made;
  std::string text = "Created snapshot " + Label(c.snapshot) + ": " +
                     std::to_string(c.snapshot.files) + " files, " +
                     std::to_string(c.files_hashed) + " read now (the rest unchanged since an " +
                     "earlier snapshot), " + Bytes(c.new_object_bytes) + " of storage added.\n";
  text += "Snapshot storage of this tenant: " + Bytes(c.quota_used_bytes) + " used";
  if (c.quota_bytes > 0) {
    text += " of " + Bytes(c.quota_bytes) + ", " + Bytes(QuotaLeft(c)) + " left";
  } else {
    text += " (no quota)";
  }
  text += ".\nsnapshot_restore with \"" +
          (c.snapshot.name.empty() ? c.snapshot.id : c.snapshot.name) +
          "\" puts these files back (in another session of this tenant it forks them).\n" +
          NoteLines(c.notes);
  mcp::ToolResult r = mcp::ToolResult::Text(std::move(text));
  r.structured_content = {
      {"snapshot", SummaryJson(c.snapshot)},    {"files_hashed", c.files_hashed},
      {"new_object_bytes", c.new_object_bytes}, {"quota_used_bytes", c.quota_used_bytes},
      {"quota_bytes", c.quota_bytes},           {"notes", c.notes}};
  if (c.quota_bytes > 0) {
    r.structured_content["quota_left_bytes"] = QuotaLeft(c);
  }
  return r;
}

mcp::ToolResult List(const ToolEnv& env, mcp::Context& ctx) {
  Caller caller = CallerOf(env, ctx);
  if (caller.error) return *caller.error;
  auto list = env.snapshots->List(caller.tenant);
  if (!list) return ViewError("snapshot_list", list.error());
  mcp::Json items = mcp::Json::array();
  uint64_t total = 0;
  std::string text;
  for (const SnapshotSummary& s : *list) {
    items.push_back(SummaryJson(s));
    total += s.stored_bytes;
    text += Label(s) + ": created " + s.created + ", " + std::to_string(s.files) + " files, " +
            Bytes(s.stored_bytes) + " stored\n";
  }
  text = list->empty() ? "This tenant has no snapshots (snapshot_create makes one).\n"
                       : std::to_string(list->size()) + " snapshots of this tenant, " +
                             Bytes(total) + " stored in all (oldest first):\n" + text;
  mcp::ToolResult r = mcp::ToolResult::Text(std::move(text));
  r.structured_content = {
      {"snapshots", std::move(items)}, {"count", list->size()}, {"total_stored_bytes", total}};
  return r;
}

mcp::ToolResult Restore(const ToolEnv& env, mcp::Context& ctx, const std::string& which) {
  Caller caller = CallerOf(env, ctx);
  if (caller.error) return *caller.error;
  auto restored = env.snapshots->Restore(caller.session_key, caller.tenant, which);
  if (!restored) return ViewError("snapshot_restore", restored.error(), /*restoring=*/true);
  const SnapshotRestored& s = *restored;
  std::string text = "Restored snapshot " + Label(s.snapshot) + " (" +
                     std::to_string(s.snapshot.files) + " files, created " + s.snapshot.created +
                     "). This session's files (/workspace, writes to / and /usr) are now the "
                     "snapshot's; changes made since it are gone. Changes from now on stay in "
                     "this session (the snapshot itself does not change).\n";
  text += s.programs_ended == 0
              ? "No programs were running.\n"
              : "Ended " + std::to_string(s.programs_ended) +
                    " running process(es) first (background ones too): start again what you "
                    "need.\n";
  text += NoteLines(s.notes);
  mcp::ToolResult r = mcp::ToolResult::Text(std::move(text));
  r.structured_content = {{"snapshot", SummaryJson(s.snapshot)},
                          {"programs_ended", s.programs_ended},
                          {"notes", s.notes}};
  return r;
}

mcp::ToolResult Delete(const ToolEnv& env, mcp::Context& ctx, const std::string& which) {
  Caller caller = CallerOf(env, ctx);
  if (caller.error) return *caller.error;
  if (Status st = env.snapshots->Delete(caller.tenant, which); !st)
    return ViewError("snapshot_delete", st.error());
  mcp::ToolResult r = mcp::ToolResult::Text(
      "Deleted snapshot \"" + which +
      "\": it can no longer be restored, and its storage no longer counts against this "
      "tenant's snapshot quota. Sessions already restored from it keep their files.\n");
  r.structured_content = {{"deleted", which}};
  return r;
}

// The `snapshot` argument of restore and delete: required, an id or a name.
Result<std::string> ReadSnapshotArg(const mcp::Json& json) {
  ArgReader reader(json, {"snapshot"});
  std::string which = reader.String("snapshot");
  if (Status st = reader.Finish(); !st) return st.error();
  if (which.empty()) return Error::Msg("arguments.snapshot: is empty; give an id or a name");
  return which;
}

mcp::Json SnapshotArgSchema() {
  return {{"type", "object"},
          {"properties",
           {{"snapshot",
             {{"type", "string"},
              {"minLength", 1},
              {"description", "the snapshot's id or name (snapshot_list shows them)"}}}}},
          {"required", {"snapshot"}},
          {"additionalProperties", false}};
}

mcp::Json Annotations(const std::string& title, bool read_only, bool destructive) {
  return {{"title", title},
          {"readOnlyHint", read_only},
          {"destructiveHint", destructive},
          {"idempotentHint", read_only},
          {"openWorldHint", false}};
}

}  // namespace

mcp::Tool MakeSnapshotCreateTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "snapshot_create";
  tool.title = "Snapshot this session's files";
  tool.description =
      std::string(
          "Saves this session's files as a new snapshot that snapshot_restore can put "
          "back later, here or in another session. ") +
      kWhatSnapshotsHold +
      "Running programs keep running. Files unchanged since an earlier snapshot are stored "
      "once; the result says how much storage this added and how much of the tenant's "
      "snapshot quota is left. `name` (optional) is " +
      kNameRule + ", unique within the tenant.";
  tool.input_schema = {
      {"type", "object"},
      {"properties",
       {{"name", {{"type", "string"}, {"description", std::string("optional; ") + kNameRule}}}}},
      {"additionalProperties", false}};
  tool.output_schema = {
      {"type", "object"},
      {"properties",
       {{"snapshot", SummarySchema()},
        {"files_hashed", {{"type", "integer"}}},
        {"new_object_bytes", {{"type", "integer"}}},
        {"quota_used_bytes", {{"type", "integer"}}},
        {"quota_bytes", {{"type", "integer"}, {"description", "0: no quota"}}},
        {"quota_left_bytes", {{"type", "integer"}}},
        {"notes", Strings()}}},
      {"required", {"snapshot", "new_object_bytes", "quota_used_bytes", "quota_bytes"}}};
  tool.annotations = Annotations(tool.title, false, false);
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    ArgReader reader(json, {"name"});
    const std::string name = reader.OptionalString("name").value_or("");
    if (Status st = reader.Finish(); !st) return mcp::ToolResult::Error(st.error().message);
    if (json.contains("name")) {
      if (std::string bad = SnapshotNameError(name); !bad.empty())
        return mcp::ToolResult::Error(bad + ".");
    }
    return Create(env, ctx, name);
  };
  return tool;
}

mcp::Tool MakeSnapshotListTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "snapshot_list";
  tool.title = "List this tenant's snapshots";
  tool.description = std::string(
                         "Lists the snapshots of this session's tenant, oldest first: id, name, "
                         "creation time, files and the storage each counts against the tenant's "
                         "snapshot quota. ") +
                     kWhatSnapshotsHold;
  tool.input_schema = {
      {"type", "object"}, {"properties", mcp::Json::object()}, {"additionalProperties", false}};
  tool.output_schema = {{"type", "object"},
                        {"properties",
                         {{"snapshots", {{"type", "array"}, {"items", SummarySchema()}}},
                          {"count", {{"type", "integer"}}},
                          {"total_stored_bytes", {{"type", "integer"}}}}},
                        {"required", {"snapshots", "count", "total_stored_bytes"}}};
  tool.annotations = Annotations(tool.title, true, false);
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    if (Status st = ArgReader(json, {}).Finish(); !st)
      return mcp::ToolResult::Error(st.error().message);
    return List(env, ctx);
  };
  return tool;
}

mcp::Tool MakeSnapshotRestoreTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "snapshot_restore";
  tool.title = "Restore a snapshot's files into this session";
  tool.description =
      std::string(
          "Makes this session's files the snapshot's: every change since it (and "
          "every file it does not hold) is gone. Running programs, background ones "
          "too, are ended first; the result says how many. ") +
      kWhatSnapshotsHold +
      "Restoring a snapshot made in another session of the same tenant forks it: both "
      "sessions start from its files and their changes stay each in its own session. The "
      "snapshot is checked against its digest first; a damaged one is refused and nothing "
      "changes.";
  tool.input_schema = SnapshotArgSchema();
  tool.output_schema = {{"type", "object"},
                        {"properties",
                         {{"snapshot", SummarySchema()},
                          {"programs_ended", {{"type", "integer"}}},
                          {"notes", Strings()}}},
                        {"required", {"snapshot", "programs_ended"}}};
  tool.annotations = Annotations(tool.title, false, true);
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    auto which = ReadSnapshotArg(json);
    if (!which) return mcp::ToolResult::Error(which.error().message);
    return Restore(env, ctx, *which);
  };
  return tool;
}

mcp::Tool MakeSnapshotDeleteTool(const ToolEnv& env) {
  mcp::Tool tool;
  tool.name = "snapshot_delete";
  tool.title = "Delete a snapshot";
  tool.description =
      std::string(
          "Deletes one of this tenant's snapshots (by id or name) and frees the "
          "storage only it used. Sessions already restored from it keep their files. ") +
      kWhatSnapshotsHold;
  tool.input_schema = SnapshotArgSchema();
  tool.output_schema = {{"type", "object"},
                        {"properties", {{"deleted", {{"type", "string"}}}}},
                        {"required", {"deleted"}}};
  tool.annotations = Annotations(tool.title, false, true);
  tool.handler = [&env](const mcp::Json& json, mcp::Context& ctx) -> mcp::ToolResult {
    auto which = ReadSnapshotArg(json);
    if (!which) return mcp::ToolResult::Error(which.error().message);
    return Delete(env, ctx, *which);
  };
  return tool;
}

}  // namespace mcpcell::tools
