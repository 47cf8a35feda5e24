// Anchors mcpcell_sandbox_kernel so the library is never empty while files arrive.
#include "sandbox/status.h"
