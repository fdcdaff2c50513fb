// Differential: the same JSON text through the JSON paths (simdjson fast path, exact JSON
// decoder) and through the YAML decoder. A YAML comment line in front keeps the document
// identical for yaml.v3 (the consumer reads JSON with its YAML scanner) but makes
// decode_snapshot take the YAML path, because the first non-blank byte is no longer '{'.
// Both must accept or reject together, decode to the same snapshot, and report the same
// errors (rule, path, type) for decoding and for validation; behind a byte-order mark
// instead (the YAML path, same lines) the messages must match word for word.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/snapshot.hpp"
#include "fuzz_common.hpp"
#include "fuzz_source.hpp"

namespace {

using namespace topogate;

std::string describe(const core::error_list& a, const core::error_list& b) {
  return "JSON path:\n" + core::render_text(a) + "\nYAML path:\n" + core::render_text(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view json(reinterpret_cast<const char*>(data), size);
  // Only text that the JSON paths would take: first non-blank byte '{' or '['. A BOM or
  // other leading bytes would no longer be at the start of the stream once prefixed.
  const std::size_t first = json.find_first_not_of(" \r\n");
  if (first == std::string_view::npos || (json[first] != '{' && json[first] != '[')) return 0;
  // The prefix adds bytes; stay clear of the 1 MiB received-size limit.
  if (json.size() + 16 > core::max_snapshot_bytes) return 0;
  const std::string yaml = "# yaml path\n" + std::string(json);

  core::snapshot_context ctx;
  ctx.source = &fuzz::fuzz_source();

  const auto a = core::decode_snapshot(json);
  const auto b = core::decode_snapshot(yaml);
  fuzz::check(a.ok() == b.ok(), "JSON and YAML paths disagree on decoding",
              describe(a.errors, b.errors));
  if (a.ok()) {
    const bool same =
        a.value.api_version == b.value.api_version && a.value.revision == b.value.revision &&
        a.value.nodes.size() == b.value.nodes.size() &&
        std::equal(a.value.nodes.begin(), a.value.nodes.end(), b.value.nodes.begin(),
                   [](const core::snapshot_node& x, const core::snapshot_node& y) {
                     return x.name == y.name && x.labels.size() == y.labels.size() &&
                            std::equal(x.labels.begin(), x.labels.end(), y.labels.begin(),
                                       [](const auto& l, const auto& m) {
                                         return l.key == m.key && l.value == m.value;
                                       });
                   });
    fuzz::check(same, "JSON and YAML paths decode different snapshots",
                core::render_snapshot_json(a.value) + "\n" + core::render_snapshot_json(b.value));
  } else {
    fuzz::check(fuzz::keys(a.errors) == fuzz::keys(b.errors),
                "JSON and YAML paths report different decode errors", describe(a.errors, b.errors));
  }
  const auto ea = core::check_snapshot(json, ctx);
  const auto eb = core::check_snapshot(yaml, ctx);
  fuzz::check(fuzz::keys(ea) == fuzz::keys(eb), "JSON and YAML paths report different errors",
              describe(ea, eb));
  // Behind a byte-order mark the text takes the YAML path with its lines unchanged: the
  // messages are then the same word for word, line numbers included.
  const auto ec = core::check_snapshot("\xef\xbb\xbf" + std::string(json), ctx);
  fuzz::check(core::render_text(ea) == core::render_text(ec),
              "JSON and YAML paths word their errors differently", describe(ea, ec));
  return 0;
}
