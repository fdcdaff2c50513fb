#include "inventory/kube.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory::detail {

bool resolve_endpoint(const store_config&, kube_endpoint&, std::string& error) {
  error = "the Kubernetes API client is not available";
  return false;
}

std::unique_ptr<revision_store> make_kube_store(const store_config&, std::string& error) {
  error = "the kubernetes store is not available";
  return nullptr;
}

std::unique_ptr<node_watch> make_node_watch(const store_config&, log_fn, std::string& error) {
  error = "the Kubernetes Node watch is not available";
  return nullptr;
}

}  // namespace topogate::inventory::detail
