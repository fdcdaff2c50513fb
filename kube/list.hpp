#pragma once
// Listing a collection of the Kubernetes API, the one pager: page by page (limit and
// continue), each page's request bounded by what is left of the list's deadline and by a
// per-page timeout, the API's refusals told as api_error.hpp tells them. Every LIST topogate
// makes goes through it: the store's and the Node watch's (inventory/kube_store.cpp), the
// periodic audit's and the ownership view's (cli/), and `topogate diagnose` and `audit`.

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/document.hpp"
#include "core/result.hpp"
#include "kube/client.hpp"

namespace topogate::kube {

// Nodes as metadata only: names and labels, never the status (conditions, images, addresses)
// that makes up most of a Node and changes with every heartbeat.
inline constexpr std::string_view metadata_list_accept =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
inline constexpr std::string_view metadata_watch_accept =
    "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
// Nodes per page of a Node list, whoever lists them (the Node watch, the audit, the ownership
// check). A page is held whole with its parse, which comes to several times the page: 500
// Nodes as the API sends them (labels and managedFields, about 3 KB each) made a 1.5 MB page
// and took a relist's peak to 1.57x the steady RSS at 5,000 Nodes (1.72x at 20,000). A page
// of 100 costs a round trip more per 100 Nodes, on the list's one connection (client::reuse),
// served from the API server's watch cache.
inline constexpr int node_list_page = 100;

struct list_options {
  std::string_view accept = json;
  int page_size = 500;
  // Each page's request gets at most this long.
  std::chrono::milliseconds page_timeout = std::chrono::seconds(60);
  // The whole list's, when it has one: each page's request gets at most what is left of it.
  std::optional<std::chrono::steady_clock::time_point> deadline;
  std::string_view deadline_name;                 // the setting behind it, e.g. "audit.timeout"
  std::chrono::milliseconds deadline_setting{0};  // its value, for the message
  std::string_view forbidden_hint;                // what to grant, appended to a 403's message
  bool tolerate_forbidden = false;  // a 403 is listed::forbidden rather than a failure
};

enum class listed { ok, not_served, forbidden };

// Reads one page's body as it came (a caller that decodes it itself, with simdjson); returns
// the page's metadata.continue ("" on the last page), or why the page is unusable.
using raw_page_fn = std::function<core::result<std::string>(const std::string& body)>;
// One page, decoded (list_limits()) and checked to be a List.
using page_fn = std::function<void(const core::doc_node& page)>;

// Every page of `path` (which may carry a query of its own: a selector), each handed to
// `on_page`; not_served when the API does not serve it (404 on the first page: its CRD is not
// installed). Fails when the API refuses (errc::forbidden for a 403 unless tolerated), answers
// what is not a list, or has not answered in time.
core::result<listed> list_pages(client& c, const std::string& path, const list_options& o,
                                const page_fn& on_page);
core::result<listed> list_raw_pages(client& c, const std::string& path, const list_options& o,
                                    const raw_page_fn& on_page);

using node_labels = std::vector<std::pair<std::string, std::string>>;
// Each Node of a list page (a metadata list's or a full one's): its name and its labels,
// sorted by key. Items without a name are skipped.
void each_node(const core::doc_node& page,
               const std::function<void(std::string name, node_labels labels)>& f);

}  // namespace topogate::kube
