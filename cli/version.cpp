#include <cstdio>

#include "cli/commands.hpp"

namespace topogate::cli {

int run_version(args /*unused*/) {
  std::printf("topogate %s\n", TOPOGATE_VERSION);
  return 0;
}

}  // namespace topogate::cli
