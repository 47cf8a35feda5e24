// CellChannel's file requests (read, write, list, stat, mkdir, remove, rename) and its
// small requests (signal, stats): each one or more Calls over the control socket, with
// replies checked against what was asked. See cell_channel.h.
#include <algorithm>

#include "sandbox/cell_channel.h"
#include "sandbox/cell_channel_internal.h"

namespace mcpcell::sandbox {

using cell_channel_internal::As;

Status CellChannel::SignalExec(uint64_t exec_id, int signo) {
  return ExpectOk(control::SignalRequest{NextId(), exec_id, signo});
}

Result<control::StatsReply> CellChannel::Stats() {
  return As<control::StatsReply>(Call(control::StatsRequest{NextId()}), "StatsRequest");
}

Result<FileWindow> CellChannel::ReadFileRange(const std::string& path, uint64_t offset,
                                              uint64_t max_bytes) {
  FileWindow w;
  for (;;) {
    const uint64_t remaining = max_bytes - w.data.size();
    const uint32_t ask = static_cast<uint32_t>(
        std::min<uint64_t>(control::kMaxFileChunkBytes, std::max<uint64_t>(remaining, 1)));
    auto chunk = As<control::ReadFileReply>(
        Call(control::ReadFileRequest{NextId(), path, offset + w.data.size(), ask}),
        "ReadFileRequest");
    if (!chunk.ok()) return chunk.error();
    if (chunk->data.size() > ask) return Error::Msg("ReadFileReply: more data than asked for");
    w.file_size = chunk->file_size;
    if (w.data.size() + chunk->data.size() > max_bytes) {  // only when max_bytes == 0
      w.eof = false;
      return w;
    }
    w.data += chunk->data;
    w.eof = chunk->eof || chunk->data.empty();
    if (w.eof || w.data.size() >= max_bytes) {
      w.eof = w.eof || offset + w.data.size() >= w.file_size;
      return w;
    }
  }
}

Result<std::string> CellChannel::ReadFile(const std::string& path, uint64_t max_bytes) {
  std::string out;
  for (;;) {
    // One byte more than the caller's limit, so an oversized file shows as such.
    const uint64_t remaining = max_bytes - out.size();
    const uint32_t ask = remaining >= control::kMaxFileChunkBytes
                             ? control::kMaxFileChunkBytes
                             : static_cast<uint32_t>(remaining + 1);
    auto chunk = As<control::ReadFileReply>(
        Call(control::ReadFileRequest{NextId(), path, out.size(), ask}), "ReadFileRequest");
    if (!chunk.ok()) return chunk.error();
    if (chunk->data.size() > ask) return Error::Msg("ReadFileReply: more data than asked for");
    out += chunk->data;
    if (out.size() > max_bytes) {
      return Error::Msg("\"" + path + "\": file is " + std::to_string(chunk->file_size) +
                        " bytes, over the limit of " + std::to_string(max_bytes));
    }
    if (chunk->eof || chunk->data.empty()) return out;
  }
}

Status CellChannel::WriteFile(const std::string& path, std::string_view data, uint32_t mode) {
  size_t offset = 0;
  do {
    size_t n = std::min<size_t>(control::kMaxFileChunkBytes, data.size() - offset);
    uint32_t flags = offset == 0 ? control::kWriteCreate | control::kWriteTruncate : 0;
    if (Status s = ExpectOk(control::WriteFileRequest{NextId(), path, offset, flags, mode,
                                                      std::string(data.substr(offset, n))});
        !s.ok()) {
      return s;
    }
    offset += n;
  } while (offset < data.size());
  return Ok();
}

// Sends `data` in frame-sized WriteFileRequests: the first with `first_flags`, the rest
// with `later_flags`, each at `offset` + what went before (ignored by init for appends).
Status CellChannel::WriteChunks(const std::string& path, uint64_t offset, std::string_view data,
                                uint32_t first_flags, uint32_t later_flags, uint32_t mode) {
  size_t done = 0;
  do {
    size_t n = std::min<size_t>(control::kMaxFileChunkBytes, data.size() - done);
    const uint32_t flags = done == 0 ? first_flags : later_flags;
    if (Status s = ExpectOk(control::WriteFileRequest{NextId(), path, offset + done, flags, mode,
                                                      std::string(data.substr(done, n))});
        !s.ok()) {
      return s;
    }
    done += n;
  } while (done < data.size());
  return Ok();
}

Status CellChannel::WriteFileAt(const std::string& path, uint64_t offset, std::string_view data,
                                bool truncate, uint32_t mode) {
  const uint32_t first =
      control::kWriteCreate | (truncate ? uint32_t{control::kWriteTruncate} : 0u);
  return WriteChunks(path, offset, data, first, control::kWriteCreate, mode);
}

Status CellChannel::WriteNewFile(const std::string& path, std::string_view data, uint32_t mode) {
  return WriteChunks(path, 0, data, control::kWriteCreate | control::kWriteExclusive, 0, mode);
}

Status CellChannel::AppendFile(const std::string& path, std::string_view data, uint32_t mode) {
  const uint32_t append = control::kWriteCreate | control::kWriteAppend;
  return WriteChunks(path, 0, data, append, append, mode);
}

Result<std::vector<control::DirEntry>> CellChannel::ListDir(const std::string& path,
                                                            size_t max_entries) {
  std::vector<control::DirEntry> out;
  uint64_t cookie = 0;
  do {
    auto page = As<control::ListDirReply>(Call(control::ListDirRequest{NextId(), path, cookie}),
                                          "ListDirRequest");
    if (!page.ok()) return page.error();
    if (page->next_cookie != 0 && (page->entries.empty() || page->next_cookie == cookie)) {
      return Error::Msg("ListDirReply: listing of \"" + path + "\" makes no progress");
    }
    for (auto& e : page->entries) out.push_back(std::move(e));
    if (out.size() > max_entries) {
      return Error::Msg("\"" + path + "\": more than " + std::to_string(max_entries) + " entries");
    }
    cookie = page->next_cookie;
  } while (cookie != 0);
  return out;
}

Result<control::FileStat> CellChannel::Stat(const std::string& path, bool follow_symlinks) {
  auto r = As<control::StatReply>(
      Call(control::StatRequest{NextId(), path, static_cast<uint8_t>(follow_symlinks)}),
      "StatRequest");
  if (!r.ok()) return r.error();
  return r->stat;
}

Status CellChannel::Mkdir(const std::string& path, uint32_t mode, bool parents) {
  return ExpectOk(control::MkdirRequest{NextId(), path, mode, static_cast<uint8_t>(parents)});
}

Status CellChannel::Remove(const std::string& path, bool recursive) {
  return ExpectOk(control::RemoveRequest{NextId(), path, static_cast<uint8_t>(recursive)});
}

Status CellChannel::Rename(const std::string& from, const std::string& to, bool no_replace) {
  return ExpectOk(control::RenameRequest{NextId(), from, to, static_cast<uint8_t>(no_replace)});
}

}  // namespace mcpcell::sandbox
