#include "nodes.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "document_internal.hpp"

namespace topogate::core {

const node_labels::storage& node_labels::empty_storage() noexcept {
  static const storage none;
  return none;
}

node_labels::storage& node_labels::edit() {
  if (!p_) {
    p_ = std::make_shared<storage>();
  } else if (p_.use_count() > 1) {
    p_ = std::make_shared<storage>(*p_);
  }
  return *p_;
}

const std::string& node_name::empty_string() noexcept {
  static const std::string empty;
  return empty;
}

const std::string* cluster_node::label(std::string_view key) const noexcept {
  auto it = std::lower_bound(labels.begin(), labels.end(), key,
                             [](const auto& l, std::string_view k) { return l.first < k; });
  if (it == labels.end() || it->first != key) return nullptr;
  return &it->second;
}

const cluster_node* node_list::find(std::string_view name) const noexcept {
  const auto it = nodes.partition_point([name](const cluster_node& n) { return n.name < name; });
  if (it == nodes.end() || it->name != name) return nullptr;
  return &*it;
}

const cluster_node* node_list::cursor::find(std::string_view name) noexcept {
  const auto& v = list_->nodes;
  const auto by_name = [](const cluster_node& n, std::string_view k) { return n.name < k; };
  std::size_t lo = 0;
  std::size_t hi = v.size();
  if (pos_ > 0 && !(name > v[pos_ - 1].name)) {
    pos_ = 0;  // out of order: search the whole list
  } else if (pos_ < v.size()) {
    // Gallop forward from pos_: the first step that reaches a name >= `name` bounds it.
    lo = pos_;
    std::size_t step = 1;
    while (lo + step < v.size() && v[lo + step].name < name) step *= 2;
    hi = std::min(v.size(), lo + step + 1);
    lo += step / 2;
  } else {
    lo = v.size();
  }
  const auto it = std::lower_bound(v.begin() + static_cast<std::ptrdiff_t>(lo),
                                   v.begin() + static_cast<std::ptrdiff_t>(hi), name, by_name);
  pos_ = static_cast<std::size_t>(it - v.begin());
  if (it == v.end() || it->name != name) return nullptr;
  return &*it;
}

namespace {

// A cluster's node list is far larger than any object topogate validates (`kubectl get nodes
// -o json` prints status, images and managed fields for every Node), so it gets its own limits.
constexpr std::size_t max_node_list_bytes = 512u << 20;

void finish(node_list_result& r) {
  std::vector<cluster_node> nodes(r.list.nodes.begin(), r.list.nodes.end());
  for (auto& n : nodes) {
    auto& labels = n.labels.edit();
    std::sort(labels.begin(), labels.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
  std::stable_sort(nodes.begin(), nodes.end(),
                   [](const cluster_node& a, const cluster_node& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < nodes.size(); ++i)
    if (nodes[i].name == nodes[i - 1].name)
      r.errors.push_back(duplicate("", "items[" + nodes[i].name + "]", nodes[i].name));
  nodes.erase(
      std::unique(nodes.begin(), nodes.end(),
                  [](const cluster_node& a, const cluster_node& b) { return a.name == b.name; }),
      nodes.end());
  r.list.nodes = chunked_vector<cluster_node>(std::move(nodes));
}

bool list_kind(std::string_view kind) { return kind == "List" || kind == "NodeList"; }

// JSON (what kubectl prints): only metadata.name and metadata.labels are read; simdjson's
// DOM skips the rest at parsing speed.
bool parse_json(std::string_view text, node_list_result& r) {
  simdjson::dom::parser parser;
  std::vector<char> buffer(text.size() + simdjson::SIMDJSON_PADDING, '\0');
  std::memcpy(buffer.data(), text.data(), text.size());
  simdjson::dom::element root;
  if (parser.parse(buffer.data(), text.size(), false).get(root)) return false;
  simdjson::dom::object top;
  if (root.get_object().get(top)) return false;
  std::string_view kind;
  if (top["kind"].get_string().get(kind)) kind = {};
  auto read_node = [&](simdjson::dom::object item, const std::string& path) {
    simdjson::dom::object meta;
    std::string_view name;
    if (item["metadata"].get_object().get(meta) || meta["name"].get_string().get(name) ||
        name.empty()) {
      r.errors.push_back(required("", path + ".metadata.name"));
      return;
    }
    cluster_node node;
    node.name = name;
    simdjson::dom::object labels;
    if (!meta["labels"].get_object().get(labels)) {
      for (auto [k, v] : labels) {
        std::string_view value;
        if (v.get_string().get(value)) {
          r.errors.push_back(invalid("", path + ".metadata.labels[" + std::string(k) + "]", "",
                                     "a label value must be a string"));
          continue;
        }
        node.labels.emplace_back(std::string(k), std::string(value));
      }
    }
    r.list.nodes.push_back(std::move(node));
  };
  if (kind == "Node") {
    read_node(top, "");
    return true;
  }
  if (!list_kind(kind)) {
    r.errors.push_back(not_supported("", "kind", kind, {"List", "NodeList", "Node"}));
    return true;
  }
  simdjson::dom::array items;
  simdjson::dom::element items_el;
  if (top["items"].get(items_el)) return true;  // no items: an empty list
  if (items_el.is_null()) return true;
  if (items_el.get_array().get(items)) {
    r.errors.push_back(invalid("", "items", "", "must be a list of Node objects"));
    return true;
  }
  std::size_t i = 0;
  for (simdjson::dom::element item : items) {
    simdjson::dom::object obj;
    const std::string path = "items[" + std::to_string(i++) + "]";
    if (item.get_object().get(obj)) {
      r.errors.push_back(invalid("", path, "", "must be a Node object"));
      continue;
    }
    read_node(obj, path);
  }
  return true;
}

void parse_tree(const doc_node& root, node_list_result& r) {
  auto read_node = [&](const doc_node& item, const std::string& path) {
    const doc_node* meta = item.find("metadata");
    const doc_node* name = meta ? meta->find("name") : nullptr;
    if (!name || !name->is_scalar() || name->text.empty()) {
      r.errors.push_back(required("", path + ".metadata.name"));
      return;
    }
    cluster_node node;
    node.name = name->text;
    if (const doc_node* labels = meta->find("labels"); labels && labels->is_mapping()) {
      for (const auto& [k, v] : labels->map) {
        if (!v.is_scalar() && !v.is_null()) {
          r.errors.push_back(invalid("", path + ".metadata.labels[" + k + "]", "",
                                     "a label value must be a string"));
          continue;
        }
        node.labels.emplace_back(k, v.text);
      }
    }
    r.list.nodes.push_back(std::move(node));
  };
  if (!root.is_mapping()) {
    r.errors.push_back(invalid("", "", "", "a node list must be a v1 List of Node objects"));
    return;
  }
  const doc_node* kind = root.find("kind");
  const std::string_view k = kind && kind->is_scalar() ? std::string_view(kind->text) : "";
  if (k == "Node") {
    read_node(root, "");
    return;
  }
  if (!list_kind(k)) {
    r.errors.push_back(not_supported("", "kind", k, {"List", "NodeList", "Node"}));
    return;
  }
  const doc_node* items = root.find("items");
  if (!items || items->is_null()) return;
  if (!items->is_sequence()) {
    r.errors.push_back(invalid("", "items", "", "must be a list of Node objects"));
    return;
  }
  for (std::size_t i = 0; i < items->items.size(); ++i) {
    const std::string path = "items[" + std::to_string(i) + "]";
    if (!items->items[i].is_mapping()) {
      r.errors.push_back(invalid("", path, "", "must be a Node object"));
      continue;
    }
    read_node(items->items[i], path);
  }
}

}  // namespace

node_list_result parse_node_list(std::string_view text) {
  node_list_result r;
  if (text.size() > max_node_list_bytes) {
    r.errors.push_back(too_long("", "", text.size(), max_node_list_bytes));
    return r;
  }
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{' && parse_json(text, r)) {
    finish(r);
    return r;
  }
  decode_limits limits;
  limits.max_bytes = max_node_list_bytes;
  limits.max_depth = 128;
  limits.max_expanded_nodes = std::size_t{1} << 26;
  decode_result d = decode_yaml(text, "", limits);
  if (!d.ok()) {
    r.errors = std::move(d.errors);
    return r;
  }
  parse_tree(d.root, r);
  finish(r);
  return r;
}

node_list select_nodes(const node_list& all, const topology_source& src) {
  if (!src.node_selector) return all;
  node_list out;
  for (const cluster_node& n : all.nodes)
    if (src.node_selector->matches(n.labels)) out.nodes.push_back(n);
  return out;
}

bool reads_node_label(const topology_source& src, std::string_view key) noexcept {
  if (key == "topology.gpustack.ai/profile" || is_read_only_parent(key)) return true;
  for (const auto& level : src.levels)
    if (level == key) return true;
  if (src.node_selector) {
    for (const auto& [k, v] : src.node_selector->match_labels)
      if (k == key) return true;
    for (const auto& r : src.node_selector->match_expressions)
      if (r.key == key) return true;
  }
  return false;
}

}  // namespace topogate::core
