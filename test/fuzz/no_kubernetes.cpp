// The fuzz build's stand-in for inventory/kube_store.cpp and inventory/kube_client.cpp,
// which it does not compile: clang 16 spends about ten minutes instrumenting the Asio
// coroutines of the Kubernetes client, and clang 14 cannot instrument them at all. The
// inventories the fuzz targets configure use files (file store, snapshot files, no Node
// API), so the registry never asks for these; if it did, it would behave as with an API
// server it cannot reach: pushes refused with the store error, no Node watch.

#include <string>

#include "inventory/kube.hpp"
#include "inventory/store.hpp"

namespace topogate::inventory::detail {

namespace {
constexpr const char* absent = "this build has no Kubernetes client (fuzz build)";
}

std::unique_ptr<revision_store> make_kube_store(const store_config&, std::function<void(std::string_view, std::string_view)>,
                                                std::string& error) {
  error = absent;
  return nullptr;
}

std::unique_ptr<node_watch> make_node_watch(const store_config&, log_fn, std::string& error) {
  error = absent;
  return nullptr;
}

}  // namespace topogate::inventory::detail
