// The cell-facing half of workspace_resources.h: resources/list's hook over the session's
// live cell, and the cell:///workspace/{+path} reader (byte windows, text or blob).
#include <algorithm>
#include <cerrno>
#include <optional>

#include "base/base64.h"
#include "base/utf8.h"
#include "sandbox/cell_channel.h"
#include "tools/audit_events.h"
#include "tools/redaction.h"
#include "tools/workspace_resources.h"

namespace mcpcell::tools {
namespace {

using sandbox::control::FileType;

// Whether the calling session may reach its workspace through resources: its tenant has a
// config and enables read_file (the same reach as that tool).
bool MayReadWorkspace(const ToolEnv& env, const mcp::Context& ctx) {
  const std::string& tenant = ctx.session().tenant();
  return env.ConfigFor(tenant) && env.ToolEnabled(tenant, "read_file");
}

// An RPC error; its text made valid UTF-8 (a decoded path or a listed name may be any bytes,
// and JSON text may not).
mcp::RpcException Refusal(int code, const std::string& message, mcp::Json data = nullptr) {
  return mcp::RpcException(code, ToValidUtf8(message), std::move(data));
}

// The first text of an isError tool result (AcquireCell's refusal), for an RPC error.
std::string ErrorText(const mcp::ToolResult& r) {
  if (r.content.is_array() && !r.content.empty() && r.content[0].contains("text"))
    return r.content[0]["text"].get<std::string>();
  return "the session's cell is not available";
}

// Refuses a path that would leave /workspace: every directory on the way must be a real
// directory (a symlink could point anywhere in the cell) and the file a regular file. The
// cell's own files are the sandbox user's anyway (run_command reads them): this keeps the
// resource names honest, and a swap between check and read reaches nothing more.
uint64_t CheckInsideWorkspace(const sandbox::CellLease& lease, const std::string& uri,
                              const std::string& path) {
  size_t pos = std::string("/workspace/").size();
  while (true) {
    const size_t slash = path.find('/', pos);
    const std::string prefix = path.substr(0, slash);
    auto st = lease.Stat(prefix, /*follow_symlinks=*/false);
    if (!st) {
      int code = st.error().err == ENOENT || st.error().err == ENOTDIR ? mcp::kResourceNotFound
                                                                       : mcp::kInternalError;
      throw Refusal(code, uri + ": " + st.error().message, {{"uri", uri}});
    }
    if (st->type == FileType::kSymlink)
      throw Refusal(mcp::kInvalidParams,
                    uri + ": " + prefix +
                        " is a symlink; a workspace resource is read without following "
                        "links, so it cannot leave /workspace (read the target's own "
                        "path, or use read_file)",
                    {{"uri", uri}});
    if (slash == std::string::npos) {
      if (st->type != FileType::kRegular)
        throw Refusal(mcp::kInvalidParams,
                      uri + ": not a regular file" +
                          (st->type == FileType::kDirectory
                               ? " but a directory (resources/list lists its files)"
                               : ""),
                      {{"uri", uri}});
      return st->size;
    }
    if (st->type != FileType::kDirectory)
      throw Refusal(mcp::kResourceNotFound, uri + ": " + prefix + " is not a directory",
                    {{"uri", uri}});
    pos = slash + 1;
  }
}

std::vector<mcp::ResourceContents> ReadWindow(const ToolEnv& env, mcp::Context& ctx,
                                              const std::string& uri) {
  if (!MayReadWorkspace(env, ctx))
    throw Refusal(mcp::kInvalidParams,
                  uri +
                      ": this session's policy does not enable read_file "
                      "(tools.enabled), which workspace resources need",
                  {{"uri", uri}});
  auto window = ParseWorkspaceUri(uri, env.config.max_read_bytes);
  if (!window) throw Refusal(mcp::kInvalidParams, window.error().message, {{"uri", uri}});
  LeaseOrError acquired = AcquireCell(env, ctx);
  if (!acquired.lease) throw Refusal(mcp::kInternalError, ErrorText(acquired.error));
  const sandbox::CellLease& lease = *acquired.lease;
  const uint64_t size = CheckInsideWorkspace(lease, uri, window->path);
  if (window->offset > size)
    throw Refusal(mcp::kInvalidParams,
                  uri + ": offset " + std::to_string(window->offset) +
                      " is past the end; the file has " + std::to_string(size) + " bytes",
                  {{"uri", uri}});
  auto read = lease.ReadFileRange(window->path, window->offset, window->length);
  mcp::ToolResult audited;  // what AuditFileCall reads: ok/error and the bytes
  if (!read) {
    audited.is_error = true;
    AuditFileCall(env, ctx, "read", window->path, audited, "bytes");
    throw Refusal(mcp::kInternalError, uri + ": " + read.error().message, {{"uri", uri}});
  }
  const bool at_end = window->offset + read->data.size() >= read->file_size;
  mcp::ResourceContents c;
  c.mime_type = GuessMimeType(window->path);
  const std::optional<size_t> text = WindowTextLength(read->data, at_end, c.mime_type);
  if (text) read->data.resize(*text);
  const uint64_t n = read->data.size();  // the window's bytes in the file, before redaction
  // The session's secret values never leave as they are (tools/redaction.h), as in every
  // tool result: redacted in the raw bytes, so a blob stays valid base64.
  if (auto redactor = MakeRedactor(env.secret_values, CallKey(ctx)))
    read->data = redactor->Redact(read->data);
  if (text) {
    c.text = std::move(read->data);
    if (c.mime_type == "application/octet-stream") c.mime_type = "text/plain";
  } else {
    c.blob = Base64Encode(read->data);
  }
  c.uri = WindowUri(*window, n, read->file_size);
  audited.structured_content = {{"bytes", n}};
  AuditFileCall(env, ctx, "read", window->path, audited, "bytes");
  return {std::move(c)};
}

}  // namespace

std::function<mcp::ServerOptions::SessionResourcePage(mcp::Context&, const std::string&, size_t)>
WorkspaceResources(const ToolEnv& env) {
  return [&env](mcp::Context& ctx, const std::string& cursor, size_t limit) {
    mcp::ServerOptions::SessionResourcePage page;
    if (!MayReadWorkspace(env, ctx)) return page;
    // Listing never makes a cell (nor revives a hibernated one): no live cell, no files.
    auto session = SessionCells(env, ctx);
    if (!session || !*session || !(*session)->Info().cell_alive) return page;
    auto lease = (*session)->Acquire();
    if (!lease) return page;  // closed or expired meanwhile: nothing to list
    const size_t max_entries = env.config.max_list_entries;
    DirLister list = [&](const std::string& dir) { return lease->ListDir(dir, max_entries); };
    auto files = ListWorkspacePage(list, cursor, limit);
    if (!files) {
      int code =
          files.error().message.rfind("cursor", 0) == 0 ? mcp::kInvalidParams : mcp::kInternalError;
      throw Refusal(code, "resources/list of the workspace: " + files.error().message);
    }
    for (const WorkspaceFile& f : files->files) {
      page.resources.push_back(
          {.uri = WorkspaceUri(f.path),
           // A name may hold any bytes; JSON text must be UTF-8 (the uri is exact).
           .name = ToValidUtf8(f.path.substr(std::string("/workspace/").size())),
           .mime_type = GuessMimeType(f.path),
           .size = static_cast<int64_t>(f.size)});
    }
    page.next_cursor = std::move(files->next_cursor);
    return page;
  };
}

mcp::ResourceTemplate MakeWorkspaceResourceTemplate(const ToolEnv& env) {
  mcp::ResourceTemplate t;
  t.uri_template = std::string(kWorkspaceUriPrefix) + "/{+path}";
  t.name = "workspace";
  t.title = "Files of this session's sandbox workspace";
  t.description =
      "A file under /workspace of this session's sandbox, read in byte windows: append "
      "?offset=N&length=M (default 0 and 1 MiB, at most the server's read cap). Text comes as "
      "text, other bytes as a base64 blob; the answer's uri states the window and the file's "
      "size (#bytes=FROM-TO/SIZE). resources/list lists the workspace's files only while the "
      "session has a live sandbox: it never starts one. Symlinks and '..' are refused.";
  t.read = [&env](const std::string& uri, const std::map<std::string, std::string>&,
                  mcp::Context& ctx) { return ReadWindow(env, ctx, uri); };
  return t;
}

}  // namespace mcpcell::tools
