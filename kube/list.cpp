#include "kube/list.hpp"

#include <algorithm>

#include "core/time.hpp"
#include "kube/api_error.hpp"
#include "kube/limits.hpp"

namespace topogate::kube {

namespace {
using clock = std::chrono::steady_clock;
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

core::result<listed> list_raw_pages(client& c, const std::string& path, const list_options& o,
                                    const raw_page_fn& on_page) {
  const std::string call = "GET " + path;
  const std::string setting =
      std::string(o.deadline_name) + ", " + core::seconds_text(o.deadline_setting);
  std::string cont;
  // The pages go on one connection.
  const client::reuse one_connection(c);
  do {
    auto timeout = o.page_timeout;
    if (o.deadline) {
      // Rounded up: the request's own timer then ends at the deadline or after it, never a
      // fraction of a millisecond before, so a request cut off by it is told as the deadline's.
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(*o.deadline - clock::now());
      if (left.count() <= 0) {
        return core::fail(core::errc::unavailable, call + ": the run's deadline (" + setting +
                                                       ") passed before the API answered");
      }
      timeout = std::min(timeout, left);
    }
    std::string target = path + (path.find('?') == std::string::npos ? "?" : "&") +
                         "limit=" + std::to_string(o.page_size);
    if (!cont.empty()) target += "&continue=" + url_encode(cont);
    auto r = c.request("GET", target, {}, timeout, o.accept);
    if (!r && o.deadline && clock::now() >= *o.deadline) {
      return core::fail(core::errc::unavailable, call + ": no answer within the run's deadline (" +
                                                     setting + "): " + r.error().message);
    }
    if (r && r->status == 404 && cont.empty()) return listed::not_served;
    if (r && r->status == 403 && o.tolerate_forbidden) return listed::forbidden;
    if (!r || r->status != 200) return api_error(call, r, {o.forbidden_hint});
    auto next = on_page(r->body);
    if (!next) return core::fail(next.error().code, call + ": " + next.error().message);
    cont = std::move(*next);
  } while (!cont.empty());
  return listed::ok;
}

core::result<listed> list_pages(client& c, const std::string& path, const list_options& o,
                                const page_fn& on_page) {
  return list_raw_pages(c, path, o, [&](const std::string& body) -> core::result<std::string> {
    const auto d = core::decode_json(body, "", list_limits());
    if (!d.ok()) {
      return core::fail(core::errc::invalid_argument,
                        "the answer is not a list: " + d.errors.front().to_string());
    }
    if (const auto* kind = d.root.find("kind");
        kind == nullptr || !kind->is_scalar() || !kind->text.ends_with("List")) {
      return core::fail(core::errc::invalid_argument, "the answer is not a list");
    }
    on_page(d.root);
    const core::doc_node* meta = d.root.find("metadata");
    const core::doc_node* next = meta != nullptr ? meta->find("continue") : nullptr;
    return next != nullptr && next->is_scalar() ? next->text : std::string();
  });
}

}  // namespace topogate::kube
