// The hook through which the sandbox tools (run_code, run_command, read_file, ...) join
// the `mcpcell serve` server. cmd_serve.cc calls RegisterCellTools once, before serving;
// the tools issue defines it (tools/serve_tools.cc). Until then a weak default registers
// nothing and the server lists no tools.
#pragma once

namespace mcp {
class Server;
}

namespace mcpcell::tools {

void RegisterCellTools(mcp::Server& server);

}  // namespace mcpcell::tools
