#include <cstdio>

#include "server/commands.hpp"

namespace topogate::cli {

int run_version(args /*unused*/) {
  std::printf("topogate %s\n", TOPOGATE_VERSION);
  return 0;
}

}  // namespace topogate::cli
