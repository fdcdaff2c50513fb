// How every push outcome is said over HTTP (server/inventory_http): the status code, the
// Content-Type, the Kubernetes Status body (kind Status, apiVersion v1, status Failure,
// reason, code, details naming the Snapshot), the ETag of the served revision, Retry-After
// on 503, and the body of a published revision. The results are real pushes to a registry
// with a file store in a temporary directory wherever one produces the outcome; `busy` (and
// the exhaustive table) construct them directly. What the registry decides is tested in
// test/inventory/push_store_test.cpp and push_lane_test.cpp.

#include "server/inventory_http.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/field_error.hpp"
#include "core/k8s_status.hpp"
#include "core/profile_impact.hpp"
#include "core/snapshot.hpp"
#include "core/snapshot_size.hpp"
#include "core/time.hpp"
#include "inventory/registry.hpp"
#include "inventory/store.hpp"
#include "test/inventory/test_util.hpp"
#include "test/server/sized_snapshot.hpp"
#include "test/server/status_body.hpp"

namespace topogate::server {
namespace {

namespace inv = inventory;
using inv::push_outcome;
using inv::push_result;
namespace t = inventory::testing;

std::string body_of(const response& r) { return r.body().str(); }

bool has_header(const response& r, http::field f) { return r.find(f) != r.end(); }

std::string describe(const push_result& r) {
  return std::string(inv::to_string(r.outcome)) + (r.message.empty() ? "" : ": " + r.message);
}

using status_test::json_doc;
using status_test::str;

// The Kubernetes Status of a failure, as apimachinery writes it for the Snapshot `name`.
void expect_failure_status(const response& res, unsigned code, std::string_view reason,
                           std::string_view name,
                           std::optional<std::string_view> message = std::nullopt) {
  status_test::expect_status(res, code, reason, status_test::snapshot_details{name}, message);
}

// A push inventory `name` with a file store in `store_dir`.
inv::registry_config push_config(const std::string& store_dir, std::string name = "dc") {
  inv::registry_config cfg;
  inv::inventory_spec spec;
  spec.config = t::config(std::move(name));
  cfg.inventories.push_back(std::move(spec));
  cfg.store.type = inv::store_config::kind::file;
  cfg.store.directory = store_dir;
  cfg.resync_interval = std::chrono::seconds(3600);
  return cfg;
}

inv::registry_observer quiet() {
  inv::registry_observer o;
  o.on_log = [](std::string_view, std::string_view, std::string_view) {};
  return o;
}

// Each test's temporary directory (file stores, snapshot and Node files) and the registry it
// starts; the registry stops (~registry) before the directory is removed.
class InventoryHttp : public ::testing::Test {
 protected:
  // A registry over `cfg`, logging nowhere, started (replacing the one started before).
  inv::registry& start(inv::registry_config cfg) {
    reg_.emplace(std::move(cfg), inv::system_clock(), quiet());
    reg_->start();
    return *reg_;
  }

  t::temp_dir dir;

 private:
  std::optional<inv::registry> reg_;
};

// A refusal that names no revision and asks for no retry: the Status, neither ETag nor
// Retry-After.
void expect_plain_refusal(const response& res, unsigned code, std::string_view reason,
                          std::string_view name,
                          std::optional<std::string_view> message = std::nullopt) {
  expect_failure_status(res, code, reason, name, message);
  EXPECT_FALSE(has_header(res, http::field::etag));
  EXPECT_FALSE(has_header(res, http::field::retry_after));
}

// The body of 201/200: what was published.
void expect_published_body(const response& res, const push_result& r, std::string_view name,
                           std::string_view revision, const std::vector<std::string>& pruned) {
  ASSERT_NE(r.served, nullptr);
  ASSERT_NE(r.candidate, nullptr);
  EXPECT_EQ(res[http::field::content_type], "application/json");
  EXPECT_EQ(res[http::field::etag], r.served->etag);
  EXPECT_FALSE(has_header(res, http::field::retry_after));
  const auto text = body_of(res);
  json_doc doc(text);
  ASSERT_TRUE(doc.ok) << text;
  EXPECT_EQ(str(doc.root["name"]), name) << text;
  EXPECT_EQ(str(doc.root["revision"]), revision) << text;
  EXPECT_EQ(str(doc.root["etag"]), r.served->etag) << text;
  const auto accepted_at = str(doc.root["acceptedAt"]);
  EXPECT_EQ(accepted_at, core::format_rfc3339_ms(r.candidate->accepted_at)) << text;
  const auto parsed = core::parse_rfc3339(accepted_at);
  ASSERT_TRUE(parsed.has_value()) << accepted_at;
  EXPECT_LE(std::chrono::abs(*parsed - r.candidate->accepted_at), std::chrono::milliseconds(1));
  uint64_t size = 0;
  ASSERT_FALSE(doc.root["size"].get(size)) << text;
  EXPECT_EQ(size, r.served->json_text.size()) << text;
  simdjson::dom::array pruned_nodes;
  ASSERT_FALSE(doc.root["prunedNodes"].get(pruned_nodes)) << text;
  std::vector<std::string> got;
  for (auto n : pruned_nodes) got.push_back(str(n));
  EXPECT_EQ(got, pruned) << text;
  if (r.impact) {
    simdjson::dom::object impact;
    ASSERT_FALSE(doc.root["impact"].get(impact)) << text;
    EXPECT_NE(text.find(",\"impact\":" + core::render_impact_json(*r.impact)), std::string::npos)
        << text;
  } else {
    EXPECT_EQ(doc.root["impact"].error(), simdjson::NO_SUCH_FIELD) << text;
  }
}

TEST_F(InventoryHttp, CreatedIs201AndStoredIs200WithTheServedRevision) {
  auto& reg = start(push_config(dir / "store"));
  const auto first = reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "ci-bot");
  ASSERT_EQ(first.outcome, push_outcome::created) << describe(first);
  const auto created = push_response(first, "dc");
  EXPECT_EQ(created.result_int(), 201u);
  expect_published_body(created, first, "dc", "p-1", {});
  EXPECT_EQ(created[http::field::etag], reg.find("dc")->current()->etag);

  const auto second = reg.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "ci-bot");
  ASSERT_EQ(second.outcome, push_outcome::stored) << describe(second);
  ASSERT_NE(second.impact, nullptr) << "four Nodes joined: an impact against p-1";
  const auto stored = push_response(second, "dc");
  EXPECT_EQ(stored.result_int(), 200u);
  expect_published_body(stored, second, "dc", "p-2", {});
  EXPECT_NE(stored[http::field::etag], created[http::field::etag]);
}

TEST_F(InventoryHttp, PrunedPushNamesTheServedRevisionAndThePrunedNodes) {
  auto cfg = push_config(dir / "store");
  cfg.inventories[0].config.unknown_nodes = inv::unknown_nodes_policy::prune;
  t::write_file(dir / "nodes.json", t::nodes_json(4, 3));  // worker-3 is not in the cluster
  cfg.inventories[0].nodes_path = dir / "nodes.json";
  auto& reg = start(std::move(cfg));
  const auto r = reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "w");
  ASSERT_EQ(r.outcome, push_outcome::created) << describe(r);
  const auto res = push_response(r, "dc");
  EXPECT_EQ(res.result_int(), 201u);
  // The revision served (pruned), its ETag and size; the Nodes left out.
  expect_published_body(res, r, "dc", "p-1+pruned-1", {"worker-3"});
}

std::vector<std::string> warnings_of(const response& res) {
  const auto text = body_of(res);
  json_doc doc(text);
  std::vector<std::string> out;
  simdjson::dom::array warnings;
  if (!doc.ok || doc.root["warnings"].get(warnings)) return {"<no warnings array>"};
  for (auto w : warnings) out.push_back(str(w));
  return out;
}

TEST_F(InventoryHttp, ARevisionPastNineTenthsOfTheLimitIsWarnedAboutInTheBodyAndAWarningHeader) {
  auto& reg = start(push_config(dir / "store"));
  namespace st = server::testing;
  // Exactly 0.9 of 1 MiB (rounded down): no warning.
  const auto under = reg.push("dc", st::snapshot_json_of_size(core::snapshot_size_warning_bytes),
                              std::nullopt, "w");
  ASSERT_EQ(under.outcome, push_outcome::created) << describe(under);
  ASSERT_EQ(under.served->json_text.size(), 943718u);
  const auto quiet_res = push_response(under, "dc");
  EXPECT_EQ(quiet_res.result_int(), 201u);
  EXPECT_FALSE(has_header(quiet_res, http::field::warning));
  EXPECT_EQ(warnings_of(quiet_res), std::vector<std::string>{});

  // One byte more: the same warning in the body and, Kubernetes-style, in the header.
  const auto over =
      reg.push("dc", st::snapshot_json_of_size(core::snapshot_size_warning_bytes + 1, "big-2"),
               std::nullopt, "w");
  ASSERT_EQ(over.outcome, push_outcome::stored) << describe(over);
  ASSERT_EQ(over.served->json_text.size(), 943719u);
  const auto res = push_response(over, "dc");
  EXPECT_EQ(res.result_int(), 200u);
  expect_published_body(res, over, "dc", "big-2", {});
  const std::string text =
      "the revision's canonical JSON is 943719 bytes, 90.0% of the 1048576-byte snapshot limit "
      "(S10; warning above 90%): past the limit revisions are refused; split the cluster into "
      "inventories by nodeSelector (docs/inventory.md#splitting-a-large-cluster)";
  EXPECT_EQ(warnings_of(res), std::vector<std::string>{text});
  ASSERT_TRUE(has_header(res, http::field::warning));
  EXPECT_EQ(res[http::field::warning], "299 - \"" + text + "\"");

  // The limit itself still warns; past it the push is refused (S10) and says so instead.
  const auto at_limit = reg.push("dc", st::snapshot_json_of_size(core::max_snapshot_bytes, "big-3"),
                                 std::nullopt, "w");
  ASSERT_EQ(at_limit.outcome, push_outcome::stored) << describe(at_limit);
  EXPECT_EQ(warnings_of(push_response(at_limit, "dc")).size(), 1u);
}

TEST_F(InventoryHttp, UnknownInventoryIs404) {
  auto& reg = start(push_config(dir / "store"));
  const auto r = reg.push("nope", t::snapshot_json("p"), std::nullopt, "w");
  ASSERT_EQ(r.outcome, push_outcome::not_found) << describe(r);
  const auto res = push_response(r, "nope");
  expect_plain_refusal(res, 404, "NotFound", "nope", "inventory \"nope\" not found");
  // GET /snapshots/nope/status and /history answer the same.
  EXPECT_FALSE(reg.status_json("nope").has_value());
  const auto nf = inventory_not_found("nope");
  expect_failure_status(nf, 404, "NotFound", "nope", "inventory \"nope\" not found");
  EXPECT_EQ(body_of(nf), body_of(res));
}

TEST_F(InventoryHttp, InventoryNotFoundEscapesTheName) {
  const std::string name = "we\"ird\\name";
  const auto res = inventory_not_found(name);
  expect_failure_status(res, 404, "NotFound", name, "inventory \"" + name + "\" not found");
}

TEST_F(InventoryHttp, NotPushableIs409Conflict) {
  t::write_file(dir / "snapshot.json", t::snapshot_json("f-1"));
  auto cfg = push_config(dir / "store", "filed");
  cfg.inventories[0].snapshot_path = dir / "snapshot.json";
  cfg.inventories[0].kind = inv::source_kind::file;
  inv::inventory_spec labels;
  labels.config = t::config("labels");
  labels.config.source.node_labels = true;
  labels.kind = inv::source_kind::node_labels;
  cfg.inventories.push_back(std::move(labels));
  auto& reg = start(std::move(cfg));
  for (const char* name : {"filed", "labels"}) {
    const auto r = reg.push(name, t::snapshot_json("p-1"), std::nullopt, "w");
    ASSERT_EQ(r.outcome, push_outcome::not_pushable) << name << ": " << describe(r);
    const auto res = push_response(r, name);
    expect_plain_refusal(res, 409, "Conflict", name, r.message);
  }
}

TEST_F(InventoryHttp, TooLargeIs413) {
  auto& reg = start(push_config(dir / "store"));
  auto body = t::snapshot_json("big");
  body.resize(core::max_snapshot_bytes + 1, '\n');
  const auto r = reg.push("dc", body, std::nullopt, "w");
  ASSERT_EQ(r.outcome, push_outcome::too_large) << describe(r);
  const auto res = push_response(r, "dc");
  expect_plain_refusal(res, 413, "RequestEntityTooLarge", "dc", r.message);
}

TEST_F(InventoryHttp, InvalidIs422WithACauseForEveryFieldError) {
  auto& reg = start(push_config(dir / "store"));
  // Two independent errors: an undeclared level (S4) on one node, an invalid value (S7) on another.
  const std::string body =
      R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":"bad","nodes":{)"
      R"("worker-0":{"topology.gpustack.ai/pod":"p"},)"
      R"("worker-1":{"topology.gpustack.ai/region":"-bad-"}}})";
  const auto r = reg.push("dc", body, std::nullopt, "w");
  ASSERT_EQ(r.outcome, push_outcome::invalid) << describe(r);
  ASSERT_GE(r.errors.size(), 2u);
  const auto res = push_response(r, "dc");
  expect_plain_refusal(res, 422, "Invalid", "dc");

  const auto text = body_of(res);
  json_doc doc(text);
  ASSERT_TRUE(doc.ok) << text;
  // apierrors.NewInvalid's message: every error's text after the Snapshot's name.
  const auto message = str(doc.root["message"]);
  EXPECT_TRUE(message.starts_with("Snapshot.topology.gpustack.ai \"dc\" is invalid: ")) << message;
  for (const auto& e : r.errors)
    EXPECT_NE(message.find(e.to_string()), std::string::npos) << message;
  // One cause per error, in order: its type, "[RULE] " and the text after the field, the field.
  simdjson::dom::array causes;
  ASSERT_FALSE(doc.root["details"]["causes"].get(causes)) << text;
  ASSERT_EQ(causes.size(), r.errors.size()) << text;
  std::vector<std::string> rules;
  std::size_t i = 0;
  for (auto c : causes) {
    const auto& e = r.errors[i++];
    rules.push_back(e.rule);
    const auto reason = str(c["reason"]);
    EXPECT_TRUE(reason.starts_with("FieldValue")) << reason;
    EXPECT_EQ(reason, core::status_cause_type(e.type));
    EXPECT_EQ(str(c["field"]), e.path);
    const auto cause_message = str(c["message"]);
    EXPECT_TRUE(cause_message.starts_with("[" + e.rule + "] ")) << cause_message;
    const auto full = e.to_string();
    ASSERT_TRUE(full.starts_with(e.path + ": ")) << full;
    EXPECT_EQ(cause_message, "[" + e.rule + "] " + full.substr(e.path.size() + 2));
  }
  EXPECT_NE(std::find(rules.begin(), rules.end(), "S4"), rules.end());
  EXPECT_NE(std::find(rules.begin(), rules.end(), "S7"), rules.end());
  EXPECT_NE(text.find(R"("field":"nodes[worker-0][topology.gpustack.ai/pod]")"), std::string::npos)
      << text;
}

TEST_F(InventoryHttp, PreconditionFailedIs412WithTheServedETag) {
  auto& reg = start(push_config(dir / "store"));
  // Nothing to match yet: 412 without an ETag (nothing is served).
  const auto none = reg.push("dc", t::snapshot_json("p-0"), std::string("*"), "w");
  ASSERT_EQ(none.outcome, push_outcome::precondition_failed) << describe(none);
  const auto none_res = push_response(none, "dc");
  expect_failure_status(none_res, 412, "PreconditionFailed", "dc", none.message);
  EXPECT_FALSE(has_header(none_res, http::field::etag));

  const auto first = reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "w");
  ASSERT_EQ(first.outcome, push_outcome::created) << describe(first);
  const auto second = reg.push("dc", t::snapshot_json("p-2"), first.served->etag, "a");
  ASSERT_EQ(second.outcome, push_outcome::stored) << describe(second);
  const auto stale = reg.push("dc", t::snapshot_json("p-3"), first.served->etag, "b");
  ASSERT_EQ(stale.outcome, push_outcome::precondition_failed) << describe(stale);
  const auto res = push_response(stale, "dc");
  expect_failure_status(res, 412, "PreconditionFailed", "dc", stale.message);
  // The ETag the writer should have matched: the one served now.
  EXPECT_EQ(res[http::field::etag], second.served->etag);
  EXPECT_EQ(res[http::field::etag], reg.find("dc")->current()->etag);
  EXPECT_FALSE(has_header(res, http::field::retry_after));
}

// worker-0..worker-(n-1) in region-a/zone-a; the first `with_rack` also carry a rack.
std::string racked(std::string_view revision, int n, int with_rack) {
  std::string out = R"({"apiVersion":"topology.gpustack.ai/v1alpha1","revision":")";
  out += revision;
  out += R"(","nodes":{)";
  for (int i = 0; i < n; ++i) {
    if (i != 0) out += ',';
    out += "\"worker-" + std::to_string(i) + "\":{\"" + std::string(t::region) +
           "\":\"region-a\",\"" + std::string(t::zone) + "\":\"zone-a\"";
    if (i < with_rack)
      out += ",\"" + std::string(t::rack) + "\":\"rack-" + std::to_string(i) + "\"";
    out += "}";
  }
  out += "}}";
  return out;
}

TEST_F(InventoryHttp, ImpactRefusedIs409WithTheImpactAndHowToAcceptIt) {
  auto cfg = push_config(dir / "store");
  cfg.inventories[0].config.max_profile_changes = 1;
  auto& reg = start(std::move(cfg));
  const auto base = reg.push("dc", racked("base", 4, 0), std::nullopt, "w");
  ASSERT_EQ(base.outcome, push_outcome::created) << describe(base);
  // All four Nodes gain a rack: four profile changes, over maxProfileChanges 1.
  const auto r = reg.push("dc", racked("all-racked", 4, 4), std::nullopt, "w");
  ASSERT_EQ(r.outcome, push_outcome::impact_refused) << describe(r);
  ASSERT_NE(r.impact, nullptr);
  const auto res = push_response(r, "dc");
  expect_failure_status(res, 409, "Conflict", "dc", r.message);
  EXPECT_EQ(res[http::field::etag], base.served->etag);
  EXPECT_FALSE(has_header(res, http::field::retry_after));
  const auto text = body_of(res);
  json_doc doc(text);
  ASSERT_TRUE(doc.ok) << text;
  simdjson::dom::object impact;
  ASSERT_FALSE(doc.root["impact"].get(impact)) << text;
  EXPECT_NE(text.find(",\"impact\":" + core::render_impact_json(*r.impact)), std::string::npos)
      << text;
  EXPECT_EQ(str(doc.root["acceptImpact"]["header"]), "Topogate-Accept-Impact") << text;
  EXPECT_EQ(str(doc.root["acceptImpact"]["value"]), r.impact_baseline_etag) << text;
  EXPECT_EQ(r.impact_baseline_etag, base.served->etag);
  uint64_t limit = 0;
  ASSERT_FALSE(doc.root["acceptImpact"]["maxProfileChanges"].get(limit)) << text;
  EXPECT_EQ(limit, 1u);

  // The value the answer gives accepts the same body.
  const auto accepted = reg.push("dc", racked("all-racked", 4, 4), std::nullopt, "w",
                                 std::string(str(doc.root["acceptImpact"]["value"])));
  ASSERT_EQ(accepted.outcome, push_outcome::stored) << describe(accepted);
  expect_published_body(push_response(accepted, "dc"), accepted, "dc", "all-racked", {});
}

// 503 ServiceUnavailable for `r` (unavailable or busy): the Status with its message,
// Retry-After `retry_after`, no ETag.
void expect_unavailable(const push_result& r, std::string_view retry_after) {
  SCOPED_TRACE(describe(r));
  const auto res = push_response(r, "dc");
  expect_failure_status(res, 503, "ServiceUnavailable", "dc", r.message);
  EXPECT_EQ(res[http::field::retry_after], retry_after);
  EXPECT_FALSE(has_header(res, http::field::etag));
}

// A refusal as the registry would return it, constructed.
push_result refusal(push_outcome outcome, std::string message, std::chrono::seconds retry_after) {
  push_result r;
  r.outcome = outcome;
  r.message = std::move(message);
  r.retry_after = retry_after;
  return r;
}

TEST_F(InventoryHttp, UnavailableIs503WithRetryAfter) {
  // No store configured: refused at once.
  {
    inv::registry_config cfg;
    inv::inventory_spec spec;
    spec.config = t::config("dc");
    cfg.inventories.push_back(std::move(spec));
    auto& reg = start(std::move(cfg));
    const auto r = reg.push("dc", t::snapshot_json("p"), std::nullopt, "w");
    ASSERT_EQ(r.outcome, push_outcome::unavailable) << describe(r);
    EXPECT_LE(r.retry_after.count(), 1);
    expect_unavailable(r, "1");  // never Retry-After: 0
  }
  // The store fails under a served revision (its directory is gone).
  {
    auto& reg = start(push_config(dir / "store"));
    ASSERT_EQ(reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "w").outcome,
              push_outcome::created);
    std::filesystem::remove_all(dir / "store");
    t::write_file(dir / "store", "not a directory");
    const auto r = reg.push("dc", t::snapshot_json("p-2"), std::nullopt, "w");
    ASSERT_EQ(r.outcome, push_outcome::unavailable) << describe(r);
    expect_unavailable(r, std::to_string(std::max<long long>(1, r.retry_after.count())));
  }
  // store.timeout of 7 s: Retry-After says so.
  expect_unavailable(
      refusal(push_outcome::unavailable, "the push did not complete within store.timeout (7 s)",
              std::chrono::seconds(7)),
      "7");
}

TEST_F(InventoryHttp, BusyIs503WithRetryAfter) {
  auto r = refusal(push_outcome::busy,
                   "4 pushes to inventory \"dc\" are already in progress; try again shortly",
                   std::chrono::seconds(1));
  expect_unavailable(r, "1");
  r.retry_after = std::chrono::seconds(0);
  expect_unavailable(r, "1");
  r.retry_after = std::chrono::seconds(3);
  expect_unavailable(r, "3");
}

// Every outcome, constructed: its status code and reason, and which headers it carries.
TEST_F(InventoryHttp, EveryOutcomeHasItsStatus) {
  // A published revision to stand for `served`/`candidate`.
  t::manual_clock clk;
  inv::inventory one(t::config("dc"), clk);
  const auto offered =
      one.offer(t::snapshot_json("r-1"), {"push", "w", std::nullopt, std::nullopt});
  ASSERT_TRUE(offered.accepted);
  const auto rev = one.current();
  ASSERT_NE(rev, nullptr);

  struct row {
    push_outcome outcome;
    unsigned code;
    std::string_view reason;  // "" for 201/200 (no Status body)
    bool etag;
    bool retry_after;
  };
  const row rows[] = {
      {push_outcome::created, 201, "", true, false},
      {push_outcome::stored, 200, "", true, false},
      {push_outcome::not_found, 404, "NotFound", false, false},
      {push_outcome::not_pushable, 409, "Conflict", false, false},
      {push_outcome::too_large, 413, "RequestEntityTooLarge", false, false},
      {push_outcome::invalid, 422, "Invalid", false, false},
      {push_outcome::precondition_failed, 412, "PreconditionFailed", true, false},
      {push_outcome::impact_refused, 409, "Conflict", true, false},
      {push_outcome::unavailable, 503, "ServiceUnavailable", false, true},
      {push_outcome::busy, 503, "ServiceUnavailable", false, true},
  };
  for (const auto& row : rows) {
    SCOPED_TRACE(std::string(inv::to_string(row.outcome)));
    push_result r;
    r.outcome = row.outcome;
    r.message = "because";
    if (row.etag) r.served = rev;
    if (row.code < 300) r.candidate = rev;
    if (row.outcome == push_outcome::invalid) {
      r.errors.push_back(core::invalid("S7", "nodes[worker-1][topology.gpustack.ai/region]",
                                       "-bad-", "bad value"));
    }
    if (row.outcome == push_outcome::impact_refused) {
      r.impact = offered.impact;
      r.impact_baseline_etag = rev->etag;
      r.max_profile_changes = 1;
    }
    const auto res = push_response(r, "dc");
    if (row.code < 300) {
      EXPECT_EQ(res.result_int(), row.code);
      expect_published_body(res, r, "dc", "r-1", {});
    } else {
      expect_failure_status(res, row.code, row.reason, "dc");
    }
    EXPECT_EQ(has_header(res, http::field::etag), row.etag);
    if (row.etag) {
      EXPECT_EQ(res[http::field::etag], rev->etag);
    }
    EXPECT_EQ(has_header(res, http::field::retry_after), row.retry_after);
  }
}

// Every file of a store directory and its bytes.
std::vector<std::pair<std::string, std::string>> files_of(const std::filesystem::path& d) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(d))
    if (e.is_regular_file()) {
      std::ifstream in(e.path(), std::ios::binary);
      out.emplace_back(e.path().string(), std::string(std::istreambuf_iterator<char>(in), {}));
    }
  std::sort(out.begin(), out.end());
  return out;
}

// PUT ?dryRun=All: the answer of the push (200 with the revision and its impact, 412, 422),
// and nothing stored, published or recorded.
TEST_F(InventoryHttp, DryRunAnswersThePushAndStoresNothing) {
  auto& reg = start(push_config(dir / "store"));
  const auto first = reg.push("dc", t::snapshot_json("p-1"), std::nullopt, "ci-bot");
  ASSERT_EQ(first.outcome, push_outcome::created) << describe(first);
  const inv::inventory& one = *reg.find("dc");
  const auto store = files_of(dir / "store");
  ASSERT_FALSE(store.empty());
  const auto attempts = one.attempts_recorded();
  const auto served = one.current();
  auto unchanged = [&] {
    EXPECT_EQ(one.current(), served);
    EXPECT_EQ(one.attempts_recorded(), attempts);
    EXPECT_EQ(files_of(dir / "store"), store);
  };

  const auto dry = reg.dry_run({"dc", t::snapshot_json("p-2", 8), std::nullopt, "ci-bot", {}});
  ASSERT_EQ(dry.outcome, push_outcome::validated) << describe(dry);
  ASSERT_NE(dry.candidate, nullptr);
  EXPECT_EQ(dry.candidate->revision_id, "p-2");
  ASSERT_NE(dry.impact, nullptr) << "four Nodes joined: an impact against p-1";
  const auto res = push_response(dry, "dc");
  EXPECT_EQ(res.result_int(), 200u);
  EXPECT_FALSE(has_header(res, http::field::etag));  // nothing new is served
  const auto text = body_of(res);
  json_doc doc(text);
  ASSERT_TRUE(doc.ok) << text;
  EXPECT_EQ(str(doc.root["dryRun"]), "All") << text;
  EXPECT_EQ(str(doc.root["revision"]), "p-2") << text;
  EXPECT_EQ(str(doc.root["etag"]), dry.candidate->etag) << text;
  EXPECT_NE(text.find(",\"impact\":" + core::render_impact_json(*dry.impact)), std::string::npos);
  unchanged();

  const auto stale =
      reg.dry_run({"dc", t::snapshot_json("p-2", 8), std::string("\"nope\""), "ci-bot", {}});
  ASSERT_EQ(stale.outcome, push_outcome::precondition_failed) << describe(stale);
  EXPECT_EQ(push_response(stale, "dc").result_int(), 412u);
  const auto matching = reg.dry_run({"dc", t::snapshot_json("p-2", 8), served->etag, "ci-bot", {}});
  EXPECT_EQ(matching.outcome, push_outcome::validated) << describe(matching);
  const auto bad = reg.dry_run({"dc", "nodes: 3", std::nullopt, "ci-bot", {}});
  ASSERT_EQ(bad.outcome, push_outcome::invalid) << describe(bad);
  EXPECT_EQ(push_response(bad, "dc").result_int(), 422u);
  EXPECT_EQ(reg.dry_run({"nope", t::snapshot_json("p"), std::nullopt, "w", {}}).outcome,
            push_outcome::not_found);
  unchanged();

  // The same body pushed is published: the dry run's answer was the push's.
  const auto pushed = reg.push("dc", t::snapshot_json("p-2", 8), std::nullopt, "ci-bot");
  ASSERT_EQ(pushed.outcome, push_outcome::stored) << describe(pushed);
  EXPECT_EQ(pushed.served->etag, dry.candidate->etag);
  EXPECT_NE(files_of(dir / "store"), store);
}

}  // namespace
}  // namespace topogate::server
