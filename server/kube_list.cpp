#include "server/kube_list.hpp"

#include <algorithm>

namespace topogate::server {

namespace {

namespace kube = inventory::detail;
using clock = std::chrono::steady_clock;

// A page of 100 objects of up to 1.5 MiB each, nested as deep as a ModelDeployment's spec.
core::decode_limits page_limits() {
  core::decode_limits limits;
  limits.max_bytes = 256u << 20;
  limits.max_depth = 128;
  limits.max_expanded_nodes = std::size_t{1} << 26;
  return limits;
}

// The API's answer to a list that did not succeed: the call, the status and, for a Status
// body, its message (the API never echoes the request's credentials there).
std::string api_failure(const std::string& path, const kube::kube_client::response& r,
                        std::string_view forbidden_hint) {
  if (r.status == 0) return "GET " + path + ": " + r.error;
  std::string out = "GET " + path + ": HTTP " + std::to_string(r.status);
  const auto d = core::decode_json(r.body);
  if (d.ok()) {
    if (const auto* m = d.root.find("message"); m != nullptr && m->is_scalar()) {
      out += ": " + m->text.substr(0, 300);
    }
  }
  if (r.status == 401) out += " (topogate's API credentials were refused)";
  if (r.status == 403 && !forbidden_hint.empty()) out += " (" + std::string(forbidden_hint) + ")";
  return out;
}

}  // namespace

void each_node(const core::doc_node& page,
               const std::function<void(std::string name, node_labels labels)>& f) {
  const core::doc_node* items = page.find("items");
  if (items == nullptr || !items->is_sequence()) return;
  for (const auto& item : items->items) {
    const core::doc_node* meta = item.find("metadata");
    const core::doc_node* name = meta != nullptr ? meta->find("name") : nullptr;
    if (name == nullptr || !name->is_scalar()) continue;
    node_labels labels;
    if (const core::doc_node* l = meta->find("labels"); l && l->is_mapping())
      for (const auto& [k, v] : l->map) labels.emplace_back(k, v.is_scalar() ? v.text : "");
    std::sort(labels.begin(), labels.end());
    f(name->text, std::move(labels));
  }
}

std::string seconds_text(std::chrono::milliseconds d) {
  std::string out = std::to_string(d.count() / 1000);
  if (const auto ms = d.count() % 1000; ms != 0) {
    std::string frac = std::to_string(1000 + ms).substr(1);
    while (frac.back() == '0') frac.pop_back();
    out += "." + frac;
  }
  return out + "s";
}

core::result<listed> list_pages(kube::kube_client& client, const std::string& path,
                                clock::time_point deadline, const list_call& call,
                                const std::function<void(const core::doc_node&)>& on_page) {
  const std::string setting = std::string(call.deadline_name) + ", " + seconds_text(call.timeout);
  std::string cont;
  do {
    // Rounded up: the request's own timer then ends at the deadline or after it, never a
    // fraction of a millisecond before, so a request cut off by it is told as the deadline's.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now());
    if (left.count() <= 0) {
      return core::fail(core::errc::unavailable, "GET " + path + ": the run's deadline (" +
                                                     setting + ") passed before the API answered");
    }
    std::string target = path + "?limit=" + std::to_string(call.page_size);
    if (!cont.empty()) target += "&continue=" + kube::url_encode(cont);
    const auto r = client.request("GET", target, {}, left, call.accept);
    if (r.status == 0 && clock::now() >= deadline) {
      return core::fail(
          core::errc::unavailable,
          "GET " + path + ": no answer within the run's deadline (" + setting + "): " + r.error);
    }
    if (r.status == 404 && cont.empty()) return listed::not_served;
    if (r.status == 403 && call.tolerate_forbidden) return listed::forbidden;
    if (r.status != 200)
      return core::fail(core::errc::unavailable, api_failure(path, r, call.forbidden_hint));
    const auto d = core::decode_json(r.body, "", page_limits());
    if (!d.ok()) {
      return core::fail(
          core::errc::invalid_argument,
          "GET " + path + ": the answer is not a list: " + d.errors.front().to_string());
    }
    if (const auto* kind = d.root.find("kind");
        kind == nullptr || !kind->is_scalar() || !kind->text.ends_with("List")) {
      return core::fail(core::errc::invalid_argument, "GET " + path + ": the answer is not a list");
    }
    on_page(d.root);
    const core::doc_node* meta = d.root.find("metadata");
    const core::doc_node* c = meta != nullptr ? meta->find("continue") : nullptr;
    cont = c != nullptr && c->is_scalar() ? c->text : std::string();
  } while (!cont.empty());
  return listed::ok;
}

}  // namespace topogate::server
