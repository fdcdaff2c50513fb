// Kubernetes objects from YAML or JSON text: the document decoder itself, TopologySource
// and ModelDeployment validation, and node lists.
// Properties beyond "no crash":
// - for JSON text that both decoders accept, decode_json and decode_yaml build the same
//   tree (JSON is YAML: the consumer reads both with yaml.v3);
// - admission warnings fit the apiserver's limit: at most 120 bytes, no control characters.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/document.hpp"
#include "core/model_deployment.hpp"
#include "core/nodes.hpp"
#include "core/topology_source.hpp"
#include "fuzz_common.hpp"

namespace {

using namespace topogate;

bool same_tree(const core::doc_node& a, const core::doc_node& b) {
  if (a.k != b.k) return false;
  switch (a.k) {
    case core::doc_node::kind::null:
      return true;
    case core::doc_node::kind::scalar:
      return a.text == b.text && a.tag == b.tag;
    case core::doc_node::kind::sequence:
      return a.items.size() == b.items.size() &&
             std::equal(a.items.begin(), a.items.end(), b.items.begin(), same_tree);
    case core::doc_node::kind::mapping:
      return a.map.size() == b.map.size() && std::equal(a.map.begin(), a.map.end(), b.map.begin(),
                                                        [](const auto& x, const auto& y) {
                                                          return x.first == y.first &&
                                                                 same_tree(x.second, y.second);
                                                        });
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  const auto as_yaml = core::decode_yaml(text);
  const auto as_json = core::decode_json(text);
  if (as_yaml.ok() && as_json.ok()) {
    fuzz::check(same_tree(as_yaml.root, as_json.root),
                "decode_json and decode_yaml build different trees", text);
  }
  (void)core::decode_any(text);

  const auto source = core::validate_topology_source_text(text);
  for (const auto& w : source.warnings) {
    fuzz::check(w.size() <= 120, "warning longer than 120 bytes", w);
    for (unsigned char c : w)
      fuzz::check(c >= 0x20 && c != 0x7f, "control character in a warning", w);
  }
  (void)core::validate_model_deployment_text(text);
  (void)core::parse_node_list(text);
  return 0;
}
