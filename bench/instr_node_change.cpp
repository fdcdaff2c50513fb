// Instruction-count driver for the CI guard (bench/instr_guard.py): what relevant Node
// changes cost topogate at 10,000 Nodes (bench/node_cluster.hpp's cluster, a 7,000-Node
// snapshot). The counted region applies 10 watch events that each take a Node out of the
// inventory's nodeSelector or bring it back, and after each, as the registry does once per
// coalescing window, takes the view's list and re-evaluates the inventory (set_nodes): every
// one is a new served revision.
//
// With `label`, each event instead changes a label the rules read on a Node the snapshot
// describes (the rack, as a consumer projecting the next revision writes it), which changes
// nothing served: the incremental path decides it from that Node alone.
//
//   instr_node_change [N] [flip|label]   prints nodes, changes and the served revision's
//                                        Node count

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "bench/callgrind.hpp"
#include "bench/node_cluster.hpp"

namespace {
constexpr std::size_t changes = 10;
}

extern "C" __attribute__((noinline)) std::size_t instr_region(topogate::bench::cluster& c,
                                                              topogate::inventory::inventory& inv,
                                                              std::size_t first, bool label) {
  std::size_t revisions = 0;
  std::string etag = inv.current() ? inv.current()->etag : "";
  for (std::size_t k = 0; k < changes; ++k) {
    const std::size_t i = ((first + k / 2) * 7919) % topogate::bench::snapshot_nodes;
    const bool changed = label ? c.set_rack(i, k % 2 == 0 ? "rack-moved" : "rack-next")
                               : c.set_group(i, k % 2 == 0 ? "cpu" : "gpu");
    if (!changed) std::abort();
    inv.set_nodes(c.view.take());
    const auto cur = inv.current();
    if (cur && cur->etag != etag) {
      ++revisions;
      etag = cur->etag;
    }
  }
  return revisions;
}

int main(int argc, char** argv) {
  const std::size_t n = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 10000;
  const bool label = argc > 2 && std::string_view(argv[2]) == "label";
  topogate::bench::cluster c(n);
  auto inv = c.make_inventory();
  if (!inv) {
    std::fprintf(stderr, "instr_node_change: snapshot refused\n");
    return 2;
  }
  instr_region(c, *inv, 0, label);  // warm-up: allocator and parser buffers sized
  CALLGRIND_START_INSTRUMENTATION;
  const std::size_t revisions = instr_region(c, *inv, 100, label);
  CALLGRIND_STOP_INSTRUMENTATION;
  std::printf("nodes %zu\nchanges %zu\nrevisions %zu\nserved_nodes %zu\nincremental %llu\n",
              c.view.size(), changes, revisions, inv->current() ? inv->current()->node_count : 0,
              static_cast<unsigned long long>(inv->incremental_node_changes()));
  // A flip is a new served revision each time; a rack label changes nothing served.
  return revisions == (label ? 0 : changes) ? 0 : 1;
}
