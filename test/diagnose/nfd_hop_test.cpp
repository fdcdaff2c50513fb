// The NFD hop of "Verify the scheduling chain" (docs/operations.md, "## `topogate diagnose
// chain`"): for a writing TopologySource, one NodeFeature per described Node as the consumer
// writes it, its labels private and the revision's, applied by nfd-master to the Node. Each
// finding both ways, then the test/fixtures/diagnose/nfd-chain scenario.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "diagnose/cluster_objects.hpp"
#include "diagnose/diagnose.hpp"
#include "test/diagnose/fixtures.hpp"

namespace topogate::diagnose {
namespace {

namespace fs = std::filesystem;

constexpr const char* uid_a = "0a1b2c3d-0000-4000-8000-00000000000a";
constexpr const char* uid_b = "0a1b2c3d-0000-4000-8000-00000000000b";
constexpr const char* rack = "topology.gpustack.ai/rack";

// FNV-1a 64, written out here rather than taken from the code under test.
std::string expected_name(const std::string& uid, const std::string& node) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  std::string bytes = uid;
  bytes.push_back('\0');
  bytes += node;
  for (unsigned char ch : bytes) {
    h ^= ch;
    h *= 0x100000001b3ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string("gpustack-topology-") + buf;
}

std::string labels_json(const std::vector<std::pair<std::string, std::string>>& labels) {
  std::string out = "{";
  for (std::size_t i = 0; i < labels.size(); ++i)
    out += (i ? "," : "") + ("\"" + labels[i].first + "\":\"" + labels[i].second + "\"");
  return out + "}";
}

// One writing source over a cluster, as the parts a test changes.
struct scenario {
  std::string source_name = "data-center", uid = uid_a;
  bool webhook = false;
  // The revision's Nodes and labels (the standard zone is added as a parent).
  std::vector<std::pair<std::string, std::string>> described = {{"n1", "r1"}};
  bool with_config_map = true;
  struct node {
    std::string name;
    std::vector<std::pair<std::string, std::string>> labels;
    std::optional<std::string> annotation;
  };
  std::vector<node> nodes = {
      {"n1", {{"topology.kubernetes.io/zone", "z"}, {rack, "r1"}}, std::string(rack)}};
  struct feature {
    std::string ns = "gpustack-system", name, node;
    std::vector<std::pair<std::string, std::string>> labels;  // spec.labels
    std::string uid_label, owner_uid, owner_kind = "TopologySource";
    bool node_label = true, controller = true;
  };
  std::vector<feature> features;
  bool features_read = true;

  scenario() { features.push_back(make("n1", {{rack, "r1"}})); }

  feature make(const std::string& n, std::vector<std::pair<std::string, std::string>> l,
               const std::string& u = uid_a) const {
    feature f;
    f.name = expected_name(u, n);
    f.node = n;
    f.labels = std::move(l);
    f.uid_label = u;
    f.owner_uid = u;
    return f;
  }

  std::string snapshot_text() const {
    std::string s = "apiVersion: topology.gpustack.ai/v1alpha1\nrevision: rev-1\nnodes:\n";
    for (const auto& [n, r] : described)
      s += "  " + n + ":\n    topology.kubernetes.io/zone: z\n" +
           (r.empty() ? std::string() : "    " + std::string(rack) + ": " + r + "\n");
    return s;
  }

  cluster_objects build() const {
    std::string items;
    const auto item = [&](const std::string& o) { items += (items.empty() ? "" : ",") + o; };
    item(
        R"({"apiVersion":"worker.gpustack.ai/v1","kind":"TopologySource","metadata":{"name":")" +
        source_name + R"(","uid":")" + uid +
        R"("},"spec":{"nodeSelector":{},"levels":["topology.kubernetes.io/zone",")" + rack +
        "\"]," +
        (webhook
             ? R"("webhook":{"url":"https://t/s","pollInterval":"1m","timeout":"1s","maxStaleness":"5m"}})"
             : R"("configMap":{"configMapRef":{"namespace":"gpustack-system","name":"inv"},"key":"snapshot.yaml"}})") +
        R"(,"status":{"conditions":[{"type":"Ready","status":"True"}]}})");
    if (with_config_map && !webhook) {
      std::string text;
      for (char ch : snapshot_text()) text += ch == '\n' ? std::string("\\n") : std::string(1, ch);
      item(
          R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"namespace":"gpustack-system","name":"inv"},"data":{"snapshot.yaml":")" +
          text + "\"}}");
    }
    for (const auto& n : nodes)
      item(R"({"apiVersion":"v1","kind":"Node","metadata":{"name":")" + n.name + R"(","labels":)" +
           labels_json(n.labels) +
           (n.annotation ? R"(,"annotations":{"nfd.node.kubernetes.io/feature-labels":")" +
                               *n.annotation + "\"}"
                         : std::string()) +
           "}}");
    for (const auto& f : features) {
      std::vector<std::pair<std::string, std::string>> meta;
      if (f.node_label) meta.emplace_back("nfd.node.kubernetes.io/node-name", f.node);
      if (!f.uid_label.empty()) meta.emplace_back("topology.gpustack.ai/source-uid", f.uid_label);
      item(
          R"({"apiVersion":"nfd.k8s-sigs.io/v1alpha1","kind":"NodeFeature","metadata":{"namespace":")" +
          f.ns + R"(","name":")" + f.name + R"(","labels":)" + labels_json(meta) +
          (f.owner_uid.empty()
               ? std::string()
               : R"(,"ownerReferences":[{"apiVersion":"worker.gpustack.ai/v1","kind":")" +
                     f.owner_kind + R"(","name":"owner","uid":")" + f.owner_uid +
                     R"(","controller":)" + (f.controller ? "true" : "false") + "}]") +
          R"(},"spec":{"labels":)" + labels_json(f.labels) + "}}");
    }
    cluster_objects c;
    const auto errors =
        add_objects(c, R"({"apiVersion":"v1","kind":"List","items":[)" + items + "]}", "t.json");
    EXPECT_TRUE(errors.empty()) << core::render_text(errors);
    if (features_read) c.node_features_read = true;
    if (webhook) c.revision_texts[""] = snapshot_text();
    return c;
  }
};

std::vector<chain_finding> nfd(const chain_report& r) {
  std::vector<chain_finding> out;
  for (const auto& f : r.findings)
    if (f.check.starts_with("nfd-")) out.push_back(f);
  return out;
}

std::string render(const std::vector<chain_finding>& fs) {
  std::string s;
  for (const auto& f : fs) s += f.check + " " + f.object + " " + f.field + ": " + f.detail + "\n";
  return s;
}

const chain_finding* find(const std::vector<chain_finding>& fs, std::string_view check) {
  for (const auto& f : fs)
    if (f.check == check) return &f;
  return nullptr;
}

std::set<std::string> ids(const std::vector<chain_finding>& fs) {
  std::set<std::string> out;
  for (const auto& f : fs) out.insert(f.check);
  return out;
}

TEST(NfdHop, NameIsFnv1a64OfUidNulNode) {
  EXPECT_EQ(nfd_feature_name(uid_a, "n1"), expected_name(uid_a, "n1"));
  EXPECT_NE(nfd_feature_name(uid_a, "n1"), nfd_feature_name(uid_b, "n1"));
  // The zero byte separates: moving a character across it changes the name.
  EXPECT_NE(nfd_feature_name("ab", "c"), nfd_feature_name("a", "bc"));
  EXPECT_TRUE(is_standard_label_key("topology.kubernetes.io/zone"));
  EXPECT_TRUE(is_standard_label_key("kubernetes.io/hostname"));
  EXPECT_FALSE(is_standard_label_key(rack));
  EXPECT_FALSE(is_standard_label_key("example.com/kubernetes.io"));
}

TEST(NfdHop, WrittenAsTheConsumerWritesAndAppliedIsClean) {
  const auto r = check_chain(scenario().build());
  EXPECT_TRUE(nfd(r).empty()) << render(nfd(r));
  EXPECT_TRUE(r.notes.empty());
  scenario webhook;
  webhook.webhook = true;
  const auto w = check_chain(webhook.build());
  EXPECT_TRUE(nfd(w).empty()) << render(nfd(w));
}

TEST(NfdHop, NoNodeFeatureCrd) {
  scenario s;
  s.features.clear();
  s.features_read = false;
  s.nodes[0].labels = {{"topology.kubernetes.io/zone", "z"}};
  auto fs = nfd(check_chain(s.build()));
  ASSERT_NE(find(fs, "nfd-crd"), nullptr) << render(fs);
  EXPECT_EQ(find(fs, "nfd-crd")->object, "TopologySource/data-center");
  const auto* na = find(fs, "nfd-not-applied");
  ASSERT_NE(na, nullptr) << render(fs);
  EXPECT_NE(na->detail.find("1) no NodeFeature CRD"), std::string::npos) << na->detail;
  EXPECT_EQ(find(fs, "nfd-feature-missing"), nullptr) << render(fs);
  // An empty NodeFeatureList says the API serves them: then the NodeFeature is missing.
  s.features_read = true;
  fs = nfd(check_chain(s.build()));
  EXPECT_EQ(find(fs, "nfd-crd"), nullptr) << render(fs);
  EXPECT_NE(find(fs, "nfd-feature-missing"), nullptr) << render(fs);
  cluster_objects listed;
  ASSERT_TRUE(
      add_objects(
          listed,
          R"({"apiVersion":"nfd.k8s-sigs.io/v1alpha1","kind":"NodeFeatureList","items":[]})",
          "nf.json")
          .empty());
  EXPECT_TRUE(listed.node_features_read);
}

TEST(NfdHop, MissingAndDuplicate) {
  scenario s;
  s.described.emplace_back("n2", "r2");
  s.nodes.push_back({"n2", {{"topology.kubernetes.io/zone", "z"}}, std::nullopt});
  auto fs = nfd(check_chain(s.build()));
  const auto* m = find(fs, "nfd-feature-missing");
  ASSERT_NE(m, nullptr) << render(fs);
  EXPECT_EQ(m->object, "Node/n2");
  EXPECT_NE(m->detail.find("gpustack-system/" + expected_name(uid_a, "n2")), std::string::npos);
  EXPECT_NE(m->detail.find(std::string(rack) + "=r2"), std::string::npos) << m->detail;
  // A Node described with no private label gets no NodeFeature: nothing is missing.
  s.described.back().second = "";
  fs = nfd(check_chain(s.build()));
  EXPECT_EQ(find(fs, "nfd-feature-missing"), nullptr) << render(fs);

  scenario d;
  auto second = d.make("n1", {{rack, "r1"}});
  second.name = "gpustack-topology-other";
  d.features.push_back(second);
  fs = nfd(check_chain(d.build()));
  const auto* dup = find(fs, "nfd-feature-duplicate");
  ASSERT_NE(dup, nullptr) << render(fs);
  EXPECT_EQ(dup->object, "Node/n1");
  EXPECT_NE(dup->detail.find("gpustack-topology-other"), std::string::npos);
  EXPECT_EQ(find(nfd(check_chain(scenario().build())), "nfd-feature-duplicate"), nullptr);
}

TEST(NfdHop, NameLabelsAndController) {
  scenario s;
  s.features[0].name = "gpustack-topology-0000000000000000";
  auto fs = nfd(check_chain(s.build()));
  const auto* n = find(fs, "nfd-feature-name");
  ASSERT_NE(n, nullptr) << render(fs);
  EXPECT_NE(n->detail.find(expected_name(uid_a, "n1")), std::string::npos) << n->detail;

  scenario l;
  l.features[0].uid_label = uid_b;  // still the source's by its controller
  fs = nfd(check_chain(l.build()));
  const auto* lf = find(fs, "nfd-feature-labels");
  ASSERT_NE(lf, nullptr) << render(fs);
  EXPECT_EQ(lf->field, "metadata.labels[topology.gpustack.ai/source-uid]");
  scenario nn;
  nn.features[0].node_label = false;
  fs = nfd(check_chain(nn.build()));
  ASSERT_NE(find(fs, "nfd-feature-labels"), nullptr) << render(fs);
  EXPECT_EQ(find(fs, "nfd-feature-labels")->field,
            "metadata.labels[nfd.node.kubernetes.io/node-name]");

  for (const auto& [owner, controller] :
       {std::pair<std::string, bool>{"", true}, {uid_a, false}, {uid_b, true}}) {
    scenario o;
    o.features[0].owner_uid = owner;
    o.features[0].controller = controller;
    fs = nfd(check_chain(o.build()));
    EXPECT_NE(find(fs, "nfd-feature-owner"), nullptr) << owner << controller << render(fs);
  }
  const auto clean = ids(nfd(check_chain(scenario().build())));
  for (const char* id : {"nfd-feature-name", "nfd-feature-labels", "nfd-feature-owner"})
    EXPECT_FALSE(clean.count(id)) << id;
}

TEST(NfdHop, WorkerNamespace) {
  scenario s;
  s.features[0].ns = "workers";
  auto c = s.build();
  auto fs = nfd(check_chain(c));
  ASSERT_NE(find(fs, "nfd-feature-namespace"), nullptr) << render(fs);
  c.worker_namespace = "workers";
  fs = nfd(check_chain(c));
  EXPECT_EQ(find(fs, "nfd-feature-namespace"), nullptr) << render(fs);
}

TEST(NfdHop, StandardKeysAreNotPrivate) {
  scenario s;
  s.features[0].labels.emplace_back("topology.kubernetes.io/zone", "z");
  const auto fs = nfd(check_chain(s.build()));
  const auto* f = find(fs, "nfd-feature-standard");
  ASSERT_NE(f, nullptr) << render(fs);
  EXPECT_EQ(f->field, "spec.labels[topology.kubernetes.io/zone]");
  EXPECT_NE(f->detail.find("private inventory labels only"), std::string::npos);
  // The zone is the revision's parent, not a difference from it.
  EXPECT_EQ(find(fs, "nfd-feature-revision"), nullptr) << render(fs);
  EXPECT_EQ(find(nfd(check_chain(scenario().build())), "nfd-feature-standard"), nullptr);
}

TEST(NfdHop, LabelsAreTheRevisions) {
  for (bool webhook : {false, true}) {
    scenario s;
    s.webhook = webhook;
    s.described = {{"n1", "r2"}};
    s.nodes[0].labels = {{"topology.kubernetes.io/zone", "z"}, {rack, "r1"}};
    const auto fs = nfd(check_chain(s.build()));
    const auto* f = find(fs, "nfd-feature-revision");
    ASSERT_NE(f, nullptr) << webhook << render(fs);
    EXPECT_NE(f->detail.find(std::string(rack) + "=r2 (NodeFeature has r1)"), std::string::npos)
        << f->detail;
    EXPECT_NE(f->detail.find("rev-1"), std::string::npos) << f->detail;
  }
  // Without the revision (no ConfigMap; a webhook source without --snapshot) a note says so
  // and nothing is compared with it.
  scenario cm;
  cm.with_config_map = false;
  cm.described = {{"n1", "r2"}};
  auto r = check_chain(cm.build());
  EXPECT_EQ(find(nfd(r), "nfd-feature-revision"), nullptr) << render(nfd(r));
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("ConfigMap gpustack-system/inv"), std::string::npos) << r.notes[0];
  scenario wh;
  wh.webhook = true;
  auto c = wh.build();
  c.revision_texts.clear();
  r = check_chain(c);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("--snapshot"), std::string::npos) << r.notes[0];
  EXPECT_NE(render_chain_text(r).find("note: TopologySource/data-center"), std::string::npos);
  EXPECT_NE(render_chain_json(r).find("\"notes\":["), std::string::npos);
  // A revision named for another source is not this one's.
  c.revision_texts["other"] = wh.snapshot_text();
  EXPECT_EQ(check_chain(c).notes.size(), 1u);
  c.revision_texts["data-center"] = wh.snapshot_text();
  EXPECT_TRUE(check_chain(c).notes.empty());
}

TEST(NfdHop, NotAppliedNamesTheLikelyCause) {
  const auto detail_of = [](const scenario& s) {
    const auto fs = nfd(check_chain(s.build()));
    const auto* f = find(fs, "nfd-not-applied");
    return f ? f->detail : std::string("(none)");
  };
  scenario absent;
  absent.nodes[0].labels = {{"topology.kubernetes.io/zone", "z"}};
  absent.nodes[0].annotation.reset();
  auto d = detail_of(absent);
  EXPECT_NE(d.find("1) nfd-master has never touched the Node: is it running? (evidence: no "
                   "nfd.node.kubernetes.io/feature-labels annotation)"),
            std::string::npos)
      << d;
  // nfd-master also removes the annotation once every key it applied is denied: the
  // namespaces of the missing keys are named next.
  EXPECT_NE(
      d.find("2) namespace topology.gpustack.ai is denied (-deny-label-ns=topology.gpustack.ai "
             "without -extra-label-ns=topology.gpustack.ai)"),
      std::string::npos)
      << d;

  scenario denied = absent;
  denied.nodes[0].annotation = "cpu-model.vendor_id";
  d = detail_of(denied);
  EXPECT_NE(d.find("1) namespace topology.gpustack.ai is denied"), std::string::npos) << d;
  EXPECT_NE(d.find("evidence: the annotation lists 1 keys, none of topology.gpustack.ai"),
            std::string::npos)
      << d;
  EXPECT_EQ(d.find("disabled"), std::string::npos) << d;

  scenario disabled = absent;
  disabled.nodes[0].annotation = "";
  d = detail_of(disabled);
  EXPECT_NE(d.find("labels are disabled (restrictions.disableLabels) (evidence"), std::string::npos)
      << d;
  EXPECT_LT(d.find("is denied"), d.find("disabled")) << d;

  scenario stale;  // listed in the annotation, another value on the Node
  stale.nodes[0].labels = {{"topology.kubernetes.io/zone", "z"}, {rack, "r0"}};
  d = detail_of(stale);
  EXPECT_NE(d.find(std::string(rack) + "=r1 (Node has r0)"), std::string::npos) << d;
  EXPECT_NE(d.find("has not caught up"), std::string::npos) << d;
  EXPECT_NE(d.find("evidence: listed in the annotation"), std::string::npos) << d;

  EXPECT_EQ(detail_of(scenario()), "(none)");
  // Labels of the Node NFD did not set do not matter.
  scenario extra;
  extra.nodes[0].labels.emplace_back("pool", "gpu");
  EXPECT_EQ(detail_of(extra), "(none)");
}

TEST(NfdHop, LeftBehind) {
  scenario s;
  s.nodes.push_back({"n2", {{rack, "r2"}}, std::string(rack)});
  s.features.push_back(s.make("n2", {{rack, "r2"}}));
  auto fs = nfd(check_chain(s.build()));
  const auto* f = find(fs, "nfd-feature-left-behind");
  ASSERT_NE(f, nullptr) << render(fs);
  EXPECT_EQ(f->object, "NodeFeature/gpustack-system/" + expected_name(uid_a, "n2"));
  s.described.emplace_back("n2", "r2");
  fs = nfd(check_chain(s.build()));
  EXPECT_EQ(find(fs, "nfd-feature-left-behind"), nullptr) << render(fs);
  // Without the revision: left behind when its Node does not exist.
  scenario gone;
  gone.with_config_map = false;
  gone.features.push_back(gone.make("n9", {{rack, "r9"}}));
  fs = nfd(check_chain(gone.build()));
  ASSERT_NE(find(fs, "nfd-feature-left-behind"), nullptr) << render(fs);
  EXPECT_NE(find(fs, "nfd-feature-left-behind")->detail.find("no such Node"), std::string::npos);
}

TEST(NfdHop, NodeWrittenByTwoSources) {
  scenario s;
  auto other = s.make("n1", {{rack, "r7"}}, uid_b);
  s.features.push_back(other);
  auto fs = nfd(check_chain(s.build()));
  const auto* f = find(fs, "nfd-node-sources");
  ASSERT_NE(f, nullptr) << render(fs);
  EXPECT_EQ(f->object, "Node/n1");
  EXPECT_NE(f->detail.find("TopologySource/data-center"), std::string::npos) << f->detail;
  EXPECT_NE(f->detail.find(std::string("source uid ") + uid_b), std::string::npos) << f->detail;
  // Other keys: both apply, no overlap.
  s.features.back().labels = {{"topology.gpustack.ai/row", "w1"}};
  fs = nfd(check_chain(s.build()));
  EXPECT_EQ(find(fs, "nfd-node-sources"), nullptr) << render(fs);
}

TEST(NfdHop, FixtureShowsEveryFinding) {
  const auto r = check_chain(testing::load("nfd-chain"));
  const auto fs = nfd(r);
  const auto found = ids(fs);
  for (const char* id :
       {"nfd-feature-missing", "nfd-feature-duplicate", "nfd-feature-name", "nfd-feature-labels",
        "nfd-feature-owner", "nfd-feature-namespace", "nfd-feature-standard",
        "nfd-feature-revision", "nfd-not-applied", "nfd-feature-left-behind", "nfd-node-sources"})
    EXPECT_TRUE(found.count(id)) << id << "\n" << render(fs);
  // The Node written and labelled as the consumer and nfd-master do has no finding.
  for (const auto& f : fs) EXPECT_NE(f.object, "Node/n-ok") << render(fs);
  // Each not-applied Node shows its own cause.
  std::map<std::string, std::string> why;
  for (const auto& f : fs)
    if (f.check == "nfd-not-applied") why[f.object] = f.detail;
  EXPECT_NE(why["Node/n-missing"].find("never touched"), std::string::npos);
  EXPECT_NE(why["Node/n-deny"].find("none of topology.gpustack.ai"), std::string::npos);
  EXPECT_NE(why["Node/n-disabled"].find("annotation is empty"), std::string::npos);
  EXPECT_TRUE(r.notes.empty());

  // Without the nodefeatures dump: the CRD is the finding, for each writing source.
  cluster_objects c;
  for (const auto& e : fs::directory_iterator(testing::fixtures() / "nfd-chain"))
    if (e.path().filename() != "nodefeatures.json") testing::add_file(c, e.path());
  const auto no_crd = nfd(check_chain(c));
  std::size_t crd = 0;
  for (const auto& f : no_crd) crd += f.check == "nfd-crd";
  EXPECT_EQ(crd, 2u) << render(no_crd);
  EXPECT_EQ(find(no_crd, "nfd-feature-missing"), nullptr);
}

}  // namespace
}  // namespace topogate::diagnose
