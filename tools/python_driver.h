// The python tool's driver script (tools/python_driver.py), embedded into the binary at
// build time and written into a cell when its session's interpreter starts.
#pragma once

namespace mcpcell::tools {
extern const char kPythonDriverSource[];
}  // namespace mcpcell::tools
