// The workspace as MCP resources: the URI grammar, the paged walk, the list hook and the
// windowed reader (workspace_resources.h).
#include "tools/workspace_resources.h"

#include <algorithm>
#include <charconv>

#include "base/base64.h"
#include "base/utf8.h"
#include "sandbox/cell_channel.h"
#include "tools/audit_events.h"

namespace mcpcell::tools {
namespace {

using sandbox::control::DirEntry;
using sandbox::control::FileType;

constexpr std::string_view kWorkspace = "/workspace";

bool Unreserved(unsigned char c) {
  return std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~';
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// The segments of a relative path: none empty, `.` or `..`, no NUL. `what` names it in errors.
Result<std::vector<std::string>> Segments(std::string_view rel, const std::string& what) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos <= rel.size()) {
    size_t slash = rel.find('/', pos);
    if (slash == std::string_view::npos) slash = rel.size();
    std::string seg(rel.substr(pos, slash - pos));
    if (seg.empty()) return Error::Msg(what + ": empty path segment (a doubled or trailing '/')");
    if (seg == "." || seg == "..")
      return Error::Msg(what + ": \"" + seg +
                        "\" segments are refused: a resource names a file inside /workspace");
    if (seg.find('\0') != std::string::npos) return Error::Msg(what + ": contains a NUL byte");
    out.push_back(std::move(seg));
    pos = slash + 1;
  }
  return out;
}

Result<uint64_t> QueryNumber(const std::string& uri, std::string_view key, std::string_view value) {
  uint64_t n = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (value.empty() || ec != std::errc() || end != value.data() + value.size())
    return Error::Msg(uri + ": " + std::string(key) + "=\"" + std::string(value) +
                      "\" is not a decimal byte count");
  return n;
}

std::string JoinRel(const std::string& rel, const std::string& name) {
  return rel.empty() ? name : rel + "/" + name;
}
std::string CellPath(const std::string& rel) {
  return rel.empty() ? std::string(kWorkspace) : std::string(kWorkspace) + "/" + rel;
}

// The depth-first walk behind ListWorkspacePage. `done_` is the last path (relative) whose
// entry, and subtree for a directory, is behind the page: the next page's cursor.
class WorkspaceWalk {
 public:
  WorkspaceWalk(const DirLister& list, size_t limit, std::string cursor)
      : list_(list), limit_(limit), done_(std::move(cursor)) {}

  // Walks directory `rel` at `depth`; `after` (from `index` on) is the cursor's rest below
  // it, or nullptr when everything in it is new.
  Status Walk(const std::string& rel, size_t depth, const std::vector<std::string>* after,
              size_t index) {
    if (listings_ >= kMaxListingsPerPage) return Stop();
    ++listings_;
    auto entries = list_(CellPath(rel));
    if (!entries) {
      if (rel.empty()) return Error::Msg("listing /workspace: " + entries.error().message);
      done_ = rel;  // an unreadable subdirectory is passed over, not retried forever
      return {};
    }
    std::sort(entries->begin(), entries->end(),
              [](const DirEntry& a, const DirEntry& b) { return a.name < b.name; });
    for (const DirEntry& e : *entries) {
      if (after && index < after->size()) {
        const std::string& at = (*after)[index];
        if (e.name < at) continue;
        if (e.name == at) {
          // The cursor's own entry; a directory on its way is walked past the cursor's rest.
          if (e.stat.type == FileType::kDirectory && index + 1 < after->size() &&
              depth + 1 < kMaxListedDepth) {
            if (Status st = Walk(JoinRel(rel, e.name), depth + 1, after, index + 1); !st) return st;
            if (stopped_) return {};
          }
          continue;
        }
        after = nullptr;  // past the cursor: everything from here on is new
      }
      if (Status st = Visit(rel, depth, e); !st) return st;
      if (stopped_) return {};
    }
    return {};
  }

  WorkspacePage Finish() {
    if (stopped_) page_.next_cursor = done_;
    return std::move(page_);
  }

 private:
  Status Visit(const std::string& rel, size_t depth, const DirEntry& e) {
    const std::string path = JoinRel(rel, e.name);
    if (e.stat.type == FileType::kRegular) {
      if (page_.files.size() >= limit_) return Stop();
      page_.files.push_back({CellPath(path), e.stat.size});
    } else if (e.stat.type == FileType::kDirectory && depth + 1 < kMaxListedDepth) {
      if (Status st = Walk(path, depth + 1, nullptr, 0); !st) return st;
      if (stopped_) return {};
    }
    done_ = path;
    return {};
  }
  Status Stop() {
    stopped_ = true;
    return {};
  }

  const DirLister& list_;
  const size_t limit_;
  size_t listings_ = 0;
  bool stopped_ = false;
  std::string done_;
  WorkspacePage page_;
};

// How many bytes at the end of `data` are a UTF-8 character cut short (a lead byte whose
// continuation bytes are not all there); 0 when none.
size_t CutCharacterBytes(std::string_view data) {
  for (size_t back = 1; back <= 3 && back <= data.size(); ++back) {
    const auto c = static_cast<unsigned char>(data[data.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // a continuation byte: look further back
    const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
    return need > back ? back : 0;
  }
  return 0;
}

// Types that are bytes whatever their first bytes look like.
bool BinaryMimeType(const std::string& mime) {
  return mime.rfind("image/", 0) == 0 || mime == "application/gzip" || mime == "application/zip" ||
         mime == "application/zstd" || mime == "application/x-tar" || mime == "application/pdf";
}

}  // namespace

std::optional<size_t> WindowTextLength(std::string_view data, bool at_file_end,
                                       const std::string& mime_type) {
  if (BinaryMimeType(mime_type)) return std::nullopt;
  const size_t cut = at_file_end ? 0 : CutCharacterBytes(data);
  std::string_view part = data.substr(0, data.size() - cut);
  if (cut == data.size() && cut > 0) return std::nullopt;  // nothing but a cut character
  if (part.find('\0') == std::string_view::npos && ToValidUtf8(part) == part) return part.size();
  return std::nullopt;
}

std::string WorkspaceUri(std::string_view path) {
  std::string out = kWorkspaceUriPrefix;
  std::string_view rest = path.substr(std::min(path.size(), kWorkspace.size()));
  static constexpr char kHex[] = "0123456789ABCDEF";
  for (unsigned char c : rest) {
    if (Unreserved(c) || c == '/') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

Result<WorkspaceWindow> ParseWorkspaceUri(const std::string& uri, uint64_t max_length) {
  const std::string_view prefix = kWorkspaceUriPrefix;
  std::string_view rest(uri);
  if (rest.substr(0, prefix.size()) != prefix)
    return Error::Msg(uri + ": not a workspace resource (cell:///workspace/<path>)");
  rest.remove_prefix(prefix.size());
  rest = rest.substr(0, rest.find('#'));  // the bounds a read states; not part of the ask
  const size_t q = rest.find('?');
  std::string_view query = q == std::string_view::npos ? "" : rest.substr(q + 1);
  std::string_view encoded = rest.substr(0, q);
  if (encoded.empty() || encoded == "/")
    return Error::Msg(uri + ": names the workspace itself; name a file under it");
  if (encoded[0] != '/') return Error::Msg(uri + ": expected '/' after cell:///workspace");
  std::string decoded;
  for (size_t i = 1; i < encoded.size(); ++i) {
    if (encoded[i] != '%') {
      decoded += encoded[i];
      continue;
    }
    int hi = i + 2 < encoded.size() ? HexValue(encoded[i + 1]) : -1;
    int lo = i + 2 < encoded.size() ? HexValue(encoded[i + 2]) : -1;
    if (hi < 0 || lo < 0)
      return Error::Msg(uri + ": bad percent-escape at offset " +
                        std::to_string(prefix.size() + i) + " (want %XX)");
    decoded += static_cast<char>(hi * 16 + lo);
    i += 2;
  }
  auto segments = Segments(decoded, uri);
  if (!segments) return segments.error();
  WorkspaceWindow w;
  w.path = CellPath(decoded);
  bool have_offset = false, have_length = false;
  while (!query.empty()) {
    std::string_view item = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), item.size() + 1));
    const size_t eq = item.find('=');
    std::string_view key = item.substr(0, eq);
    std::string_view value = eq == std::string_view::npos ? "" : item.substr(eq + 1);
    bool* seen = key == "offset" ? &have_offset : key == "length" ? &have_length : nullptr;
    if (!seen)
      return Error::Msg(uri + ": unknown query parameter \"" + std::string(key) +
                        "\"; only offset and length (bytes) are read");
    if (*seen) return Error::Msg(uri + ": " + std::string(key) + " is given twice");
    *seen = true;
    auto n = QueryNumber(uri, key, value);
    if (!n) return n.error();
    (key == "offset" ? w.offset : w.length) = *n;
  }
  if (!have_length) w.length = std::min<uint64_t>(kDefaultWindowBytes, max_length);
  if (w.length == 0 || w.length > max_length)
    return Error::Msg(uri + ": length must be 1 to " + std::to_string(max_length) +
                      " bytes (the server's read cap); read larger files in windows");
  return w;
}

std::string WindowUri(const WorkspaceWindow& window, uint64_t read, uint64_t file_size) {
  const std::string from = std::to_string(window.offset);
  return WorkspaceUri(window.path) + "?offset=" + from + "&length=" + std::to_string(read) +
         "#bytes=" + from + "-" + std::to_string(window.offset + read) + "/" +
         std::to_string(file_size);
}

std::string GuessMimeType(std::string_view name) {
  static const std::pair<const char*, const char*> kTypes[] = {
      {".txt", "text/plain"},
      {".log", "text/plain"},
      {".stdout", "text/plain"},
      {".stderr", "text/plain"},
      {".md", "text/markdown"},
      {".csv", "text/csv"},
      {".html", "text/html"},
      {".css", "text/css"},
      {".xml", "application/xml"},
      {".json", "application/json"},
      {".yaml", "application/yaml"},
      {".yml", "application/yaml"},
      {".toml", "application/toml"},
      {".py", "text/x-python"},
      {".js", "text/javascript"},
      {".mjs", "text/javascript"},
      {".ts", "text/x-typescript"},
      {".sh", "text/x-shellscript"},
      {".c", "text/x-c"},
      {".h", "text/x-c"},
      {".cc", "text/x-c++"},
      {".cpp", "text/x-c++"},
      {".png", "image/png"},
      {".jpg", "image/jpeg"},
      {".jpeg", "image/jpeg"},
      {".gif", "image/gif"},
      {".webp", "image/webp"},
      {".svg", "image/svg+xml"},
      {".pdf", "application/pdf"},
      {".zip", "application/zip"},
      {".gz", "application/gzip"},
      {".tgz", "application/gzip"},
      {".tar", "application/x-tar"},
      {".zst", "application/zstd"},
  };
  const size_t dot = name.rfind('.');
  if (dot != std::string_view::npos && name.find('/', dot) == std::string_view::npos) {
    std::string ext(name.substr(dot));
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (const auto& [suffix, type] : kTypes)
      if (ext == suffix) return type;
  }
  return "application/octet-stream";
}

Result<WorkspacePage> ListWorkspacePage(const DirLister& list, const std::string& cursor,
                                        size_t limit) {
  std::vector<std::string> after;
  if (!cursor.empty()) {
    auto segments = Segments(cursor, "cursor \"" + cursor + "\"");
    if (!segments) return segments.error();
    after = std::move(segments).value();
  }
  WorkspaceWalk walk(list, std::max<size_t>(limit, 1), cursor);
  if (Status st = walk.Walk("", 0, after.empty() ? nullptr : &after, 0); !st) return st.error();
  return walk.Finish();
}

mcp::Json WorkspaceResourceLink(const std::string& path, const std::string& mime_type,
                                uint64_t size, const std::string& description) {
  mcp::Json link = {{"type", "resource_link"},
                    {"uri", WorkspaceUri(path)},
                    {"name", path.substr(path.rfind('/') + 1)},
                    {"mimeType", mime_type},
                    {"size", size}};
  if (!description.empty()) link["description"] = description;
  return link;
}

}  // namespace mcpcell::tools
