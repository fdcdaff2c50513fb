#pragma once
// Listing a resource from the Kubernetes API page by page under one deadline, through
// topogate_kube's client: shared by the periodic audit (audit_kube.cpp) and the admission
// ownership view (ownership_view.cpp), both on threads of their own.

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/document.hpp"
#include "core/result.hpp"
#include "inventory/kube_client.hpp"

namespace topogate::server {

// A Node list as metadata only: names and labels, never the Nodes' status.
inline constexpr std::string_view metadata_list_accept =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

struct list_call {
  std::string_view deadline_name;        // the setting behind the deadline, e.g. "audit.timeout"
  std::chrono::milliseconds timeout{0};  // its value, for the message
  std::string_view accept = inventory::detail::kube_client::json;
  int page_size = 100;
  std::string_view forbidden_hint;  // appended to a 403's message
  bool tolerate_forbidden = false;  // a 403 is listed::forbidden rather than a failure
};

enum class listed { ok, not_served, forbidden };

// Every page of `path`, each handed to `on_page` once decoded; not_served when the API does not
// serve it (404 on the first page). Fails when the API refuses, answers what is not a list, or
// has not answered by `deadline`.
core::result<listed> list_pages(inventory::detail::kube_client& client, const std::string& path,
                                std::chrono::steady_clock::time_point deadline,
                                const list_call& call,
                                const std::function<void(const core::doc_node& page)>& on_page);

// Calls a thread makes with a client of their own, one per call, so that cancel() (from another
// thread) stops exactly the call in progress; after cancel() every call fails at once.
class cancellable_calls {
 public:
  explicit cancellable_calls(inventory::detail::kube_endpoint ep) : ep_(std::move(ep)) {}

  template <class T, class F>
  core::result<T> run(F&& call) {
    inventory::detail::kube_client client(ep_);
    {
      std::lock_guard lock(mu_);
      if (cancelled_) return core::fail(core::errc::unavailable, "the server is shutting down");
      active_ = &client;
    }
    core::result<T> r = call(client);
    std::lock_guard lock(mu_);
    active_ = nullptr;
    return r;
  }

  void cancel() {
    std::lock_guard lock(mu_);
    cancelled_ = true;
    if (active_ != nullptr) active_->cancel();
  }

 private:
  inventory::detail::kube_endpoint ep_;
  std::mutex mu_;
  bool cancelled_ = false;                            // mu_
  inventory::detail::kube_client* active_ = nullptr;  // mu_
};

using node_labels = std::vector<std::pair<std::string, std::string>>;
// Each Node of a list page (a metadata list's or a full one's): its name and its labels,
// sorted by key. Items without a name are skipped.
void each_node(const core::doc_node& page,
               const std::function<void(std::string name, node_labels labels)>& f);

// "30s", "1.5s".
std::string seconds_text(std::chrono::milliseconds d);

}  // namespace topogate::server
