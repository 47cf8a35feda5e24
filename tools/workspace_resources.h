// Workspace resources (issue 32): a session's cell workspace as MCP resources.
//
//   resources/list   pages through the regular files under /workspace of the calling
//                    session's cell (ServerOptions::session_resources: WorkspaceResources),
//                    each as cell:///workspace/<path> with its size and a MIME type guessed
//                    from its name. A session without a live cell (none made yet, or
//                    hibernated) lists nothing: listing never makes or revives a cell.
//   resources/read   of cell:///workspace/{+path} (MakeWorkspaceResourceTemplate) reads a
//                    byte window of one file in the cell, as the sandbox user, through the
//                    same file operations read_file uses (making the cell as any call
//                    does): `?offset=N&length=M` (default 0 and kDefaultWindowBytes, at
//                    most the server's read cap). Text comes as text, anything else as a
//                    base64 blob; the content's uri states the window read and the file's
//                    size: cell:///workspace/a.log?offset=0&length=4096#bytes=0-4096/9000.
//   resource_link    content items (WorkspaceResourceLink) that tools return for outputs
//                    saved in the cell: the reader above opens them.
//
// Paths that leave /workspace (`..`, a symlink on the way) are refused with an error
// naming the path. Both need the session's tenant to enable read_file (the same reach).
// The paging (ListWorkspacePage) and the URI grammar are pure functions over a directory
// lister, so they are tested without a cell.
// Threading: everything here is stateless; the hooks run on any handler thread.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "mcp/server.h"
#include "sandbox/control/protocol.h"
#include "tools/tool_env.h"

namespace mcpcell::tools {

inline constexpr const char* kWorkspaceUriPrefix = "cell:///workspace";
// A read without `length` gets this much; `length` may ask up to the server's read cap.
inline constexpr uint64_t kDefaultWindowBytes = 1 << 20;
// Directories below /workspace deeper than this are not listed (not descended).
inline constexpr size_t kMaxListedDepth = 16;
// Directory listings one resources/list page may make. With kMaxListedDepth at most a
// quarter of it, a page always gets past at least one entry, so paging ends.
inline constexpr size_t kMaxListingsPerPage = 64;

// cell:///workspace/... for the cell path `path` (absolute, under /workspace): each
// segment percent-encoded (RFC 3986 unreserved characters stay).
std::string WorkspaceUri(std::string_view path);

// What a cell:///workspace URI asks for.
struct WorkspaceWindow {
  std::string path;  // absolute cell path, normalized ("/workspace/a/b.txt")
  uint64_t offset = 0;
  uint64_t length = kDefaultWindowBytes;
};
// Parses `uri` strictly: the prefix, percent-escapes, no NUL, no `.`/`..` segments, only
// `offset` and `length` (decimal; 1 <= length <= max_length) in the query; a fragment is
// ignored (the bounds a read states). Errors name the URI and the problem.
Result<WorkspaceWindow> ParseWorkspaceUri(const std::string& uri, uint64_t max_length);

// The uri a read answers with: the window read and the file's size.
std::string WindowUri(const WorkspaceWindow& window, uint64_t read, uint64_t file_size);

// How many bytes of a window go out as text: all of `data` when it is UTF-8 without NUL
// bytes, less a character cut short by the window's end (left for the next window) unless
// the window ends the file; nullopt for a blob (also for types that are bytes whatever they
// hold: images, archives, PDF).
std::optional<size_t> WindowTextLength(std::string_view data, bool at_file_end,
                                       const std::string& mime_type);

// A MIME type for a file name (by extension; application/octet-stream when unknown).
std::string GuessMimeType(std::string_view name);

// One page of the workspace's regular files, in depth-first order of names (byte order).
// `cursor` is where the previous page stopped ("" = start): a path relative to
// /workspace, so a page stays right while files come and go. `list` lists a directory (an
// absolute cell path), entries lstat'ed. Symlinks, devices and the like are not listed.
struct WorkspaceFile {
  std::string path;  // absolute cell path
  uint64_t size = 0;
};
struct WorkspacePage {
  std::vector<WorkspaceFile> files;
  std::string next_cursor;  // "" = no more
};
using DirLister =
    std::function<Result<std::vector<sandbox::control::DirEntry>>(const std::string&)>;
Result<WorkspacePage> ListWorkspacePage(const DirLister& list, const std::string& cursor,
                                        size_t limit);

// ServerOptions::session_resources for `env` (the calling session's workspace).
std::function<mcp::ServerOptions::SessionResourcePage(mcp::Context&, const std::string&, size_t)>
WorkspaceResources(const ToolEnv& env);
// The cell:///workspace/{+path} template whose reader reads windows. `env` must outlive it.
mcp::ResourceTemplate MakeWorkspaceResourceTemplate(const ToolEnv& env);

// A resource_link content item for the cell file `path` (under /workspace).
mcp::Json WorkspaceResourceLink(const std::string& path, const std::string& mime_type,
                                uint64_t size, const std::string& description = "");

}  // namespace mcpcell::tools
