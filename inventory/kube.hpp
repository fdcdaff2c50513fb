#pragma once
// The Kubernetes API as topogate uses it: the revision store (one ConfigMap per inventory)
// and the Node list/watch. Internal to inventory/.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "core/nodes.hpp"
#include "inventory/registry.hpp"

namespace topogate::inventory::detail {

using log_fn = std::function<void(std::string_view level, std::string_view message)>;

// Where the API is and how to authenticate: explicit settings, else the in-cluster
// defaults (KUBERNETES_SERVICE_HOST/PORT, the ServiceAccount token and CA).
struct kube_endpoint {
  std::string host;
  std::string port = "443";
  std::string token_file;
  std::string ca_file;
};
bool resolve_endpoint(const store_config& cfg, kube_endpoint& out, std::string& error);

class node_watch {
 public:
  virtual ~node_watch() = default;
  // Lists once (bounded by `timeout`), then keeps a watch running on its own thread and
  // calls `on_change` with the full list after every change. False when the first list
  // failed (the watch thread keeps retrying).
  virtual bool start(std::function<void(core::node_list)> on_change, std::chrono::milliseconds timeout) = 0;
  virtual void stop() = 0;
};
std::unique_ptr<node_watch> make_node_watch(const store_config& cfg, log_fn log, std::string& error);

}  // namespace topogate::inventory::detail
