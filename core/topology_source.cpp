#include "topology_source.hpp"

#include <algorithm>
#include <initializer_list>

#include "profile.hpp"
#include "syntax.hpp"

namespace topogate::core {

namespace {

constexpr std::string_view group_v1alpha1 = "worker.gpustack.ai/v1alpha1";
constexpr std::string_view group_v1 = "worker.gpustack.ai/v1";
constexpr std::size_t max_levels = 16;
constexpr std::size_t max_warning_length = 120;
constexpr std::string_view gpustack_topology_prefix = "topology.gpustack.ai/";
constexpr std::string_view profile_label = "topology.gpustack.ai/profile";

// Admission warnings travel in an HTTP header (Warning:), which the API server caps at
// 120 characters and which must not carry control characters.
void add_warning(std::vector<std::string>& warnings, std::string_view text) {
  std::string out;
  out.reserve(std::min(text.size(), max_warning_length));
  for (char c : text) {
    const auto b = static_cast<unsigned char>(c);
    out.push_back(b < 0x20 || b == 0x7f ? ' ' : c);
  }
  if (out.size() > max_warning_length) {
    std::size_t cut = max_warning_length - 3;
    // Never split a UTF-8 sequence.
    while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;
    out.resize(cut);
    out += "...";
  }
  warnings.push_back(std::move(out));
}

bool is_string_scalar(const doc_node& n) noexcept {
  return n.is_scalar() && n.tag == doc_node::scalar_tag::str;
}

// What a wrong-typed node looks like in an error: its text for a scalar, else its kind.
std::string_view shown(const doc_node& n) noexcept {
  return n.is_scalar() ? n.as_string() : n.kind_name();
}

// A field Kubernetes types as a string. Absent and null read as "not set" (nullopt, no
// error); anything but a string scalar (a number, a bool, a list) is an error, as the API
// server's schema validation would make it.
std::optional<std::string_view> string_field(const doc_node* n, const std::string& path,
                                             std::string_view rule, error_list& errors) {
  if (n == nullptr || n->is_null()) return std::nullopt;
  if (!is_string_scalar(*n)) {
    errors.push_back(invalid(std::string(rule), path, shown(*n), "must be a string"));
    return std::nullopt;
  }
  return n->as_string();
}

// A mapping-typed field; nullptr when absent or null, an error when another type.
const doc_node* object_field(const doc_node* n, const std::string& path, std::string_view rule,
                             error_list& errors) {
  if (n == nullptr || n->is_null()) return nullptr;
  if (!n->is_mapping()) {
    errors.push_back(invalid(std::string(rule), path, shown(*n), "must be an object"));
    return nullptr;
  }
  return n;
}

// The API server prunes unknown fields before admission, so these only show up in files
// checked with `topogate validate`: a typo there silently drops a setting.
void warn_unknown_fields(const doc_node& obj, std::string_view path,
                         std::initializer_list<std::string_view> known,
                         std::vector<std::string>& warnings) {
  for (const auto& [k, v] : obj.map) {
    if (std::find(known.begin(), known.end(), k) == known.end()) {
      add_warning(warnings, "unknown field \"" + child(path, k) + "\" is ignored");
    }
  }
}

// A metav1.Duration field that must be set and positive. Returns the parsed value when it
// is valid. Unlike the consumer (which refuses the whole request with HTTP 400), a
// malformed duration is reported here as a field error of the rule.
std::optional<std::chrono::nanoseconds> positive_duration(const doc_node* n,
                                                          const std::string& path,
                                                          std::string_view rule, error_list& errors,
                                                          std::string& raw) {
  if (n == nullptr || n->is_null()) {
    errors.push_back(
        required(std::string(rule), path, "a positive duration such as 30s, 1m or 5m"));
    return std::nullopt;
  }
  if (!is_string_scalar(*n)) {
    errors.push_back(
        invalid(std::string(rule), path, shown(*n),
                "must be a duration string such as \"1m\" (a number is not a duration)"));
    return std::nullopt;
  }
  raw = std::string(n->as_string());
  std::string err;
  const auto d = parse_go_duration(raw, &err);
  if (!d) {
    errors.push_back(
        invalid(std::string(rule), path, raw, err + " (units: ns, us, ms, s, m, h; e.g. 1h30m)"));
    return std::nullopt;
  }
  if (d->count() <= 0) {
    errors.push_back(invalid(std::string(rule), path, raw, "must be greater than zero"));
    return std::nullopt;
  }
  return d;
}

// T13: a reference to a ConfigMap or Secret, which the controller only reads in the
// worker namespace (a cluster-scoped source must not become a path to other namespaces).
std::optional<object_ref> object_reference(const doc_node* n, const std::string& path,
                                           bool is_required, const validation_options& opts,
                                           error_list& errors, std::vector<std::string>& warnings) {
  if (n == nullptr || n->is_null()) {
    if (is_required) errors.push_back(required("T13", path, "a reference {namespace, name}"));
    return std::nullopt;
  }
  const doc_node* obj = object_field(n, path, "T13", errors);
  if (obj == nullptr) return std::nullopt;
  warn_unknown_fields(*obj, path, {"namespace", "name"}, warnings);
  object_ref ref;

  const std::string ns_path = child(path, "namespace");
  const auto ns = string_field(obj->find("namespace"), ns_path, "T13", errors);
  if (ns && !ns->empty()) {
    ref.namespace_ = std::string(*ns);
    if (*ns != opts.worker_namespace) {
      auto e = forbidden("T13", ns_path,
                         "\"" + ref.namespace_ + "\" is outside the worker namespace \"" +
                             opts.worker_namespace + "\"; every reference must be in it");
      e.bad_value = ref.namespace_;
      e.has_value = true;
      errors.push_back(std::move(e));
    }
  } else if (!ns && obj->find("namespace") != nullptr && !obj->find("namespace")->is_null()) {
    // wrong type, already reported
  } else {
    errors.push_back(required("T13", ns_path, "must be \"" + opts.worker_namespace + "\""));
  }

  const std::string name_path = child(path, "name");
  const auto name = string_field(obj->find("name"), name_path, "T13", errors);
  if (name && !name->empty()) {
    ref.name = std::string(*name);
    for (auto& msg : check_dns1123_subdomain(*name))
      errors.push_back(invalid("T13", name_path, *name, msg));
  } else if (!name && obj->find("name") != nullptr && !obj->find("name")->is_null()) {
    // wrong type, already reported
  } else {
    errors.push_back(required("T13", name_path));
  }
  return ref;
}

bool starts_with(std::string_view s, std::string_view p) noexcept {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) noexcept {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

std::string lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Query parameters whose names suggest a credential; credentials belong in a Secret.
bool looks_like_credential(std::string_view name) {
  static constexpr std::string_view names[] = {"token",  "access_token", "password", "passwd",
                                               "secret", "key",          "api_key",  "apikey",
                                               "auth",   "signature",    "sig"};
  const std::string lower = lower_ascii(name);
  return std::find(std::begin(names), std::end(names), lower) != std::end(names);
}

// Never echo a credential: user info and credential-looking query values are masked.
std::string redact_url(std::string_view raw) {
  std::string out;
  std::string_view rest = raw;
  if (const std::size_t scheme_end = rest.find("://"); scheme_end != std::string_view::npos) {
    out += rest.substr(0, scheme_end + 3);
    rest.remove_prefix(scheme_end + 3);
    const std::size_t authority_end = std::min(rest.find_first_of("/?#"), rest.size());
    const std::string_view authority = rest.substr(0, authority_end);
    if (const std::size_t at = authority.rfind('@'); at != std::string_view::npos) {
      out += "redacted@";
      out += authority.substr(at + 1);
    } else {
      out += authority;
    }
    rest.remove_prefix(authority_end);
  }
  const std::size_t q = rest.find('?');
  if (q == std::string_view::npos) return out += rest;
  out += rest.substr(0, q + 1);
  rest.remove_prefix(q + 1);
  const std::size_t hash = std::min(rest.find('#'), rest.size());
  std::string_view query = rest.substr(0, hash);
  bool first = true;
  while (true) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    if (!first) out.push_back('&');
    first = false;
    const std::size_t eq = pair.find('=');
    if (eq != std::string_view::npos && looks_like_credential(pair.substr(0, eq))) {
      out += pair.substr(0, eq + 1);
      out += "redacted";
    } else {
      out += pair;
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  out += rest.substr(hash);
  return out;
}

void check_webhook_url(const doc_node* n, webhook_source& wh, error_list& errors,
                       std::vector<std::string>& warnings) {
  const std::string path = "spec.webhook.url";
  const auto url = string_field(n, path, "T9", errors);
  if (!url) {
    if (n == nullptr || n->is_null())
      errors.push_back(required("T9", path, "an absolute https:// URL"));
    return;
  }
  wh.url = std::string(*url);
  if (url->empty()) {
    errors.push_back(required("T9", path, "an absolute https:// URL"));
    return;
  }
  const std::string shown_url = redact_url(*url);
  std::string err;
  const auto parsed = parse_url(*url, &err);
  if (!parsed) {
    errors.push_back(invalid("T9", path, shown_url, "not a valid URL: " + err));
    return;
  }
  if (parsed->scheme.empty()) {
    errors.push_back(
        invalid("T9", path, shown_url, "must be an absolute URL with the https scheme"));
  } else if (lower_ascii(parsed->scheme) != "https") {
    errors.push_back(invalid("T9", path, shown_url,
                             "scheme must be https (the snapshot is fetched only over TLS)"));
  }
  if (parsed->host.empty()) {
    errors.push_back(invalid("T9", path, shown_url, "must have a host name"));
  }
  if (parsed->has_user_info) {
    errors.push_back(invalid("T9", path, shown_url,
                             "must not contain user information; use bearerTokenSecretRef or "
                             "tlsClientCertificateSecretRef"));
  }
  if (!parsed->fragment.empty()) {
    errors.push_back(invalid("T9", path, shown_url, "must not have a fragment"));
  }
  // Go's url.ParseQuery splits on '&'; a name is what precedes the first '='.
  std::string_view query = parsed->raw_query;
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::string_view name = pair.substr(0, pair.find('='));
    if (pair.find('=') != std::string_view::npos && looks_like_credential(name)) {
      add_warning(warnings, "spec.webhook.url: query parameter \"" + std::string(name) +
                                "\" looks like a credential; keep credentials in a Secret");
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
}

void check_levels(const doc_node* n, topology_source& src, error_list& errors) {
  const std::string path = "spec.levels";
  if (n == nullptr || n->is_null()) {
    errors.push_back(required("T1", path, "1 to 16 label keys, coarsest first"));
    return;
  }
  if (!n->is_sequence()) {
    errors.push_back(invalid("T1", path, shown(*n), "must be a list of label keys"));
    return;
  }
  if (n->items.empty()) {
    errors.push_back(required("T1", path, "1 to 16 label keys, coarsest first"));
    return;
  }
  if (n->items.size() > max_levels) {
    errors.push_back(too_many("T1", path, n->items.size(), max_levels));
  }
  for (std::size_t i = 0; i < n->items.size(); ++i) {
    const doc_node& item = n->items[i];
    const std::string item_path = index(path, i);
    if (!is_string_scalar(item)) {
      errors.push_back(invalid("T2", item_path, shown(item), "must be a label key string"));
      continue;
    }
    const std::string_view level = item.as_string();
    for (auto& msg : check_qualified_name(level))
      errors.push_back(invalid("T2", item_path, level, msg));
    if (level == hostname_label) {
      errors.push_back(forbidden("T3", item_path,
                                 "kubernetes.io/hostname is always appended as the final level; "
                                 "remove it from levels"));
    }
    // A repeated level would describe one Node label as two tiers of the hierarchy.
    if (std::find(src.levels.begin(), src.levels.end(), level) != src.levels.end()) {
      errors.push_back(duplicate("T4", item_path, level));
    }
    src.levels.emplace_back(level);
  }
}

void check_write_prefix(const doc_node* n, topology_source& src, const validation_options& opts,
                        error_list& errors) {
  const std::string path = "spec.additionalWritePrefix";
  const auto prefix = string_field(n, path, "T6", errors);
  if (!prefix) return;
  src.additional_write_prefix = std::string(*prefix);
  constexpr std::string_view shape =
      "must be one DNS subdomain followed by exactly one '/', e.g. topology.example.com/";
  if (prefix->empty() || prefix->back() != '/') {
    errors.push_back(invalid("T6", path, *prefix, std::string(shape)));
    return;
  }
  const std::string_view domain = prefix->substr(0, prefix->size() - 1);
  if (domain.find('/') != std::string_view::npos || domain.empty()) {
    errors.push_back(invalid("T6", path, *prefix, std::string(shape)));
    return;
  }
  const auto msgs = check_dns1123_subdomain(domain);
  for (auto& msg : msgs) errors.push_back(invalid("T6", path, *prefix, "prefix " + msg));
  if (!msgs.empty()) return;
  for (std::string_view reserved : opts.reserved_prefixes) {
    while (!reserved.empty() && reserved.back() == '/') reserved.remove_suffix(1);
    if (reserved.empty()) continue;
    // The domain itself and every subdomain of it: "sub.kubernetes.io" is Kubernetes's,
    // "notkubernetes.io" is not.
    const bool subdomain = domain.size() > reserved.size() &&
                           domain[domain.size() - reserved.size() - 1] == '.' &&
                           ends_with(domain, reserved);
    if (domain == reserved || subdomain) {
      errors.push_back(invalid("T6", path, *prefix,
                               "\"" + std::string(reserved) +
                                   "\" and its subdomains are reserved and cannot be delegated"));
      break;
    }
  }
}

void check_config_map(const doc_node& cm, topology_source& src, const validation_options& opts,
                      error_list& errors, std::vector<std::string>& warnings) {
  const std::string path = "spec.configMap";
  warn_unknown_fields(cm, path, {"configMapRef", "key", "maxStaleness"}, warnings);
  configmap_source out;
  out.config_map_ref = object_reference(cm.find("configMapRef"), child(path, "configMapRef"), true,
                                        opts, errors, warnings);
  const std::string key_path = child(path, "key");
  const auto key = string_field(cm.find("key"), key_path, "T8", errors);
  if (key) out.key = std::string(*key);
  if ((key && is_blank(*key)) ||
      (!key && (cm.find("key") == nullptr || cm.find("key")->is_null()))) {
    errors.push_back(required("T8", key_path, "the ConfigMap data key holding the snapshot"));
  } else if (key) {
    // ConfigMap data keys are [-._a-zA-Z0-9]+ (at most 253): any other key can never exist.
    const bool well_formed = key->size() <= 253 && *key != "." && *key != ".." &&
                             !starts_with(*key, "..") &&
                             std::all_of(key->begin(), key->end(), [](char c) {
                               return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                                      (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
                             });
    if (!well_formed)
      add_warning(warnings,
                  "spec.configMap.key is not a valid ConfigMap key; no ConfigMap can hold it");
  }
  positive_duration(cm.find("maxStaleness"), child(path, "maxStaleness"), "T8", errors,
                    out.max_staleness);
  src.config_map = std::move(out);
}

void check_webhook(const doc_node& wh_node, topology_source& src, const validation_options& opts,
                   error_list& errors, std::vector<std::string>& warnings) {
  const std::string path = "spec.webhook";
  warn_unknown_fields(wh_node, path,
                      {"url", "pollInterval", "timeout", "maxStaleness", "caBundleConfigMapRef",
                       "bearerTokenSecretRef", "tlsClientCertificateSecretRef"},
                      warnings);
  webhook_source wh;
  check_webhook_url(wh_node.find("url"), wh, errors, warnings);
  const auto poll = positive_duration(wh_node.find("pollInterval"), child(path, "pollInterval"),
                                      "T10", errors, wh.poll_interval);
  const auto timeout =
      positive_duration(wh_node.find("timeout"), child(path, "timeout"), "T10", errors, wh.timeout);
  const auto stale = positive_duration(wh_node.find("maxStaleness"), child(path, "maxStaleness"),
                                       "T10", errors, wh.max_staleness);
  // A poll that may outlast its interval would overlap the next one.
  if (poll && timeout && *timeout > *poll) {
    errors.push_back(
        invalid("T11", child(path, "timeout"), wh.timeout,
                "must not exceed spec.webhook.pollInterval (" + format_go_duration(*poll) + ")"));
  }
  if (poll && stale && *stale < *poll) {
    add_warning(warnings, "spec.webhook.maxStaleness (" + format_go_duration(*stale) +
                              ") is shorter than pollInterval (" + format_go_duration(*poll) +
                              "): labels expire between polls");
  }
  wh.ca_bundle_config_map_ref =
      object_reference(wh_node.find("caBundleConfigMapRef"), child(path, "caBundleConfigMapRef"),
                       false, opts, errors, warnings);
  const doc_node* bearer = wh_node.find("bearerTokenSecretRef");
  const doc_node* mtls = wh_node.find("tlsClientCertificateSecretRef");
  const bool has_bearer = bearer != nullptr && !bearer->is_null();
  const bool has_mtls = mtls != nullptr && !mtls->is_null();
  if (!has_bearer && !has_mtls) {
    errors.push_back(required(
        "T12", path, "exactly one of bearerTokenSecretRef or tlsClientCertificateSecretRef"));
  } else if (has_bearer && has_mtls) {
    errors.push_back(forbidden("T12", child(path, "tlsClientCertificateSecretRef"),
                               "may not be set together with bearerTokenSecretRef: use exactly one "
                               "authentication method"));
  }
  wh.bearer_token_secret_ref =
      object_reference(bearer, child(path, "bearerTokenSecretRef"), false, opts, errors, warnings);
  wh.tls_client_certificate_secret_ref = object_reference(
      mtls, child(path, "tlsClientCertificateSecretRef"), false, opts, errors, warnings);
  src.webhook = std::move(wh);
}

}  // namespace

bool label_selector::matches(const std::vector<std::pair<std::string, std::string>>& labels) const {
  auto lookup = [&](std::string_view k) -> const std::string* {
    for (const auto& [lk, lv] : labels) {
      if (lk == k) return &lv;
    }
    return nullptr;
  };
  for (const auto& [k, v] : match_labels) {
    const std::string* have = lookup(k);
    if (have == nullptr || *have != v) return false;
  }
  for (const auto& req : match_expressions) {
    const std::string* have = lookup(req.key);
    const bool in_values = have != nullptr && std::find(req.values.begin(), req.values.end(),
                                                        *have) != req.values.end();
    if (req.op == "In") {
      if (!in_values) return false;
    } else if (req.op == "NotIn") {
      if (in_values) return false;
    } else if (req.op == "Exists") {
      if (have == nullptr) return false;
    } else if (req.op == "DoesNotExist") {
      if (have != nullptr) return false;
    } else {
      return false;  // an invalid selector selects nothing
    }
  }
  return true;
}

void validate_label_selector(const doc_node& selector, std::string_view path, std::string_view rule,
                             error_list& errors, label_selector* out) {
  const std::string rule_s(rule);
  const std::string base(path);
  if (selector.is_null()) return;
  if (!selector.is_mapping()) {
    errors.push_back(invalid(rule_s, base, shown(selector), "must be a label selector object"));
    return;
  }
  label_selector sel;

  const std::string labels_path = child(base, "matchLabels");
  if (const doc_node* ml = object_field(selector.find("matchLabels"), labels_path, rule, errors)) {
    for (const auto& [k, v] : ml->map) {
      for (auto& msg : check_qualified_name(k))
        errors.push_back(invalid(rule_s, labels_path, k, msg));
      const std::string value_path = key(labels_path, k);
      std::string value;
      if (v.is_null()) {
        value.clear();  // null reads as ""
      } else if (!is_string_scalar(v)) {
        errors.push_back(invalid(rule_s, value_path, shown(v), "must be a string"));
        continue;
      } else {
        value = std::string(v.as_string());
      }
      for (auto& msg : check_label_value(value))
        errors.push_back(invalid(rule_s, value_path, value, msg));
      sel.match_labels.emplace_back(k, std::move(value));
    }
  }

  const std::string expr_path = child(base, "matchExpressions");
  if (const doc_node* me = selector.find("matchExpressions"); me != nullptr && !me->is_null()) {
    if (!me->is_sequence()) {
      errors.push_back(invalid(rule_s, expr_path, shown(*me), "must be a list of requirements"));
    } else {
      for (std::size_t i = 0; i < me->items.size(); ++i) {
        const std::string item_path = index(expr_path, i);
        const doc_node* item = object_field(&me->items[i], item_path, rule, errors);
        if (item == nullptr) {
          if (me->items[i].is_null()) errors.push_back(required(rule_s, item_path));
          continue;
        }
        selector_requirement req;
        const std::string key_path = child(item_path, "key");
        if (const auto k = string_field(item->find("key"), key_path, rule, errors)) {
          req.key = std::string(*k);
          for (auto& msg : check_qualified_name(*k))
            errors.push_back(invalid(rule_s, key_path, *k, msg));
        } else if (item->find("key") == nullptr || item->find("key")->is_null()) {
          errors.push_back(required(rule_s, key_path));
        }

        const std::string values_path = child(item_path, "values");
        const doc_node* vs = item->find("values");
        const bool has_values = vs != nullptr && vs->is_sequence() && !vs->items.empty();
        if (vs != nullptr && !vs->is_null()) {
          if (!vs->is_sequence()) {
            errors.push_back(invalid(rule_s, values_path, shown(*vs), "must be a list of strings"));
          } else {
            for (std::size_t j = 0; j < vs->items.size(); ++j) {
              const std::string value_path = index(values_path, j);
              if (const auto v = string_field(&vs->items[j], value_path, rule, errors)) {
                for (auto& msg : check_label_value(*v))
                  errors.push_back(invalid(rule_s, value_path, *v, msg));
                req.values.emplace_back(*v);
              } else if (vs->items[j].is_null()) {
                req.values.emplace_back();
              }
            }
          }
        }
        const std::string op_path = child(item_path, "operator");
        const doc_node* op_node = item->find("operator");
        if (const auto op = string_field(op_node, op_path, rule, errors)) {
          req.op = std::string(*op);
          if (*op == "In" || *op == "NotIn") {
            if (!has_values) {
              errors.push_back(required(rule_s, values_path,
                                        "must be specified when `operator` is 'In' or 'NotIn'"));
            }
          } else if (*op == "Exists" || *op == "DoesNotExist") {
            if (has_values) {
              errors.push_back(
                  forbidden(rule_s, values_path,
                            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
            }
          } else {
            errors.push_back(
                not_supported(rule_s, op_path, *op, {"In", "NotIn", "Exists", "DoesNotExist"}));
          }
        } else if (op_node == nullptr || op_node->is_null()) {
          errors.push_back(required(rule_s, op_path));
        }
        sel.match_expressions.push_back(std::move(req));
      }
    }
  }
  if (out != nullptr) *out = std::move(sel);
}

source_result validate_topology_source(const doc_node& object, const validation_options& opts) {
  source_result r;
  auto& errors = r.errors;
  auto& src = r.source;
  if (!object.is_mapping()) {
    errors.push_back(invalid("", "", shown(object), "a TopologySource must be an object"));
    return r;
  }

  if (const auto av = string_field(object.find("apiVersion"), "apiVersion", "", errors)) {
    src.api_version = std::string(*av);
    if (*av != group_v1alpha1 && *av != group_v1) {
      errors.push_back(not_supported("", "apiVersion", *av,
                                     {std::string(group_v1alpha1), std::string(group_v1)}));
    }
  } else if (object.find("apiVersion") == nullptr || object.find("apiVersion")->is_null()) {
    errors.push_back(
        required("", "apiVersion", "worker.gpustack.ai/v1 or worker.gpustack.ai/v1alpha1"));
  }
  if (const auto kind = string_field(object.find("kind"), "kind", "", errors)) {
    if (*kind != "TopologySource")
      errors.push_back(not_supported("", "kind", *kind, {"TopologySource"}));
  } else if (object.find("kind") == nullptr || object.find("kind")->is_null()) {
    errors.push_back(required("", "kind", "TopologySource"));
  }
  if (const doc_node* meta = object_field(object.find("metadata"), "metadata", "", errors)) {
    const auto name = string_field(meta->find("name"), "metadata.name", "", errors);
    if (name && !name->empty()) {
      src.name = std::string(*name);
      for (auto& msg : check_dns1123_subdomain(*name))
        errors.push_back(invalid("", "metadata.name", *name, msg));
    } else if (meta->find("generateName") == nullptr &&
               (meta->find("name") == nullptr || meta->find("name")->is_null() || name)) {
      errors.push_back(required("", "metadata.name"));
    }
  } else if (object.find("metadata") == nullptr || object.find("metadata")->is_null()) {
    errors.push_back(required("", "metadata.name"));
  }

  doc_node empty_spec;
  empty_spec.k = doc_node::kind::mapping;
  const doc_node* spec = object_field(object.find("spec"), "spec", "", errors);
  if (spec == nullptr) {
    if (object.find("spec") != nullptr && !object.find("spec")->is_null()) return r;  // wrong type
    spec = &empty_spec;
  }
  warn_unknown_fields(
      *spec, "spec",
      {"levels", "nodeSelector", "additionalWritePrefix", "nodeLabels", "configMap", "webhook"},
      r.warnings);

  check_levels(spec->find("levels"), src, errors);

  check_write_prefix(spec->find("additionalWritePrefix"), src, opts, errors);
  if (const doc_node* nl = spec->find("nodeLabels");
      src.additional_write_prefix && nl != nullptr && !nl->is_null()) {
    errors.push_back(forbidden("T7", "spec.additionalWritePrefix",
                               "a nodeLabels source is read-only; a write prefix applies only to "
                               "configMap and webhook sources"));
  }

  if (const doc_node* sel = spec->find("nodeSelector"); sel != nullptr && !sel->is_null()) {
    label_selector parsed;
    validate_label_selector(*sel, "spec.nodeSelector", "T14", errors, &parsed);
    if (sel->is_mapping()) src.node_selector = std::move(parsed);
  }

  // T5: exactly one inventory path.
  const doc_node* node_labels = spec->find("nodeLabels");
  const doc_node* config_map = spec->find("configMap");
  const doc_node* webhook = spec->find("webhook");
  std::vector<std::string_view> set;
  if (node_labels != nullptr && !node_labels->is_null()) set.emplace_back("nodeLabels");
  if (config_map != nullptr && !config_map->is_null()) set.emplace_back("configMap");
  if (webhook != nullptr && !webhook->is_null()) set.emplace_back("webhook");
  if (set.empty()) {
    errors.push_back(required("T5", "spec", "exactly one of nodeLabels, configMap or webhook"));
  }
  for (std::size_t i = 1; i < set.size(); ++i) {
    errors.push_back(forbidden("T5", child("spec", set[i]),
                               "may not be set together with spec." + std::string(set[0]) +
                                   ": exactly one of nodeLabels, configMap or webhook"));
  }
  if (object_field(node_labels, "spec.nodeLabels", "T5", errors) != nullptr) src.node_labels = true;
  if (const doc_node* cm = object_field(config_map, "spec.configMap", "T5", errors)) {
    check_config_map(*cm, src, opts, errors, r.warnings);
  }
  if (const doc_node* wh = object_field(webhook, "spec.webhook", "T5", errors)) {
    check_webhook(*wh, src, opts, errors, r.warnings);
  }

  // A writing source whose levels it may not write publishes nothing of its own.
  const bool writing = (src.config_map.has_value() || src.webhook.has_value()) && set.size() == 1;
  if (writing && !src.levels.empty() &&
      std::none_of(src.levels.begin(), src.levels.end(), [&](const std::string& level) {
        return is_publishable_key(level, src) && !is_read_only_parent(level);
      })) {
    add_warning(r.warnings,
                "no level can be written by this source: use topology.gpustack.ai/* keys or "
                "additionalWritePrefix");
  }
  return r;
}

source_result validate_topology_source_text(json_decoder& decoder, std::string_view text,
                                            const validation_options& opts) {
  auto decoded = decode_any(decoder, text, "");
  if (!decoded.ok()) {
    source_result r;
    r.errors = std::move(decoded.errors);
    return r;
  }
  return validate_topology_source(decoded.root, opts);
}

source_result validate_topology_source_text(std::string_view text, const validation_options& opts) {
  auto decoded = decode_any(text, "");
  if (!decoded.ok()) {
    source_result r;
    r.errors = std::move(decoded.errors);
    return r;
  }
  return validate_topology_source(decoded.root, opts);
}

bool is_read_only_parent(std::string_view key) noexcept {
  return key == "topology.kubernetes.io/region" || key == "topology.kubernetes.io/zone";
}

bool is_publishable_key(std::string_view key, const topology_source& src) noexcept {
  if (starts_with(key, gpustack_topology_prefix) && key != profile_label) return true;
  if (src.additional_write_prefix && !src.additional_write_prefix->empty() &&
      src.additional_write_prefix->back() == '/' &&
      starts_with(key, *src.additional_write_prefix)) {
    return true;
  }
  return is_read_only_parent(key);
}

}  // namespace topogate::core
