// topogate serve --config FILE [--port N] [--address A] [--threads N] [--health-port N]
#include <cstdio>
#include <string>
#include <vector>

#include "server/commands.hpp"
#include "server/config.hpp"
#include "server/serve.hpp"

namespace topogate::cli {

int run_serve(args a) {
  std::string config_path;
  std::vector<std::string_view> overrides;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == "--config" && i + 1 < a.size()) {
      config_path = std::string(a[++i]);
    } else if (a[i].starts_with("--config=")) {
      config_path = std::string(a[i].substr(9));
    } else {
      overrides.push_back(a[i]);
    }
  }
  if (config_path.empty()) {
    std::fputs("usage: topogate serve --config FILE [--port N] [--address ADDR] [--threads N] [--health-port N]\n",
               stderr);
    return 2;
  }
  std::string error;
  auto cfg = server::load_serve_config(config_path, &error);
  if (!cfg) {
    std::fprintf(stderr, "topogate: %s\n", error.c_str());
    return 2;
  }
  if (!server::apply_overrides(*cfg, overrides, &error)) {
    std::fprintf(stderr, "topogate serve: %s\n", error.c_str());
    return 2;
  }
  return server::serve(std::move(*cfg));
}

}  // namespace topogate::cli
