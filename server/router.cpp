#include "server/router.hpp"

#include <openssl/crypto.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <utility>

#include "core/admitted_kinds.hpp"
#include "core/syntax.hpp"
#include "inventory/registry.hpp"
#include "server/inventory_http.hpp"
#include "server/metrics.hpp"
#include "server/metrics_auth.hpp"

namespace topogate::server {

namespace {

constexpr std::string_view json_type = "application/json";
constexpr std::string_view metrics_type = "text/plain; version=0.0.4; charset=utf-8";

struct target_parts {
  std::string_view path;
  std::string_view query;
};

target_parts split_target(std::string_view target) {
  const auto q = target.find('?');
  if (q == std::string_view::npos) return {target, {}};
  return {target.substr(0, q), target.substr(q + 1)};
}

// The value of `name` in a query string (not percent-decoded: every value topogate reads
// is a duration or a flag). `present` tells `?verbose` from an absent parameter.
std::string_view query_param(std::string_view query, std::string_view name,
                             bool* present = nullptr) {
  if (present) *present = false;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const auto eq = pair.find('=');
    if (pair.substr(0, eq) == name) {
      if (present) *present = true;
      return eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1);
    }
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  return {};
}

response make(http::status status, std::string_view content_type, std::string body) {
  response res{status, 11};
  res.set(http::field::content_type, content_type);
  res.body() = shared_body::value_type(std::move(body));
  return res;
}

// The Allow header of a 405: the methods of every route with the request's path pattern.
std::string allow_header(std::uint8_t methods) {
  std::string out;
  for (const auto& [bit, name] : {std::pair{method_get, "GET"}, std::pair{method_head, "HEAD"},
                                  std::pair{method_post, "POST"}, std::pair{method_put, "PUT"}}) {
    if ((methods & bit) == 0) continue;
    if (!out.empty()) out += ", ";
    out += name;
  }
  return out;
}

response method_not_allowed(std::uint8_t allowed) {
  response res = error_response(http::status::method_not_allowed, "method not allowed");
  res.set(http::field::allow, allow_header(allowed));
  return res;
}

response unauthorized(std::string_view message = "authentication required") {
  // RFC 6750 §3: a 401 carries the challenge; the body says nothing about the inventory.
  response res = error_response(http::status::unauthorized, message);
  res.set(http::field::www_authenticate, "Bearer realm=\"topogate\"");
  return res;
}

response forbidden() { return error_response(http::status::forbidden, "credentials not accepted"); }

response metrics_text(inventory::registry* reg, metrics& m) {
  if (reg) m.refresh_inventories(*reg);
  return make(http::status::ok, metrics_type, m.serialize());
}

// A scrape metrics.auth refused: 401 (no token, or one nobody vouches for) with the challenge,
// 403 (a known user without the right), 503 (the review could not be made).
response scrape_refused(const scrape_decision& d) {
  switch (d.verdict) {
    case scrape_verdict::unauthenticated:
      return unauthorized(d.reason);
    case scrape_verdict::forbidden:
      return error_response(http::status::forbidden, d.reason);
    case scrape_verdict::allowed:
    case scrape_verdict::unavailable:
      break;
  }
  response res = error_response(http::status::service_unavailable, d.reason);
  res.set(http::field::retry_after, "5");
  return res;
}

response from_document(std::optional<std::string> doc, std::string_view name) {
  if (!doc) return inventory_not_found(name);
  return make(http::status::ok, json_type, std::move(*doc));
}

// What every response gets last: the nosniff header, and the body as the method and status
// allow (none for HEAD and 304, else its Content-Length).
void finish(response& res, http::verb m) {
  res.set("X-Content-Type-Options", "nosniff");
  if (m == http::verb::head) {
    const auto n = res.body().size();
    res.body() = {};
    res.content_length(n);
  } else if (res.result() == http::status::not_modified) {
    res.body() = {};
  } else {
    res.prepare_payload();
  }
}

std::string_view header(const request& req, http::field f) {
  const auto it = req.find(f);
  return it == req.end() ? std::string_view{}
                         : std::string_view(it->value().data(), it->value().size());
}

std::string_view header(const request& req, std::string_view name) {
  const auto it = req.find(boost::beast::string_view(name.data(), name.size()));
  return it == req.end() ? std::string_view{}
                         : std::string_view(it->value().data(), it->value().size());
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

enum class access { read, write };

// Authenticates a request for `name`. Unknown names answer exactly like known ones
// unless the caller holds credentials valid for some inventory (then 404), so names
// never leak to an unauthenticated caller.
std::optional<response> authorize(const request& req, const peer_certificate& peer,
                                  const router_context& ctx, std::string_view name, access want,
                                  request_info& info) {
  const std::string_view authorization = header(req, http::field::authorization);
  const auth_state* state = ctx.auth.get();
  const inventory_credentials* creds = nullptr;
  if (state) {
    if (auto it = state->inventories.find(name); it != state->inventories.end())
      creds = &it->second;
  }
  const bool known = creds && ctx.registry && ctx.registry->find(name);
  auto count = [&](std::string_view inv, std::string_view reason) {
    if (ctx.m) ctx.m->auth_failure(inv, reason);
  };
  if (!known) {
    if (!presents_credentials(authorization, peer)) {
      count("unknown", "missing");
      return unauthorized();
    }
    if (state) {
      for (const auto& [n, c] : state->inventories) {
        if (authenticate(c.readers, n, authorization, peer).status == auth_status::ok ||
            (c.writers.bearer || c.writers.mtls
                 ? authenticate(c.writers, n, authorization, peer).status == auth_status::ok
                 : false)) {
          return inventory_not_found(name);
        }
      }
    }
    count("unknown", "wrong_credentials");
    return forbidden();
  }
  info.inventory = std::string(name);
  auth_result r;
  if (want == access::write) {
    if (!creds->writers.bearer && !creds->writers.mtls) {
      // No writer credential configured: nobody may push, and a reader learns nothing more.
      r = authenticate(creds->readers, name, authorization, peer);
      if (r.status == auth_status::ok) {
        count(name, "not_writer");
        info.identity = r.identity;
        return forbidden();
      }
    } else {
      r = authenticate(creds->writers, name, authorization, peer);
      if (r.status == auth_status::denied) {
        // A reader credential on a write route is a valid identity without the right.
        if (authenticate(creds->readers, name, authorization, peer).status == auth_status::ok)
          r.reason = "not_writer";
      }
    }
  } else {
    r = authenticate(creds->readers, name, authorization, peer);
    if (r.status != auth_status::ok && (creds->writers.bearer || creds->writers.mtls)) {
      // Writers may read what they publish (status, history, the snapshot itself).
      auto w = authenticate(creds->writers, name, authorization, peer);
      if (w.status == auth_status::ok) r = std::move(w);
    }
  }
  if (r.status == auth_status::ok) {
    info.identity = r.identity;
    return std::nullopt;
  }
  count(name, r.reason);
  return r.status == auth_status::missing ? unauthorized() : forbidden();
}

// RFC 9110 §5.5: a field value is visible characters, obs-text, and SP/HTAB inside, never at
// either end (a parser strips them). Beast writes a value as given, so a value with CR or LF
// would add header lines, or end the header, in the response.
bool is_field_value(std::string_view v) {
  if (v.empty() || v.front() == ' ' || v.front() == '\t' || v.back() == ' ' || v.back() == '\t')
    return false;
  return std::all_of(v.begin(), v.end(), [](char ch) {
    const auto c = static_cast<unsigned char>(ch);
    return c == '\t' || (c >= 0x20 && c != 0x7f);
  });
}

response serve_snapshot(const request& req, const router_context& ctx, std::string_view name) {
  if (const auto* src = ctx.registry->source_of(name); src && !src->serves_snapshot()) {
    // The consumer reads a nodeLabels source's Nodes itself and never polls a URL for it:
    // there is no snapshot resource to answer with (404, not 503, as none will ever come).
    return inventory_failure(
        http::status::not_found,
        "inventory \"" + std::string(name) +
            "\" reads Node labels (nodeLabels source): topogate serves no snapshot for it; "
            "its hierarchy check is at /snapshots/" +
            std::string(name) + "/status",
        name);
  }
  inventory::inventory* inv = ctx.registry->find(name);
  const inventory::serve_decision d = inv->serve();
  if (!d.rev) {
    response res = inventory_failure(
        http::status::service_unavailable,
        d.unavailable_reason.empty() ? "no valid revision" : d.unavailable_reason, name);
    res.set(http::field::retry_after, "10");
    return res;
  }
  const auto& rev = d.rev;
  const bool yaml = prefers_yaml(header(req, http::field::accept));
  response res{http::status::ok, 11};
  res.set(http::field::etag, rev->etag);
  res.set(http::field::vary, "Accept");
  res.set(http::field::cache_control, "private, no-cache");
  // The revision is opaque (SPEC S2: any string not blank), so a pushed or file revision may
  // hold a line break: it is then served without this header (the body carries it), never
  // copied into the header section of every reader's response.
  if (is_field_value(rev->revision_id)) res.set("X-Topogate-Revision", rev->revision_id);
  const std::string_view inm = header(req, http::field::if_none_match);
  if (!inm.empty() && etag_matches(inm, rev->etag)) {
    res.result(http::status::not_modified);
    return res;
  }
  res.set(http::field::content_type, yaml ? "application/yaml" : "application/json");
  // The YAML body is rendered by the first request that asks for it, once per revision; the
  // JSON body is written from the revision's own bytes (in pieces after a Node change).
  if (yaml) {
    res.body() = shared_body::value_type(rev, std::string_view(rev->yaml_body()));
  } else {
    res.body() = shared_body::value_type(rev, rev->json_text);
  }
  return res;
}

response readiness(const router_context& ctx, bool verbose, bool include_inventories) {
  std::string text;
  bool ok = true;
  auto check = [&](std::string_view name, bool pass, std::string_view why = {}) {
    ok = ok && pass;
    text += pass ? "[+]" : "[-]";
    text += name;
    text += pass ? " ok" : " failed";
    if (!pass && !why.empty()) {
      text += ": ";
      text += why;
    }
    text += '\n';
  };
  const health_state* h = ctx.health;
  check("listener", h && h->listening.load());
  check("certificates", h && h->certificates_loaded.load());
  if (h && h->draining.load()) check("shutdown", false, "draining");
  if (include_inventories && ctx.registry) {
    for (const auto* inv : ctx.registry->all()) {
      const auto ready = ctx.registry->inventory_ready(inv->name());
      check("inventory/" + inv->name(), ready.ok(),
            ready.ok() ? std::string_view() : ready.error().message);
      if (const auto labels = ctx.registry->node_labels(inv->name())) {
        // A finding shown beside the checks, never one of them: mislabelled Nodes must not take
        // the replica (and the admission webhook) out of the Service.
        text += labels->report.ok() ? "[+]" : "[-]";
        text += "nodelabels/" + inv->name() +
                (labels->report.ok() ? " ok: " : " failed (not gating): ");
        text += inventory::summarize(*labels);
        text += '\n';
      }
      if (const auto refusal = inv->impact_refusal(); !refusal.empty()) {
        // Not gating either: the replica still serves the revision the consumer has; a file
        // revision past maxProfileChanges waits for a person (docs/inventory.md).
        text += "[-]impact/" + inv->name() + " failed (not gating): " + refusal + '\n';
      }
    }
  }
  text += ok ? "check passed\n" : "check failed\n";
  if (!verbose) text = ok ? "ok\n" : text;
  response res = make(ok ? http::status::ok : http::status::service_unavailable,
                      "text/plain; charset=utf-8", std::move(text));
  res.set(http::field::cache_control, "no-store");
  return res;
}

}  // namespace

// What a route's handler gets: the request whose method and path its route matched.
struct route_call {
  const request& req;
  const peer_certificate& peer;
  const router_context& ctx;
  request_info& info;
  const route& matched;
  std::string_view name;  // the {name} segment, "" for a pattern without one
  std::string_view query;
  std::chrono::steady_clock::time_point received;
  deferred_response* later;
};

namespace {

// ---- the routes' handlers

// `?verbose`: each check on a line of its own.
bool verbose(const route_call& c) {
  bool present = false;
  (void)query_param(c.query, "verbose", &present);
  return present;
}

response probe_livez(const route_call& c) {
  return make(http::status::ok, "text/plain; charset=utf-8",
              verbose(c) ? "[+]process ok\ncheck passed\n" : "ok\n");
}

response probe_healthz(const route_call& c) { return readiness(c.ctx, verbose(c), false); }

response probe_readyz(const route_call& c) { return readiness(c.ctx, verbose(c), true); }

response scrape(const route_call& c) {
  const router_context& ctx = c.ctx;
  if (!ctx.m) return error_response(http::status::not_found, "metrics disabled");
  if (ctx.metrics_auth == nullptr) return metrics_text(ctx.registry, *ctx.m);
  if (ctx.listener != listener_kind::tls && !ctx.metrics_auth->serves_health_port()) {
    return error_response(
        http::status::not_found,
        "not found: /metrics is served on the HTTPS port only (metrics.healthPort: false)");
  }
  const std::string_view authorization = header(c.req, http::field::authorization);
  metrics_authorizer* gate = ctx.metrics_auth;
  if (auto d = gate->check_now(authorization)) {
    c.info.identity = d->user;
    c.info.detail = std::string(to_string(d->verdict));
    return d->verdict == scrape_verdict::allowed ? metrics_text(ctx.registry, *ctx.m)
                                                 : scrape_refused(*d);
  }
  if (c.later != nullptr) {
    // The token goes to the Kubernetes API on the gate's own threads; this thread goes on
    // serving, and the answer comes by metrics.reviewTimeout at the latest.
    c.info.detail = "review";
    *c.later = [gate, reg = ctx.registry, mm = ctx.m, m = c.req.method(),
                auth = std::string(authorization)](deliver_fn deliver) mutable {
      gate->check_async(auth, [deliver = std::move(deliver), reg, mm, m](scrape_decision reviewed) {
        response out = reviewed.verdict == scrape_verdict::allowed ? metrics_text(reg, *mm)
                                                                   : scrape_refused(reviewed);
        finish(out, m);
        deliver(std::move(out));
      });
      OPENSSL_cleanse(auth.data(), auth.size());
    };
    return {};
  }
  const scrape_decision waited = gate->check(authorization);
  c.info.identity = waited.user;
  c.info.detail = std::string(to_string(waited.verdict));
  return waited.verdict == scrape_verdict::allowed ? metrics_text(ctx.registry, *ctx.m)
                                                   : scrape_refused(waited);
}

// POST /validate/<resource>: the AdmissionReview of the route's admitted kind.
response admit(const route_call& c) {
  const router_context& ctx = c.ctx;
  admission::request_meta meta;
  meta.content_type = header(c.req, http::field::content_type);
  bool has_timeout = false;
  const std::string_view t = query_param(c.query, "timeout", &has_timeout);
  if (has_timeout) {
    // The apiserver appends ?timeout=<webhook timeoutSeconds>s: past it, nobody waits.
    const auto d = core::parse_go_duration(t);
    if (!d || d->count() <= 0) {
      if (ctx.m) ctx.m->admission_decision("other", "errored");
      c.info.detail = "errored";
      return error_response(http::status::bad_request,
                            "the timeout query parameter must be a positive duration such as 10s");
    }
    meta.deadline =
        c.received + std::chrono::duration_cast<std::chrono::steady_clock::duration>(*d);
  }
  static const admission::options defaults;
  // One parser state per worker thread: its buffers are reused by every review.
  thread_local core::json_decoder decoder;
  auto out = admission::review(c.matched.admits->route, c.req.body(), meta,
                               ctx.admission ? *ctx.admission : defaults, decoder);
  if (ctx.m) {
    ctx.m->admission_decision(out.kind, admission::to_string(out.result));
    if (out.result == admission::verdict::denied) ctx.m->admission_denial(out.kind, out.errors);
  }
  c.info.detail = std::string(admission::to_string(out.result));
  return out.result == admission::verdict::errored
             ? admission_failure(out)
             : make(http::status::ok, json_type, std::move(out.body));
}

// GET /snapshot: the only inventory's snapshot.
response read_default_snapshot(const route_call& c) {
  std::string_view name;
  if (c.ctx.registry) {
    const auto all = c.ctx.registry->all();
    if (all.size() == 1) name = all.front()->name();
  }
  if (name.empty()) {
    // Without exactly one inventory there is no default to serve. Authenticated first, so that
    // nothing leaks: an empty name is no inventory, so a caller holding credentials valid for
    // one gets a 404 (which is told where to go), any other caller the usual 401 or 403.
    auto refused = authorize(c.req, c.peer, c.ctx, "", access::read, c.info);
    if (refused && refused->result() != http::status::not_found) return std::move(*refused);
    return error_response(http::status::not_found,
                          "several inventories are configured: use /snapshots/{name}");
  }
  if (auto denied = authorize(c.req, c.peer, c.ctx, name, access::read, c.info))
    return std::move(*denied);
  return serve_snapshot(c.req, c.ctx, name);
}

response read_snapshot(const route_call& c) {
  if (auto denied = authorize(c.req, c.peer, c.ctx, c.name, access::read, c.info))
    return std::move(*denied);
  return serve_snapshot(c.req, c.ctx, c.name);
}

response read_status(const route_call& c) {
  if (auto denied = authorize(c.req, c.peer, c.ctx, c.name, access::read, c.info))
    return std::move(*denied);
  return from_document(c.ctx.registry->status_json(c.name), c.name);
}

response read_history(const route_call& c) {
  if (auto denied = authorize(c.req, c.peer, c.ctx, c.name, access::read, c.info))
    return std::move(*denied);
  return from_document(c.ctx.registry->history_json(c.name), c.name);
}

// PUT /snapshots/{name}: a push, validated and stored on the inventory's lane; with
// ?dryRun=All validated there and answered, nothing stored.
response push(const route_call& c) {
  if (auto denied = authorize(c.req, c.peer, c.ctx, c.name, access::write, c.info))
    return std::move(*denied);
  inventory::push_request push{std::string(c.name), c.req.body(), std::nullopt, c.info.identity,
                               std::nullopt};
  if (auto im = header(c.req, http::field::if_match); !im.empty()) push.if_match = std::string(im);
  // Topogate-Accept-Impact: "*" or the served ETag a 409 reported (docs/inventory.md).
  if (auto ai = header(c.req, "Topogate-Accept-Impact"); !ai.empty())
    push.accept_impact = std::string(ai);
  // dryRun=All (the Kubernetes convention): the answer of the push, nothing stored.
  bool dry = false;
  if (const auto v = query_param(c.query, "dryRun", &dry); dry && v != "All")
    return error_response(http::status::bad_request,
                          "dryRun must be All (the only value Kubernetes defines)");
  if (c.later != nullptr) {
    // Validated (and, but for a dry run, stored) on the inventory's lane; this thread goes
    // on serving.
    const auto run = dry ? &inventory::registry::dry_run_async : &inventory::registry::push_async;
    const dry_run_answer* extra = dry ? c.ctx.dry_run : nullptr;
    *c.later = [reg = c.ctx.registry, run, extra,
                push = std::move(push)](deliver_fn deliver) mutable {
      std::string inv = push.name;
      (reg->*run)(std::move(push), [deliver = std::move(deliver), extra,
                                    inv = std::move(inv)](inventory::push_result r) {
        const std::string workloads = extra ? extra->workloads(inv, r) : std::string();
        response out = push_response(r, inv, workloads);
        finish(out, http::verb::put);
        deliver(std::move(out));
      });
    };
    return {};
  }
  if (!dry) return push_response(c.ctx.registry->push(std::move(push)), c.name);
  const auto r = c.ctx.registry->dry_run(std::move(push));
  return push_response(r, c.name,
                       c.ctx.dry_run ? c.ctx.dry_run->workloads(c.name, r) : std::string());
}

constexpr std::uint8_t get_head = method_get | method_head;

// Every route, as handle() dispatches it and the session picks its body limit: one row per
// (path pattern, methods); a pattern's rows together give a 405's Allow header.
constexpr auto make_route_table() {
  constexpr std::size_t fixed = 9;
  std::array<route, fixed + core::admitted_kinds.size()> t{};
  std::size_t i = 0;
  // Probes and scrapes, on the plain health listener too.
  for (const auto& [pattern, handler] :
       {std::pair{"/healthz", &probe_healthz}, std::pair{"/livez", &probe_livez},
        std::pair{"/readyz", &probe_readyz}, std::pair{"/metrics", &scrape}})
    t[i++] = {.pattern = pattern,
              .methods = get_head,
              .health_listener = true,
              .polled = true,
              .handler = handler};
  // The admission webhook: one route per admitted kind (core/admitted_kinds.hpp).
  for (const core::admitted_kind& k : core::admitted_kinds)
    t[i++] = {.pattern = k.path,
              .methods = method_post,
              .body = body_kind::admission,
              .admits = &k,
              .handler = &admit};
  // Inventories.
  t[i++] = {.pattern = "/snapshot", .methods = get_head, .handler = &read_default_snapshot};
  t[i++] = {.pattern = "/snapshots/{name}", .methods = get_head, .handler = &read_snapshot};
  t[i++] = {.pattern = "/snapshots/{name}",
            .methods = method_put,
            .body = body_kind::push,
            .handler = &push};
  t[i++] = {.pattern = "/snapshots/{name}/status", .methods = get_head, .handler = &read_status};
  t[i++] = {.pattern = "/snapshots/{name}/history", .methods = get_head, .handler = &read_history};
  return t;
}

constexpr auto route_table = make_route_table();
// A row too many does not compile (a write past the array); a row too few leaves one empty.
static_assert(std::all_of(route_table.begin(), route_table.end(),
                          [](const route& r) { return r.handler != nullptr; }));

// Whether `path` matches `pattern`, whose one {name} segment (if it has one) matches any text
// without a slash (the empty one included), given back in `name`.
bool matches(std::string_view pattern, std::string_view path, std::string_view& name) noexcept {
  const auto open = pattern.find('{');
  if (open == std::string_view::npos) return pattern == path;
  const std::string_view before = pattern.substr(0, open);
  const std::string_view after = pattern.substr(pattern.find('}', open) + 1);
  if (path.size() < before.size() + after.size() || !path.starts_with(before) ||
      !path.ends_with(after))
    return false;
  const std::string_view segment =
      path.substr(before.size(), path.size() - before.size() - after.size());
  if (segment.find('/') != std::string_view::npos) return false;
  name = segment;
  return true;
}

std::uint8_t method_bit(http::verb m) noexcept {
  switch (m) {
    case http::verb::get:
      return method_get;
    case http::verb::head:
      return method_head;
    case http::verb::post:
      return method_post;
    case http::verb::put:
      return method_put;
    default:
      return 0;
  }
}

// The routes a request's path and method select.
struct route_lookup {
  const route* pattern = nullptr;  // the first route whose pattern matches the path
  const route* chosen = nullptr;   // the route of that pattern that takes the method
  std::uint8_t allowed = 0;        // the methods of the pattern's routes
  std::string_view name;
};

route_lookup find_route(http::verb method, std::string_view path) noexcept {
  route_lookup out;
  const std::uint8_t bit = method_bit(method);
  for (const route& r : route_table) {
    if (out.pattern != nullptr ? r.pattern != out.pattern->pattern
                               : !matches(r.pattern, path, out.name))
      continue;
    if (out.pattern == nullptr) out.pattern = &r;
    out.allowed |= r.methods;
    if (out.chosen == nullptr && (r.methods & bit) != 0) out.chosen = &r;
  }
  return out;
}

}  // namespace

// A request the webhook could not review: a Kubernetes Status, which the API server logs and
// kubectl shows for a failed webhook call.
response admission_failure(const admission::outcome& out) {
  const http::status m = [&] {
    switch (out.error) {
      case admission::failure::too_large:
        return http::status::payload_too_large;
      case admission::failure::unsupported_media_type:
        return http::status::unsupported_media_type;
      case admission::failure::timeout:
        return http::status::gateway_timeout;
      case admission::failure::none:
      case admission::failure::bad_request:
        break;
    }
    return http::status::bad_request;
  }();
  return error_response(m, out.message);
}

bool etag_matches(std::string_view if_none_match, std::string_view etag) noexcept {
  auto opaque = [](std::string_view t) {
    t = core::trim_ows(t);
    if (t.size() >= 2 && t[0] == 'W' && t[1] == '/') t.remove_prefix(2);
    return t;
  };
  const std::string_view want = opaque(etag);
  while (!if_none_match.empty()) {
    const auto comma = if_none_match.find(',');
    const std::string_view one = opaque(if_none_match.substr(0, comma));
    if (one == "*" || one == want) return true;
    if (comma == std::string_view::npos) break;
    if_none_match.remove_prefix(comma + 1);
  }
  return false;
}

bool prefers_yaml(std::string_view accept) noexcept {
  double json_q = -1, yaml_q = -1;
  std::size_t json_pos = 0, yaml_pos = 0, pos = 0;
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    const auto semi = range.find(';');
    const std::string_view media = core::trim_ows(range.substr(0, semi));
    double q = 1.0;
    if (semi != std::string_view::npos) {
      std::string_view params = range.substr(semi + 1);
      const auto qpos = params.find("q=");
      if (qpos != std::string_view::npos) {
        std::string qs(core::trim_ows(params.substr(qpos + 2, params.find(';', qpos) - qpos - 2)));
        q = std::strtod(qs.c_str(), nullptr);
      }
    }
    ++pos;
    const bool is_yaml = iequals(media, "application/yaml") ||
                         iequals(media, "application/x-yaml") || iequals(media, "text/yaml");
    const bool is_json =
        iequals(media, "application/json") || media == "*/*" || iequals(media, "application/*");
    if (is_yaml && q > yaml_q) {
      yaml_q = q;
      yaml_pos = pos;
    }
    if (is_json && q > json_q) {
      json_q = q;
      json_pos = pos;
    }
    if (comma == std::string_view::npos) break;
    accept.remove_prefix(comma + 1);
  }
  if (yaml_q <= 0) return false;
  if (yaml_q != json_q) return yaml_q > json_q;
  return yaml_pos < json_pos;
}

std::span<const route> routes() noexcept { return route_table; }

bool is_polled_route(std::string_view pattern) noexcept {
  return std::any_of(route_table.begin(), route_table.end(),
                     [&](const route& r) { return r.polled && r.pattern == pattern; });
}

namespace {
// 404 for a path no route has (or one the plain-HTTP listener, which exists for probes and
// scrapes only, does not serve), 405 with Allow for a method the path's routes do not take.
std::optional<response> unrouted(const route_lookup& found, listener_kind listener) {
  if (found.pattern == nullptr ||
      (listener != listener_kind::tls && !found.pattern->health_listener))
    return error_response(http::status::not_found, "not found");
  if (found.chosen == nullptr) return method_not_allowed(found.allowed);
  return std::nullopt;
}
}  // namespace

std::optional<response> unrouted_response(http::verb method, std::string_view target,
                                          listener_kind listener) {
  return unrouted(find_route(method, split_target(target).path), listener);
}

std::size_t body_limit(http::verb method, std::string_view target,
                       const body_limits& limits) noexcept {
  const route* r = find_route(method, split_target(target).path).chosen;
  switch (r != nullptr ? r->body : body_kind::none) {
    case body_kind::admission:
      return limits.admission;
    case body_kind::push:
      return limits.push;
    case body_kind::none:
      break;
  }
  // A route that reads no body, and a request no route takes: one that sends a body is refused
  // (413).
  return 0;
}

response handle(const request& req, const peer_certificate& peer, const router_context& ctx,
                request_info& info, std::chrono::steady_clock::time_point received,
                deferred_response* later) {
  const auto [path, query] = split_target(req.target());
  const route_lookup found = find_route(req.method(), path);
  response res;
  if (auto refused = unrouted(found, ctx.listener)) {
    // A 405 names its pattern; a 404 stays unmatched.
    if (found.pattern != nullptr && refused->result() == http::status::method_not_allowed)
      info.route = std::string(found.pattern->pattern);
    res = std::move(*refused);
  } else {
    info.route = std::string(found.pattern->pattern);
    {
      const route_call call{req,        peer,  ctx,      info, *found.chosen,
                            found.name, query, received, later};
      res = found.chosen->handler(call);
      // Answered later, off this thread (a push, a token review).
      if (later != nullptr && *later) return {};
    }
  }
  finish(res, req.method());
  return res;
}

// Without the serializer's buffer-sequence machinery: a third of a small response's
// serialising cost.
void render_header(const response& res, std::string& out) {
  // Beast's message keeps 0 < version < 100 and a status of at most 999 (it asserts and
  // throws otherwise), so both fit the fixed-width status line.
  const unsigned version = res.version();
  const unsigned code = res.result_int();
  const char line[] = {'H',
                       'T',
                       'T',
                       'P',
                       '/',
                       static_cast<char>('0' + version / 10),
                       '.',
                       static_cast<char>('0' + version % 10),
                       ' ',
                       static_cast<char>('0' + code / 100),
                       static_cast<char>('0' + code / 10 % 10),
                       static_cast<char>('0' + code % 10),
                       ' '};
  out.append(line, sizeof line);
  const auto reason = res.reason();
  out.append(reason.data(), reason.size());
  out += "\r\n";
  for (const auto& field : res) {
    const auto name = field.name_string();
    const auto value = field.value();
    out.append(name.data(), name.size());
    out += ": ";
    out.append(value.data(), value.size());
    out += "\r\n";
  }
  out += "\r\n";
}

}  // namespace topogate::server
