// TEMPORARY during bring-up: each function moves to its own file when implemented.
#include <cstdio>

#include "server/commands.hpp"

namespace topogate::cli {
int run_validate(args) { std::fputs("not yet\n", stderr); return 2; }
}  // namespace topogate::cli
