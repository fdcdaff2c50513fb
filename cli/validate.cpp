// topogate validate {topologysource|snapshot|modeldeployment} FILE, and validate nodelabels:
// the validation core on files, for an inventory repository's CI. Exit 0 valid (warnings
// allowed), 1 invalid or undecodable input, 2 usage or I/O error.
#include <sys/stat.h>

#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cli/commands.hpp"
#include "core/field_error.hpp"
#include "core/model_deployment.hpp"
#include "core/node_labels.hpp"
#include "core/nodes.hpp"
#include "core/snapshot.hpp"
#include "core/snapshot_size.hpp"
#include "core/topology_source.hpp"
#include "util/file.hpp"

namespace topogate::cli {

namespace {

constexpr int exit_valid = 0;
constexpr int exit_invalid = 1;
constexpr int exit_usage = 2;

// Object files are small; a snapshot past 1 MiB is still read (to report S10 rather
// than an I/O error), up to this cap.
constexpr std::size_t max_input_bytes = 64u << 20;

constexpr std::string_view usage_text =
    "usage:\n"
    "  topogate validate topologysource FILE [options]\n"
    "  topogate validate snapshot FILE --source TOPOLOGYSOURCE_FILE [--nodes NODES_FILE] "
    "[options]\n"
    "  topogate validate modeldeployment FILE [options]\n"
    "  topogate validate nodelabels --source TOPOLOGYSOURCE_FILE --nodes NODES_FILE [options]\n"
    "\n"
    "FILE may be - for standard input. NODES_FILE is `kubectl get nodes -o json` output.\n"
    "nodelabels checks the hierarchy (S7-S9) of the labels the selected Nodes carry for a\n"
    "nodeLabels source and prints each level's values and each Node's profile.\n"
    "\n"
    "options:\n"
    "  --output text|json         result format (default text)\n"
    "  --worker-namespace NS      namespace every reference must use (default gpustack-system)\n"
    "  --reserved-prefix DOMAIN   also reserve DOMAIN for additionalWritePrefix (repeatable)\n"
    "\n"
    "exit status: 0 valid (warnings allowed), 1 invalid, 2 usage or I/O error\n";

int usage_error(std::string_view message) {
  std::fprintf(stderr, "topogate validate: %.*s\n\n%.*s", static_cast<int>(message.size()),
               message.data(), static_cast<int>(usage_text.size()), usage_text.data());
  return exit_usage;
}

struct options {
  std::string kind;
  std::string file;
  std::string source_file;
  std::string nodes_file;
  bool json = false;
  core::validation_options validation;
};

// Fills `o`; returns an exit code when parsing ends the command (help or a usage error).
std::optional<int> parse_args(args a, options& o) {
  std::vector<std::string_view> positional;
  bool saw_source = false;
  bool saw_nodes = false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    std::string_view arg = a[i];
    if (arg == "-h" || arg == "--help") {
      std::fwrite(usage_text.data(), 1, usage_text.size(), stdout);
      return exit_valid;
    }
    if (arg == "-" || arg.substr(0, 2) != "--") {
      positional.push_back(arg);
      continue;
    }
    if (arg == "--") {
      for (++i; i < a.size(); ++i) positional.push_back(a[i]);
      break;
    }
    // --name=value or --name value
    std::string_view name = arg;
    std::optional<std::string_view> value;
    if (const std::size_t eq = arg.find('='); eq != std::string_view::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    }
    const bool takes_value = name == "--output" || name == "--source" || name == "--nodes" ||
                             name == "--worker-namespace" || name == "--reserved-prefix";
    if (!takes_value) return usage_error("unknown option " + std::string(arg));
    if (!value) {
      if (i + 1 >= a.size()) return usage_error(std::string(name) + " needs a value");
      value = a[++i];
    }
    if (name == "--output") {
      if (*value == "json") {
        o.json = true;
      } else if (*value == "text") {
        o.json = false;
      } else {
        return usage_error("--output must be text or json");
      }
    } else if (name == "--source") {
      o.source_file = std::string(*value);
      saw_source = true;
    } else if (name == "--nodes") {
      o.nodes_file = std::string(*value);
      saw_nodes = true;
    } else if (name == "--worker-namespace") {
      if (value->empty()) return usage_error("--worker-namespace must not be empty");
      o.validation.worker_namespace = std::string(*value);
    } else {
      if (value->empty()) return usage_error("--reserved-prefix must not be empty");
      o.validation.reserved_prefixes.emplace_back(*value);
    }
  }
  if (positional.empty()) return usage_error("missing what to validate");
  o.kind = std::string(positional[0]);
  if (o.kind != "topologysource" && o.kind != "snapshot" && o.kind != "modeldeployment" &&
      o.kind != "nodelabels") {
    return usage_error("unknown kind \"" + o.kind +
                       "\" (topologysource, snapshot, modeldeployment or nodelabels)");
  }
  if (o.kind == "nodelabels") {
    // The Node list is the input; there is no FILE.
    if (positional.size() > 1) return usage_error("nodelabels takes no FILE (use --nodes)");
    if (!saw_source || !saw_nodes)
      return usage_error("nodelabels needs --source TOPOLOGYSOURCE_FILE and --nodes NODES_FILE");
    if (o.source_file == "-" && o.nodes_file == "-")
      return usage_error("standard input (-) can be read only once");
    o.file = o.nodes_file;
    return std::nullopt;
  }
  if (positional.size() < 2) return usage_error("missing FILE");
  if (positional.size() > 2) return usage_error("one FILE at a time");
  o.file = std::string(positional[1]);
  if (o.kind == "snapshot" && !saw_source)
    return usage_error("snapshot needs --source TOPOLOGYSOURCE_FILE");
  const int stdin_uses = (o.file == "-") + (o.source_file == "-") + (o.nodes_file == "-");
  if (stdin_uses > 1) return usage_error("standard input (-) can be read only once");
  if (o.kind != "snapshot" && (saw_source || saw_nodes)) {
    return usage_error("--source and --nodes apply to snapshot and nodelabels only");
  }
  return std::nullopt;
}

bool read_input(const std::string& path, std::string& out) {
  const std::string real = path == "-" ? "/dev/stdin" : path;
  auto read = util::read_file(real, max_input_bytes);
  if (!read) {
    std::fprintf(stderr, "topogate validate: %s\n", read.error().message.c_str());
    return false;
  }
  out = std::move(*read);
  return true;
}

// Too large to read at all: still an S10 verdict, not an I/O failure.
bool larger_than_cap(const std::string& path, std::size_t& size) {
  struct stat st {};
  if (path == "-" || ::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  size = static_cast<std::size_t>(st.st_size);
  return size > max_input_bytes;
}

// A decodable snapshot's canonical JSON (what topogate serves) against S10's limit.
struct snapshot_size {
  std::size_t canonical_bytes = 0;
  std::size_t nodes = 0;
};

// `input` names the file the errors belong to when it is not FILE itself (a snapshot is
// judged only against a valid source and a decodable Node list).
int report(const options& o, const core::error_list& errors,
           const std::vector<std::string>& warnings, std::string_view input = {},
           const std::optional<snapshot_size>& size = std::nullopt) {
  const bool valid = errors.empty();
  if (o.json) {
    std::string out = "{\"valid\":";
    out += valid ? "true" : "false";
    if (!input.empty()) {
      out += ",\"input\":";
      core::append_json_string(out, input);
    }
    if (size) {
      out += ",\"nodes\":" + std::to_string(size->nodes) +
             ",\"canonicalJsonBytes\":" + std::to_string(size->canonical_bytes) +
             ",\"maxBytes\":" + std::to_string(core::max_snapshot_bytes);
    }
    out += ",\"errors\":";
    out += core::render_json(errors);
    out += ",\"warnings\":[";
    for (std::size_t i = 0; i < warnings.size(); ++i) {
      if (i) out.push_back(',');
      core::append_json_string(out, warnings[i]);
    }
    out += "]}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  } else {
    for (const auto& w : warnings) std::printf("warning: %s\n", w.c_str());
    const std::string text = core::render_text(errors);
    std::fwrite(text.data(), 1, text.size(), stdout);
    if (valid && size) {
      std::printf("%s: valid %s: %zu Node%s, %zu bytes as canonical JSON (%.1f%% of %zu)\n",
                  o.file.c_str(), o.kind.c_str(), size->nodes, size->nodes == 1 ? "" : "s",
                  size->canonical_bytes,
                  std::floor(static_cast<double>(size->canonical_bytes) * 1000.0 /
                             static_cast<double>(core::max_snapshot_bytes)) /
                      10.0,
                  core::max_snapshot_bytes);
    } else if (valid) {
      std::printf("%s: valid %s\n", o.file.c_str(), o.kind.c_str());
    } else if (!input.empty()) {
      std::fprintf(stderr, "%s: the %.*s is invalid (%zu error%s); the %s was not checked\n",
                   o.file.c_str(), static_cast<int>(input.size()), input.data(), errors.size(),
                   errors.size() == 1 ? "" : "s",
                   o.kind == "nodelabels" ? "Node-label hierarchy" : "snapshot");
    } else {
      std::fprintf(stderr, "%s: invalid %s (%zu error%s)\n", o.file.c_str(), o.kind.c_str(),
                   errors.size(), errors.size() == 1 ? "" : "s");
    }
  }
  std::fflush(stdout);
  return valid ? exit_valid : exit_invalid;
}

int validate_snapshot_file(const options& o) {
  std::string source_text;
  if (!read_input(o.source_file, source_text)) return exit_usage;
  auto source = core::validate_topology_source_text(source_text, o.validation);
  if (!source.ok()) {
    return report(o, source.errors, {}, "source");
  }

  std::optional<core::node_list> selected;
  if (!o.nodes_file.empty()) {
    std::string nodes_text;
    if (!read_input(o.nodes_file, nodes_text)) return exit_usage;
    auto nodes = core::parse_node_list(nodes_text);
    if (!nodes.ok()) {
      return report(o, nodes.errors, {}, "nodes");
    }
    selected = core::select_nodes(nodes.list, source.source);
  }

  std::size_t size = 0;
  if (larger_than_cap(o.file, size)) {
    return report(o, {core::too_long("S10", "", size, core::max_snapshot_bytes)}, {});
  }
  std::string text;
  if (!read_input(o.file, text)) return exit_usage;
  core::snapshot_context ctx;
  ctx.source = &source.source;
  ctx.nodes = selected ? &*selected : nullptr;
  const core::error_list errors = core::check_snapshot(text, ctx);
  // S10 counts the file and topogate's canonical JSON of it (what is served, and what
  // topogate_inventory_snapshot_bytes exports): each warns past 0.9 of the limit.
  std::vector<std::string> warnings;
  if (auto w = core::snapshot_size_warning(text.size(), o.file == "-" ? "the input" : o.file);
      !w.empty())
    warnings.push_back(std::move(w));
  std::optional<snapshot_size> measured;
  if (auto decoded = core::decode_snapshot(text); decoded.ok()) {
    measured =
        snapshot_size{core::render_snapshot_json(decoded.value).size(), decoded.value.nodes.size()};
    if (auto w = core::snapshot_size_warning(
            measured->canonical_bytes,
            (o.file == "-" ? "the input" : o.file) + " as canonical JSON");
        !w.empty())
      warnings.push_back(std::move(w));
  }
  return report(o, errors, warnings, {}, measured);
}

int validate_node_labels(const options& o) {
  std::string source_text;
  if (!read_input(o.source_file, source_text)) return exit_usage;
  auto source = core::validate_topology_source_text(source_text, o.validation);
  if (!source.ok()) return report(o, source.errors, {}, "source");
  if (!source.source.node_labels) {
    // A writing source's Nodes carry what topogate publishes: check its snapshot instead.
    std::fprintf(stderr,
                 "topogate validate: %s is not a nodeLabels source (spec.nodeLabels); "
                 "validate its snapshot with `topogate validate snapshot`\n",
                 o.source_file.c_str());
    return exit_usage;
  }
  std::string nodes_text;
  if (!read_input(o.nodes_file, nodes_text)) return exit_usage;
  auto nodes = core::parse_node_list(nodes_text);
  if (!nodes.ok()) return report(o, nodes.errors, {}, "nodes");

  const core::node_label_report r = core::check_node_labels(source.source, nodes.list);
  if (o.json) {
    // The other commands' {"valid","errors","warnings"} plus the summary.
    std::string out = core::render_node_label_report_json(r);
    out.pop_back();
    out += ",\"warnings\":[]}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
    std::fflush(stdout);
    return r.ok() ? exit_valid : exit_invalid;
  }
  const std::string table = core::render_node_label_report_text(r);
  std::fwrite(table.data(), 1, table.size(), stdout);
  if (!r.ok()) std::fputc('\n', stdout);
  return report(o, r.errors, {});
}

}  // namespace

int run_validate(args a) {
  options o;
  if (const auto done = parse_args(a, o)) return *done;
  if (o.kind == "snapshot") return validate_snapshot_file(o);
  if (o.kind == "nodelabels") return validate_node_labels(o);

  std::string text;
  if (!read_input(o.file, text)) return exit_usage;
  if (o.kind == "topologysource") {
    const auto r = core::validate_topology_source_text(text, o.validation);
    return report(o, r.errors, r.warnings);
  }
  const auto r = core::validate_model_deployment_text(text);
  return report(o, r.errors, r.warnings);
}

}  // namespace topogate::cli
