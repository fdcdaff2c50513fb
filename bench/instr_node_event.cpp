// Instruction-count driver for the CI guard (bench/instr_guard.py): what one Node watch event
// costs topogate when it changes a label no rule reads (a heartbeat a controller stamps),
// at a given cluster size. The view holds N Nodes with the ~20 labels cloud GPU Nodes carry,
// kept as the registry keeps them (only the keys a rule of the data-center TopologySource
// reads); the counted region parses and applies 100 such events, as the watch's line handler
// does (simdjson parse of the event, node_view::apply). The figure must not grow with N.
//
//   instr_node_event N       prints nodes, events and how many published (0 expected)

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/callgrind.hpp"
#include "bench/corpus.hpp"
#include "core/nodes.hpp"
#include "core/topology_source.hpp"
#include "inventory/node_view.hpp"

namespace {

constexpr std::size_t events = 100;

}  // namespace

// The counted region; extern "C" and noinline so callgrind's --toggle-collect finds it
// under one stable name whatever the optimisation level.
extern "C" __attribute__((noinline)) std::size_t instr_region(
    topogate::inventory::detail::node_view& view, simdjson::dom::parser& parser,
    const std::vector<std::string>& lines) {
  std::size_t published = 0;
  for (const auto& line : lines) {
    simdjson::dom::element ev;
    std::string_view type;
    simdjson::dom::element obj;
    if (parser.parse(line).get(ev) || ev["type"].get(type) || ev["object"].get(obj)) continue;
    published += view.apply(type, obj) ? 1 : 0;
  }
  return published;
}

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10000;
  const auto src =
      topogate::core::validate_topology_source_text(topogate::bench::data_center_source);
  if (!src.ok() || n < events) {
    std::fprintf(stderr, "instr_node_event: bad TopologySource or N < %zu\n", events);
    return 2;
  }
  const topogate::core::topology_source source = src.source;
  topogate::inventory::detail::node_view view(
      [source](std::string_view key) { return topogate::core::reads_node_label(source, key); });
  simdjson::dom::parser parser;
  for (std::size_t i = 0; i < n; ++i) {
    simdjson::dom::element node;
    const auto json = topogate::bench::node_json(i, 0);
    if (parser.parse(json).get(node)) return 2;
    view.add_listed(node);
  }
  view.finish_list();
  std::vector<std::string> lines;
  for (std::size_t k = 0; k < events; ++k)
    lines.push_back(R"({"type":"MODIFIED","object":)" +
                    topogate::bench::node_json((k * 7919) % n, k + 1) + "}");
  // Warm-up outside the counted region: the parser's buffers are sized by then.
  instr_region(view, parser, lines);
  CALLGRIND_START_INSTRUMENTATION;
  const std::size_t published = instr_region(view, parser, lines);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("nodes %zu\nevents %zu\npublished %zu\n", view.size(), events, published);
  return published == 0 ? 0 : 1;
}
