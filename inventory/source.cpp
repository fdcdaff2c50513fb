#include "inventory/source.hpp"

#include "inventory/registry.hpp"
#include "inventory/source_file.hpp"
#include "inventory/source_node_labels.hpp"
#include "inventory/source_push.hpp"

namespace topogate::inventory {

std::string_view to_string(source_kind k) noexcept {
  switch (k) {
    case source_kind::file:
      return "file";
    case source_kind::push:
      return "push";
    case source_kind::node_labels:
      return "nodeLabels";
  }
  return "push";
}

std::string check_spec(const inventory_spec& spec) {
  const std::string name =
      "inventory \"" + spec.config.name + "\" (" + std::string(to_string(spec.kind)) + " source): ";
  if ((spec.kind == source_kind::file) != !spec.snapshot_path.empty()) {
    return name + (spec.snapshot_path.empty()
                       ? "has no snapshot path"
                       : "has a snapshot path, which only a file source reads");
  }
  if ((spec.kind == source_kind::node_labels) != spec.config.source.node_labels) {
    return name + (spec.config.source.node_labels
                       ? "feeds a nodeLabels TopologySource, which only a nodeLabels source can"
                       : "feeds a TopologySource that is not nodeLabels");
  }
  return {};
}

std::unique_ptr<source> make_source(const inventory_spec& spec) {
  switch (spec.kind) {
    case source_kind::file:
      return std::make_unique<file_source>(spec.snapshot_path);
    case source_kind::node_labels:
      return std::make_unique<node_labels_source>();
    case source_kind::push:
      break;
  }
  return std::make_unique<push_source>();
}

}  // namespace topogate::inventory
