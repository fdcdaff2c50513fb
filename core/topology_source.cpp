#include "topology_source.hpp"

#include <algorithm>
#include <array>
#include <initializer_list>

#include "document_internal.hpp"
#include "profile.hpp"
#include "syntax.hpp"
#include "topology_source_internal.hpp"

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

// A message from its pieces, in one allocation (a chain of + moves the text along copies
// as it grows, and a piece put in front of a string shifts it).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::size_t size = 0;
  for (const auto p : parts) size += p.size();
  std::string out;
  out.reserve(size);
  for (const auto p : parts) out += p;
  return out;
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
std::optional<std::string_view> string_field(const doc_node* n, const field_path& path,
                                             std::string_view rule, error_list& errors) {
  if (n == nullptr || n->is_null()) return std::nullopt;
  if (!is_string_scalar(*n)) {
    errors.push_back(invalid(std::string(rule), path.str(), shown(*n), "must be a string"));
    return std::nullopt;
  }
  return n->as_string();
}

// A mapping-typed field; nullptr when absent or null, an error when another type.
const doc_node* object_field(const doc_node* n, const field_path& path, std::string_view rule,
                             error_list& errors) {
  if (n == nullptr || n->is_null()) return nullptr;
  if (!n->is_mapping()) {
    errors.push_back(invalid(std::string(rule), path.str(), shown(*n), "must be an object"));
    return nullptr;
  }
  return n;
}

// The API server prunes unknown fields before admission, so these only show up in files
// checked with `topogate validate`: a typo there silently drops a setting.
//
// One pass over the mapping finds the known fields too (found[i] for known[i], nullptr when
// absent), which spares a lookup per field afterwards: keys are unique, so the first match is
// the one find() would return.
template <std::size_t N>
std::array<const doc_node*, N> known_fields(const doc_node& obj, const field_path& path,
                                            const std::array<std::string_view, N>& known,
                                            std::vector<std::string>& warnings) {
  std::array<const doc_node*, N> found{};
  for (const auto& [k, v] : obj.map) {
    std::size_t i = 0;
    while (i < N && !detail::same(k, known[i])) ++i;
    if (i < N) {
      if (found[i] == nullptr) found[i] = &v;
    } else {
      add_warning(warnings, "unknown field \"" + path.child(k).str() + "\" is ignored");
    }
  }
  return found;
}

// A metav1.Duration field that must be set and positive. Returns the parsed value when it
// is valid. Unlike the consumer (which refuses the whole request with HTTP 400), a
// malformed duration is reported here as a field error of the rule.
std::optional<std::chrono::nanoseconds> positive_duration(const doc_node* n, const field_path& path,
                                                          std::string_view rule, error_list& errors,
                                                          std::string_view& raw) {
  if (n == nullptr || n->is_null()) {
    // Unset is the zero duration to the consumer, which it reports as an invalid value.
    errors.push_back(invalid(std::string(rule), path.str(), "0s",
                             "must be positive: a duration such as 30s, 1m or 5m"));
    return std::nullopt;
  }
  if (!is_string_scalar(*n)) {
    errors.push_back(
        invalid(std::string(rule), path.str(), shown(*n),
                "must be a duration string such as \"1m\" (a number is not a duration)"));
    return std::nullopt;
  }
  raw = n->as_string();
  const auto d = parse_go_duration(raw);
  if (!d) {
    errors.push_back(
        invalid(std::string(rule), path.str(), raw,
                cat({d.error().message, " (units: ns, us, ms, s, m, h; e.g. 1h30m)"})));
    return std::nullopt;
  }
  if (d->count() <= 0) {
    errors.push_back(invalid(std::string(rule), path.str(), raw, "must be greater than zero"));
    return std::nullopt;
  }
  return *d;
}

// T13: a reference to a ConfigMap or Secret, which the controller only reads in the
// worker namespace (a cluster-scoped source must not become a path to other namespaces).
// `keep` false: only the checks (the reference itself is not returned).
std::optional<object_ref> object_reference(const doc_node* n, const field_path& path,
                                           bool is_required, const validation_options& opts,
                                           error_list& errors, std::vector<std::string>& warnings,
                                           bool keep) {
  doc_node empty_ref;
  empty_ref.k = doc_node::kind::mapping;
  if (n == nullptr || n->is_null()) {
    if (!is_required) return std::nullopt;
    // A required reference the consumer holds by value: unset is {namespace: "", name: ""},
    // which it reports field by field.
    n = &empty_ref;
  }
  const doc_node* obj = object_field(n, path, "T13", errors);
  if (obj == nullptr) return std::nullopt;
  static constexpr std::array<std::string_view, 2> fields = {"namespace", "name"};
  const auto [ns_node, name_node] = known_fields(*obj, path, fields, warnings);
  object_ref ref;

  const field_path ns_path = path.child("namespace");
  const auto ns = string_field(ns_node, ns_path, "T13", errors);
  if (ns && keep) ref.namespace_ = *ns;
  if (ns || ns_node == nullptr || ns_node->is_null()) {
    // The consumer compares the namespace with the worker namespace and reports any other,
    // the empty one included, as Forbidden.
    const std::string_view have = ns ? *ns : std::string_view();
    if (have != opts.worker_namespace) {
      auto e = forbidden("T13", ns_path.str(),
                         have.empty()
                             ? cat({"must be the worker namespace \"", opts.worker_namespace, "\""})
                             : cat({"\"", have, "\" is outside the worker namespace \"",
                                    opts.worker_namespace, "\"; every reference must be in it"}));
      e.bad_value = have;
      e.has_value = true;
      errors.push_back(std::move(e));
    }
  }

  const field_path name_path = path.child("name");
  const auto name = string_field(name_node, name_path, "T13", errors);
  if (name && !name->empty()) {
    if (keep) ref.name = *name;
    for (auto& msg : check_dns1123_subdomain(*name))
      errors.push_back(invalid("T13", name_path.str(), *name, std::move(msg)));
  } else if (name || name_node == nullptr || name_node->is_null()) {
    // An empty name is not a DNS-1123 subdomain: Invalid, as the consumer reports it.
    errors.push_back(
        invalid("T13", name_path.str(), "", "must be a DNS-1123 subdomain (a name is required)"));
  }
  if (!keep) return std::nullopt;
  return ref;
}

bool starts_with(std::string_view s, std::string_view p) noexcept {
  return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) noexcept {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// s in ASCII lower case equals `lower` (itself lower case).
bool equals_lower_ascii(std::string_view s, std::string_view lower) noexcept {
  if (s.size() != lower.size()) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// Query parameters whose names suggest a credential; credentials belong in a Secret.
bool looks_like_credential(std::string_view name) {
  static constexpr std::string_view names[] = {"token",  "access_token", "password", "passwd",
                                               "secret", "key",          "api_key",  "apikey",
                                               "auth",   "signature",    "sig"};
  return std::any_of(std::begin(names), std::end(names),
                     [&](std::string_view n) { return equals_lower_ascii(name, n); });
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

}  // namespace

namespace detail {

// The usual snapshot URL, "https://host[:port][/path]" with a host of letters, digits, '.' and
// '-', digits for the port and a path of unreserved characters and '/': Go's url.Parse
// accepts it with the https scheme, a host, no user information, no fragment and no query,
// so T9 has nothing to report, and the URL need not be parsed.
bool plain_https_url(std::string_view u) noexcept {
  constexpr std::string_view scheme = "https://";
  if (u.substr(0, scheme.size()) != scheme) return false;
  std::size_t i = scheme.size();
  const auto letter_or_digit = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  const std::size_t host = i;
  while (i < u.size() && (letter_or_digit(u[i]) || u[i] == '.' || u[i] == '-')) ++i;
  if (i == host) return false;
  if (i < u.size() && u[i] == ':') {
    const std::size_t port = ++i;
    while (i < u.size() && u[i] >= '0' && u[i] <= '9') ++i;
    if (i == port) return false;
  }
  if (i == u.size()) return true;
  if (u[i] != '/') return false;
  for (; i < u.size(); ++i) {
    const char c = u[i];
    if (!letter_or_digit(c) && c != '/' && c != '-' && c != '.' && c != '_' && c != '~')
      return false;
  }
  return true;
}

}  // namespace detail

namespace {

void check_webhook_url(const doc_node* n, webhook_source* wh, error_list& errors,
                       std::vector<std::string>& warnings) {
  constexpr field_path path("spec.webhook.url");
  const auto url = string_field(n, path, "T9", errors);
  // Unset and empty are the empty URL to the consumer, which it reports as invalid.
  if (!url) {
    if (n == nullptr || n->is_null())
      errors.push_back(invalid("T9", path.str(), "", "must be an absolute https:// URL"));
    return;
  }
  if (wh != nullptr) wh->url = *url;
  if (url->empty()) {
    errors.push_back(invalid("T9", path.str(), "", "must be an absolute https:// URL"));
    return;
  }
  if (detail::plain_https_url(*url)) return;  // nothing below can fail or warn
  // The URL as errors show it, redacted once for the first of them.
  std::string shown_url;
  bool redacted = false;
  const auto bad_url = [&](std::string detail) {
    if (!redacted) {
      shown_url = redact_url(*url);
      redacted = true;
    }
    errors.push_back(invalid("T9", path.str(), shown_url, std::move(detail)));
  };
  const auto parsed = parse_url(*url);
  if (!parsed) {
    bad_url(cat({"not a valid URL: ", parsed.error().message}));
    return;
  }
  if (parsed->scheme.empty()) {
    bad_url("must be an absolute URL with the https scheme");
  } else if (!equals_lower_ascii(parsed->scheme, "https")) {
    bad_url("scheme must be https (the snapshot is fetched only over TLS)");
  }
  if (parsed->host.empty()) {
    bad_url("must have a host name");
  }
  if (parsed->has_user_info) {
    bad_url(
        "must not contain user information; use bearerTokenSecretRef or "
        "tlsClientCertificateSecretRef");
  }
  if (!parsed->fragment.empty()) {
    bad_url("must not have a fragment");
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

void check_levels(const doc_node* n, topology_source* src, error_list& errors) {
  const char* const path = "spec.levels";
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
  if (src != nullptr) src->levels.reserve(n->items.size());
  for (std::size_t i = 0; i < n->items.size(); ++i) {
    const doc_node& item = n->items[i];
    if (!is_string_scalar(item)) {
      errors.push_back(invalid("T2", index(path, i), shown(item), "must be a label key string"));
      continue;
    }
    const std::string_view level = item.as_string();
    for (auto& msg : check_qualified_name(level))
      errors.push_back(invalid("T2", index(path, i), level, std::move(msg)));
    if (level == hostname_label) {
      errors.push_back(forbidden("T3", index(path, i),
                                 "kubernetes.io/hostname is always appended as the final level; "
                                 "remove it from levels"));
    }
    // A repeated level would describe one Node label as two tiers of the hierarchy: the
    // same text as an earlier level (the string items before it).
    for (std::size_t j = 0; j < i; ++j) {
      if (is_string_scalar(n->items[j]) && n->items[j].as_string() == level) {
        errors.push_back(duplicate("T4", index(path, i), level));
        break;
      }
    }
    if (src != nullptr) src->levels.emplace_back(level);
  }
}

// The prefix as set (even when invalid): what S5 then allows the source to write.
std::optional<std::string_view> check_write_prefix(const doc_node* n, topology_source* src,
                                                   const validation_options& opts,
                                                   error_list& errors) {
  const char* const path = "spec.additionalWritePrefix";
  const auto prefix = string_field(n, field_path(path), "T6", errors);
  // "" is unset, as the consumer reads it (templated manifests render it routinely).
  if (!prefix || prefix->empty()) return std::nullopt;
  if (src != nullptr) src->additional_write_prefix = std::string(*prefix);
  constexpr std::string_view shape =
      "must be one DNS subdomain followed by exactly one '/', e.g. topology.example.com/";
  if (prefix->back() != '/') {
    errors.push_back(invalid("T6", path, *prefix, std::string(shape)));
    return prefix;
  }
  const std::string_view domain = prefix->substr(0, prefix->size() - 1);
  if (domain.find('/') != std::string_view::npos || domain.empty()) {
    errors.push_back(invalid("T6", path, *prefix, std::string(shape)));
    return prefix;
  }
  if (!is_dns1123_subdomain(domain)) {
    for (auto& msg : check_dns1123_subdomain(domain))
      errors.push_back(invalid("T6", path, *prefix, cat({"prefix ", msg})));
    return prefix;
  }
  for (std::string_view reserved : opts.reserved_prefixes) {
    while (!reserved.empty() && reserved.back() == '/') reserved.remove_suffix(1);
    if (reserved.empty()) continue;
    // The domain itself and every subdomain of it: "sub.kubernetes.io" is Kubernetes's,
    // "notkubernetes.io" is not.
    const bool subdomain = domain.size() > reserved.size() &&
                           domain[domain.size() - reserved.size() - 1] == '.' &&
                           ends_with(domain, reserved);
    if (domain == reserved || subdomain) {
      // Forbidden, as the consumer reports a reserved domain.
      auto e = forbidden(
          "T6", path,
          cat({"\"", reserved, "\" and its subdomains are reserved and cannot be delegated"}));
      e.bad_value = *prefix;
      e.has_value = true;
      errors.push_back(std::move(e));
      break;
    }
  }
  return prefix;
}

void check_config_map(const doc_node& cm, topology_source* src, const validation_options& opts,
                      error_list& errors, std::vector<std::string>& warnings) {
  const bool keep = src != nullptr;
  constexpr field_path path("spec.configMap");
  static constexpr std::array<std::string_view, 3> fields = {"configMapRef", "key", "maxStaleness"};
  const auto [ref_node, key_node, stale_node] = known_fields(cm, path, fields, warnings);
  configmap_source out;
  out.config_map_ref =
      object_reference(ref_node, path.child("configMapRef"), true, opts, errors, warnings, keep);
  const field_path key_path = path.child("key");
  const auto key = string_field(key_node, key_path, "T8", errors);
  if (key && keep) out.key = std::string(*key);
  if ((key && is_blank(*key)) || (!key && (key_node == nullptr || key_node->is_null()))) {
    errors.push_back(required("T8", key_path.str(), "the ConfigMap data key holding the snapshot"));
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
  std::string_view stale;
  positive_duration(stale_node, path.child("maxStaleness"), "T8", errors, stale);
  if (keep) {
    out.max_staleness = stale;
    src->config_map = std::move(out);
  }
}

void check_webhook(const doc_node& wh_node, topology_source* src, const validation_options& opts,
                   error_list& errors, std::vector<std::string>& warnings) {
  const bool keep = src != nullptr;
  constexpr field_path path("spec.webhook");
  static constexpr std::array<std::string_view, 7> fields = {"url",
                                                             "pollInterval",
                                                             "timeout",
                                                             "maxStaleness",
                                                             "caBundleConfigMapRef",
                                                             "bearerTokenSecretRef",
                                                             "tlsClientCertificateSecretRef"};
  const auto [url_node, poll_node, timeout_node, stale_node, ca_node, bearer, mtls] =
      known_fields(wh_node, path, fields, warnings);
  webhook_source wh;
  check_webhook_url(url_node, keep ? &wh : nullptr, errors, warnings);
  std::string_view poll_text, timeout_text, stale_text;
  const auto poll =
      positive_duration(poll_node, path.child("pollInterval"), "T10", errors, poll_text);
  const auto timeout =
      positive_duration(timeout_node, path.child("timeout"), "T10", errors, timeout_text);
  const auto stale =
      positive_duration(stale_node, path.child("maxStaleness"), "T10", errors, stale_text);
  if (keep) {
    wh.poll_interval = poll_text;
    wh.timeout = timeout_text;
    wh.max_staleness = stale_text;
  }
  // A poll that may outlast its interval would overlap the next one.
  if (poll && timeout && *timeout > *poll) {
    errors.push_back(invalid(
        "T11", "spec.webhook.timeout", timeout_text,
        cat({"must not exceed spec.webhook.pollInterval (", format_go_duration(*poll), ")"})));
  }
  if (poll && stale && *stale < *poll) {
    add_warning(warnings, "spec.webhook.maxStaleness (" + format_go_duration(*stale) +
                              ") is shorter than pollInterval (" + format_go_duration(*poll) +
                              "): labels expire between polls");
  }
  wh.ca_bundle_config_map_ref = object_reference(ca_node, path.child("caBundleConfigMapRef"), false,
                                                 opts, errors, warnings, keep);
  const bool has_bearer = bearer != nullptr && !bearer->is_null();
  const bool has_mtls = mtls != nullptr && !mtls->is_null();
  // One Invalid at spec.webhook for none or both, as the consumer reports it.
  if (!has_bearer && !has_mtls) {
    errors.push_back(invalid("T12", "spec.webhook", "",
                             "exactly one of bearerTokenSecretRef or tlsClientCertificateSecretRef "
                             "is required; neither is set"));
  } else if (has_bearer && has_mtls) {
    errors.push_back(invalid("T12", "spec.webhook", "",
                             "exactly one of bearerTokenSecretRef or tlsClientCertificateSecretRef "
                             "is required; both are set"));
  }
  wh.bearer_token_secret_ref = object_reference(bearer, path.child("bearerTokenSecretRef"), false,
                                                opts, errors, warnings, keep);
  wh.tls_client_certificate_secret_ref = object_reference(
      mtls, path.child("tlsClientCertificateSecretRef"), false, opts, errors, warnings, keep);
  if (keep) src->webhook = std::move(wh);
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
  const field_path base(path);
  if (selector.is_null()) return;
  if (!selector.is_mapping()) {
    errors.push_back(
        invalid(rule_s, base.str(), shown(selector), "must be a label selector object"));
    return;
  }
  // Without `out` only the checks run: nothing is copied.
  label_selector sel;
  const bool keep = out != nullptr;

  const field_path labels_path = base.child("matchLabels");
  if (const doc_node* ml = object_field(selector.find("matchLabels"), labels_path, rule, errors)) {
    if (keep) sel.match_labels.reserve(ml->map.size());
    for (const auto& [k, v] : ml->map) {
      for (auto& msg : check_qualified_name(k))
        errors.push_back(invalid(rule_s, labels_path.str(), k, std::move(msg)));
      const field_path value_path = labels_path.key(k);
      std::string_view value;  // null reads as ""
      if (!v.is_null()) {
        if (!is_string_scalar(v)) {
          errors.push_back(invalid(rule_s, value_path.str(), shown(v), "must be a string"));
          continue;
        }
        value = v.as_string();
      }
      for (auto& msg : check_label_value(value))
        errors.push_back(invalid(rule_s, value_path.str(), value, std::move(msg)));
      if (keep) sel.match_labels.emplace_back(k, value);
    }
  }

  const field_path expr_path = base.child("matchExpressions");
  if (const doc_node* me = selector.find("matchExpressions"); me != nullptr && !me->is_null()) {
    if (!me->is_sequence()) {
      errors.push_back(
          invalid(rule_s, expr_path.str(), shown(*me), "must be a list of requirements"));
    } else {
      if (keep) sel.match_expressions.reserve(me->items.size());
      for (std::size_t i = 0; i < me->items.size(); ++i) {
        const field_path item_path = expr_path.index(i);
        const doc_node* item = object_field(&me->items[i], item_path, rule, errors);
        if (item == nullptr) {
          if (me->items[i].is_null()) errors.push_back(required(rule_s, item_path.str()));
          continue;
        }
        selector_requirement scratch;
        selector_requirement& req = keep ? sel.match_expressions.emplace_back() : scratch;
        const field_path key_path = item_path.child("key");
        const doc_node* key_node = item->find("key");
        if (const auto k = string_field(key_node, key_path, rule, errors)) {
          if (keep) req.key = std::string(*k);
          for (auto& msg : check_qualified_name(*k))
            errors.push_back(invalid(rule_s, key_path.str(), *k, std::move(msg)));
        } else if (key_node == nullptr || key_node->is_null()) {
          errors.push_back(required(rule_s, key_path.str()));
        }

        const field_path values_path = item_path.child("values");
        const doc_node* vs = item->find("values");
        const bool has_values = vs != nullptr && vs->is_sequence() && !vs->items.empty();
        if (vs != nullptr && !vs->is_null()) {
          if (!vs->is_sequence()) {
            errors.push_back(
                invalid(rule_s, values_path.str(), shown(*vs), "must be a list of strings"));
          } else {
            if (keep) req.values.reserve(vs->items.size());
            for (std::size_t j = 0; j < vs->items.size(); ++j) {
              const field_path value_path = values_path.index(j);
              if (const auto v = string_field(&vs->items[j], value_path, rule, errors)) {
                for (auto& msg : check_label_value(*v))
                  errors.push_back(invalid(rule_s, value_path.str(), *v, std::move(msg)));
                if (keep) req.values.emplace_back(*v);
              } else if (vs->items[j].is_null()) {
                if (keep) req.values.emplace_back();
              }
            }
          }
        }
        const field_path op_path = item_path.child("operator");
        const doc_node* op_node = item->find("operator");
        if (const auto op = string_field(op_node, op_path, rule, errors)) {
          if (keep) req.op = std::string(*op);
          if (*op == "In" || *op == "NotIn") {
            if (!has_values) {
              errors.push_back(required(rule_s, values_path.str(),
                                        "must be specified when `operator` is 'In' or 'NotIn'"));
            }
          } else if (*op == "Exists" || *op == "DoesNotExist") {
            if (has_values) {
              errors.push_back(
                  forbidden(rule_s, values_path.str(),
                            "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"));
            }
          } else {
            errors.push_back(not_supported(rule_s, op_path.str(), *op,
                                           {"In", "NotIn", "Exists", "DoesNotExist"}));
          }
        } else if (op_node == nullptr || op_node->is_null()) {
          errors.push_back(required(rule_s, op_path.str()));
        }
      }
    }
  }
  if (out != nullptr) *out = std::move(sel);
}

namespace {

// S5 (is_publishable_key) with the write prefix as set.
bool publishable(std::string_view key, std::optional<std::string_view> prefix) noexcept {
  if (starts_with(key, gpustack_topology_prefix) && key != profile_label) return true;
  if (prefix && !prefix->empty() && prefix->back() == '/' && starts_with(key, *prefix)) return true;
  return is_read_only_parent(key);
}

// Every check of a TopologySource, in order. With `src` the parsed source is filled in too;
// without it nothing is copied out of the document (the admission webhook needs only the
// verdict).
void check_source(const doc_node& object, const validation_options& opts, topology_source* src,
                  error_list& errors, std::vector<std::string>& warnings) {
  if (!object.is_mapping()) {
    errors.push_back(invalid("", "", shown(object), "a TopologySource must be an object"));
    return;
  }

  if (const auto av =
          string_field(object.find("apiVersion"), field_path("apiVersion"), "", errors)) {
    if (src != nullptr) src->api_version = std::string(*av);
    if (*av != group_v1alpha1 && *av != group_v1) {
      errors.push_back(not_supported("", "apiVersion", *av,
                                     {std::string(group_v1alpha1), std::string(group_v1)}));
    }
  } else if (object.find("apiVersion") == nullptr || object.find("apiVersion")->is_null()) {
    errors.push_back(
        required("", "apiVersion", "worker.gpustack.ai/v1 or worker.gpustack.ai/v1alpha1"));
  }
  if (const auto kind = string_field(object.find("kind"), field_path("kind"), "", errors)) {
    if (*kind != "TopologySource")
      errors.push_back(not_supported("", "kind", *kind, {"TopologySource"}));
  } else if (object.find("kind") == nullptr || object.find("kind")->is_null()) {
    errors.push_back(required("", "kind", "TopologySource"));
  }
  if (const doc_node* meta =
          object_field(object.find("metadata"), field_path("metadata"), "", errors)) {
    const auto name = string_field(meta->find("name"), field_path("metadata.name"), "", errors);
    if (name && !name->empty()) {
      if (src != nullptr) src->name = std::string(*name);
      for (auto& msg : check_dns1123_subdomain(*name))
        errors.push_back(invalid("", "metadata.name", *name, std::move(msg)));
    } else if (meta->find("generateName") == nullptr &&
               (meta->find("name") == nullptr || meta->find("name")->is_null() || name)) {
      errors.push_back(required("", "metadata.name"));
    }
  } else if (object.find("metadata") == nullptr || object.find("metadata")->is_null()) {
    errors.push_back(required("", "metadata.name"));
  }

  doc_node empty_spec;
  empty_spec.k = doc_node::kind::mapping;
  const doc_node* spec = object_field(object.find("spec"), field_path("spec"), "", errors);
  if (spec == nullptr) {
    if (object.find("spec") != nullptr && !object.find("spec")->is_null()) return;  // wrong type
    spec = &empty_spec;
  }
  static constexpr std::array<std::string_view, 6> spec_fields = {
      "levels", "nodeSelector", "additionalWritePrefix", "nodeLabels", "configMap", "webhook"};
  const auto [levels, sel, prefix_node, node_labels, config_map, webhook] =
      known_fields(*spec, field_path("spec"), spec_fields, warnings);

  check_levels(levels, src, errors);

  const auto prefix = check_write_prefix(prefix_node, src, opts, errors);
  if (prefix && node_labels != nullptr && !node_labels->is_null()) {
    errors.push_back(forbidden("T7", "spec.additionalWritePrefix",
                               "a nodeLabels source is read-only; a write prefix applies only to "
                               "configMap and webhook sources"));
  }

  if (sel != nullptr && !sel->is_null()) {
    label_selector parsed;
    error_list selector_errors;
    validate_label_selector(*sel, "spec.nodeSelector", "T14", selector_errors,
                            src != nullptr ? &parsed : nullptr);
    // The consumer reports one Invalid at spec.nodeSelector (the selector does not convert);
    // the causes follow with their own paths.
    if (!selector_errors.empty() &&
        !(selector_errors.size() == 1 && selector_errors.front().path == "spec.nodeSelector")) {
      errors.push_back(
          invalid("T14", "spec.nodeSelector", "",
                  "not a valid label selector: " + selector_errors.front().to_string()));
    }
    errors.insert(errors.end(), std::make_move_iterator(selector_errors.begin()),
                  std::make_move_iterator(selector_errors.end()));
    if (src != nullptr && sel->is_mapping()) src->node_selector = std::move(parsed);
  }

  // T5: exactly one inventory path.
  std::string_view set[3];
  std::size_t set_count = 0;
  if (node_labels != nullptr && !node_labels->is_null()) set[set_count++] = "nodeLabels";
  if (config_map != nullptr && !config_map->is_null()) set[set_count++] = "configMap";
  if (webhook != nullptr && !webhook->is_null()) set[set_count++] = "webhook";
  // One Invalid at spec for none or several, as the consumer reports it.
  if (set_count == 0) {
    errors.push_back(invalid("T5", "spec", "",
                             "exactly one of nodeLabels, configMap or webhook is required; none "
                             "is set"));
  } else if (set_count > 1) {
    std::string both =
        cat({"exactly one of nodeLabels, configMap or webhook is required; "
             "spec.",
             set[0]});
    for (std::size_t i = 1; i < set_count; ++i) both += cat({" and spec.", set[i]});
    errors.push_back(invalid("T5", "spec", "", both + " are set"));
  }
  if (object_field(node_labels, field_path("spec.nodeLabels"), "T5", errors) != nullptr &&
      src != nullptr)
    src->node_labels = true;
  bool writes = false;  // a configMap or webhook source
  if (const doc_node* cm = object_field(config_map, field_path("spec.configMap"), "T5", errors)) {
    check_config_map(*cm, src, opts, errors, warnings);
    writes = true;
  }
  if (const doc_node* wh = object_field(webhook, field_path("spec.webhook"), "T5", errors)) {
    check_webhook(*wh, src, opts, errors, warnings);
    writes = true;
  }

  // A writing source whose levels it may not write publishes nothing of its own. The levels
  // are the string items of spec.levels (check_levels skips the others).
  if (writes && set_count == 1 && levels != nullptr && levels->is_sequence()) {
    bool any_level = false;
    bool any_writable = false;
    for (const doc_node& item : levels->items) {
      if (!is_string_scalar(item)) continue;
      any_level = true;
      if (publishable(item.as_string(), prefix) && !is_read_only_parent(item.as_string())) {
        any_writable = true;
        break;
      }
    }
    if (any_level && !any_writable) {
      add_warning(warnings,
                  "no level can be written by this source: use topology.gpustack.ai/* keys or "
                  "additionalWritePrefix");
    }
  }
}

}  // namespace

source_result validate_topology_source(const doc_node& object, const validation_options& opts) {
  source_result r;
  check_source(object, opts, &r.source, r.errors, r.warnings);
  return r;
}

void check_topology_source(const doc_node& object, const validation_options& opts,
                           error_list& errors, std::vector<std::string>& warnings) {
  check_source(object, opts, nullptr, errors, warnings);
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
  return publishable(key, src.additional_write_prefix
                              ? std::optional<std::string_view>(*src.additional_write_prefix)
                              : std::nullopt);
}

}  // namespace topogate::core
