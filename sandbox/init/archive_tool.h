// Cell init's binary as the archive helper of upload_archive and download_archive. The
// server starts it in the cell like any exec (argv[0] "/proc/self/exe": an exec'ing child
// of init is still init's image, so the binary need not be in the cell's filesystem), and
// it runs as the sandbox user under the cell's seccomp filter, rlimits and cgroup; libarchive
// never parses an archive in the server.
//
//   /proc/self/exe unpack DIR MAX_BYTES MAX_RATIO MAX_ENTRIES MAX_INPUT
//       stdin: the archive (at most MAX_INPUT bytes); DIR made as needed (archive_unpack.h).
//       stdout: one JSON object per line, per entry {"kind","path","size"[,"reason"]}, then
//       {"done":true,"entries","refused","bytes","stopped"}; or {"error":...}, exit 1.
//   /proc/self/exe pack DIR MAX_BYTES
//       stdout: DIR as tar.gz (archive_pack.h); stderr's last line
//       {"done":true,"entries","bytes","skipped":[...]} or {"error":...} with exit 1.
// Bad usage exits 2 with the problem on stderr. Everything it prints is untrusted for the
// server (the cell's code can run this binary too): tools/archive_report.h reads it strictly.
#pragma once

namespace mcpcell::sandbox {

// The mode names argv[1] may hold; IsArchiveToolMode(argv[1]) decides init's main.
bool IsArchiveToolMode(const char* mode);
// Runs the mode in argv[1]; returns the exit status.
int ArchiveToolMain(int argc, char** argv);

}  // namespace mcpcell::sandbox
