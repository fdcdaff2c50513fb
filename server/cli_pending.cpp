// TEMPORARY during bring-up: each function moves to its own file when implemented.
#include <cstdio>

#include "server/commands.hpp"

namespace topogate::cli {
}  // namespace topogate::cli
