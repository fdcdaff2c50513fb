// Snapshot decoding and validation from JSON or YAML text (decode_snapshot dispatches:
// the simdjson fast path, the exact JSON path, or the yaml.v3-faithful YAML decoder).
// Properties beyond "no crash":
// - check_snapshot reports an error exactly when decode_snapshot + validate_snapshot do;
// - a decoded snapshot rendered as JSON (what topogate serves) and as YAML decodes back to
//   the same snapshot, and validates with the same errors (served = validated).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/snapshot.hpp"
#include "fuzz_common.hpp"
#include "fuzz_source.hpp"

namespace {

using namespace topogate;

bool same(const core::snapshot& a, const core::snapshot& b) {
  if (a.api_version != b.api_version || a.revision != b.revision ||
      a.nodes.size() != b.nodes.size())
    return false;
  // Rendering sorts nodes and keys (Go's encoding/json); compare as sorted sets.
  auto sorted = [](const core::snapshot& s) {
    std::vector<std::pair<std::string, std::vector<std::pair<std::string, std::string>>>> out;
    for (const auto& n : s.nodes) {
      std::vector<std::pair<std::string, std::string>> labels;
      for (const auto& l : n.labels) labels.emplace_back(l.key, l.value);
      std::sort(labels.begin(), labels.end());
      out.emplace_back(n.name, std::move(labels));
    }
    std::sort(out.begin(), out.end());
    return out;
  };
  return sorted(a) == sorted(b);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  core::snapshot_context ctx;
  ctx.source = &fuzz::fuzz_source();

  const core::error_list all = core::check_snapshot(text, ctx);
  const core::snapshot_decode_result decoded = core::decode_snapshot(text);
  if (!decoded.ok()) {
    fuzz::check(!all.empty(), "decode_snapshot rejects but check_snapshot accepts", text);
    return 0;
  }
  const core::error_list rules = core::validate_snapshot(decoded.value, ctx);
  fuzz::check(all.empty() == rules.empty(), "check_snapshot vs decode_snapshot + validate_snapshot",
              core::render_text(all) + "\n--- vs ---\n" + core::render_text(rules));

  // Served = validated: the rendering must decode to the same content. Only for snapshots
  // within the served size limit (S10 rejects the others before they are served).
  const std::string json = core::render_snapshot_json(decoded.value);
  if (json.size() <= core::max_snapshot_bytes) {
    const auto back = core::decode_snapshot(json);
    fuzz::check(back.ok(), "rendered JSON decodes", core::render_text(back.errors) + "\n" + json);
    fuzz::check(same(back.value, decoded.value), "rendered JSON decodes to the same snapshot",
                json);
    if (rules.empty()) {
      fuzz::check(core::validate_snapshot(back.value, ctx).empty(),
                  "rendered JSON of a valid snapshot validates", json);
    }
  }
  const std::string yaml = core::render_snapshot_yaml(decoded.value);
  if (yaml.size() <= core::max_snapshot_bytes) {
    const auto back = core::decode_snapshot(yaml);
    fuzz::check(back.ok(), "rendered YAML decodes", core::render_text(back.errors) + "\n" + yaml);
    fuzz::check(same(back.value, decoded.value), "rendered YAML decodes to the same snapshot",
                yaml);
  }
  return 0;
}
