#include "tools/process_output.h"

#include "base/utf8.h"

namespace mcpcell::tools {

size_t IncompleteUtf8Tail(std::string_view bytes) {
  // Look back over at most 3 continuation bytes to the lead byte of the last character.
  for (size_t back = 1; back <= 4 && back <= bytes.size(); ++back) {
    unsigned char c = static_cast<unsigned char>(bytes[bytes.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte
    size_t need = c < 0x80             ? 1
                  : (c & 0xE0) == 0xC0 ? 2
                  : (c & 0xF0) == 0xE0 ? 3
                  : (c & 0xF8) == 0xF0 ? 4
                                       : 1;  // invalid lead: leave it
    return back < need ? back : 0;
  }
  return 0;
}

Result<OutputWindow> ReadProcessOutput(const sandbox::CellLease& lease, const std::string& path,
                                       uint64_t cursor, size_t keep, const std::string& id) {
  auto stat = lease.Stat(path, /*follow_symlinks=*/false);
  if (!stat)
    return Error::Msg("the output of " + id + " (" + path + ") cannot be read: " +
                      stat.error().message + " (was it deleted, or the workspace reset?)");
  OutputWindow w;
  w.file_size = stat->size;
  if (cursor > w.file_size)
    return Error::Msg("arguments.cursor: " + std::to_string(cursor) + " is past the end of " + id +
                      "'s output (" + std::to_string(w.file_size) +
                      " bytes so far); pass a next_cursor from an earlier result, or 0 to read "
                      "from the start");
  const uint64_t fresh = w.file_size - cursor;
  if (fresh <= keep) {
    auto all = lease.ReadFileRange(path, cursor, fresh);
    if (!all) return all.error().Wrap("read " + path);
    std::string& data = all->data;
    data.resize(data.size() - IncompleteUtf8Tail(data));
    w.next_cursor = cursor + data.size();
    w.text = ToValidUtf8(data);
    return w;
  }
  const uint64_t half = keep / 2;
  auto head = lease.ReadFileRange(path, cursor, half);
  if (!head) return head.error().Wrap("read " + path);
  auto tail = lease.ReadFileRange(path, w.file_size - half, half);
  if (!tail) return tail.error().Wrap("read " + path);
  std::string& end = tail->data;
  end.resize(end.size() - IncompleteUtf8Tail(end));
  w.next_cursor = w.file_size - half + end.size();
  w.left_out = w.file_size - half - (cursor + head->data.size());
  w.text = ToValidUtf8(head->data) + "\n[mcpcell: " + std::to_string(w.left_out) +
           " bytes left out here; read them with process action=output cursor=" +
           std::to_string(cursor + head->data.size()) + ", or read_file " + path + "]\n" +
           ToValidUtf8(end);
  return w;
}

}  // namespace mcpcell::tools
