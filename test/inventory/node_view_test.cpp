// The Node view's answer to one watch event (node_view::apply): true exactly when a Node
// appeared or left or one of the labels it keeps changed, whether the event's labels are
// compared in place (the common case) or built and compared (duplicate keys, many labels).

#include "inventory/node_view.hpp"

#include <gtest/gtest.h>
#include <simdjson.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace topogate::inventory::detail {
namespace {

// A view that keeps the keys starting with "keep/", holding one Node "n" with `labels`.
struct view_fixture {
  node_view view{[](std::string_view key) { return key.starts_with("keep/"); }};
  simdjson::dom::parser parser;

  static std::string node(std::string_view name, std::string_view labels) {
    return R"({"metadata":{"name":")" + std::string(name) + R"(","labels":{)" +
           std::string(labels) + "}}}";
  }
  bool apply(std::string_view type, std::string_view name, std::string_view labels) {
    simdjson::dom::element e;
    const std::string text = node(name, labels);
    EXPECT_FALSE(parser.parse(text).get(e));
    return view.apply(type, e);
  }
  explicit view_fixture(std::string_view labels) {
    simdjson::dom::element e;
    const std::string text = node("n", labels);
    EXPECT_FALSE(parser.parse(text).get(e));
    view.add_listed(e);
    view.finish_list();
  }
  std::vector<std::pair<std::string, std::string>> kept() {
    const auto l = view.list();
    EXPECT_EQ(l.nodes.size(), 1U);
    return l.nodes.empty() ? std::vector<std::pair<std::string, std::string>>{}
                           : l.nodes.front().labels.get();
  }
};

constexpr std::string_view listed = R"("keep/a":"1","other":"x","keep/b":"2")";

TEST(NodeView, AChangeOfAnUnkeptLabelIsNothingToTell) {
  view_fixture f(listed);
  EXPECT_FALSE(f.apply("MODIFIED", "n", R"("keep/b":"2","other":"y","keep/a":"1","new":"z")"));
  EXPECT_FALSE(f.apply("MODIFIED", "n", R"("keep/a":"1","keep/b":"2")"));
  EXPECT_FALSE(f.apply("ADDED", "n", R"("keep/a":"1","keep/b":"2","n":7)"));  // not a string
  using kv = std::pair<std::string, std::string>;
  EXPECT_EQ(f.kept(), (std::vector<kv>{{"keep/a", "1"}, {"keep/b", "2"}}));
}

TEST(NodeView, EveryChangeOfAKeptLabelIsTold) {
  using kv = std::pair<std::string, std::string>;
  {
    view_fixture f(listed);  // a value changed
    EXPECT_TRUE(f.apply("MODIFIED", "n", R"("keep/a":"1","keep/b":"3")"));
    EXPECT_EQ(f.kept(), (std::vector<kv>{{"keep/a", "1"}, {"keep/b", "3"}}));
  }
  {
    view_fixture f(listed);  // one removed
    EXPECT_TRUE(f.apply("MODIFIED", "n", R"("keep/a":"1","other":"x")"));
    EXPECT_EQ(f.kept(), (std::vector<kv>{{"keep/a", "1"}}));
  }
  {
    view_fixture f(listed);  // one added
    EXPECT_TRUE(f.apply("MODIFIED", "n", R"("keep/a":"1","keep/b":"2","keep/c":"")"));
    EXPECT_EQ(f.kept().size(), 3U);
  }
  {
    view_fixture f(listed);  // all gone, labels absent
    simdjson::dom::element e;
    const std::string text = R"({"metadata":{"name":"n"}})";
    ASSERT_FALSE(f.parser.parse(text).get(e));
    EXPECT_TRUE(f.view.apply("MODIFIED", e));
    EXPECT_TRUE(f.kept().empty());
    EXPECT_FALSE(f.view.apply("MODIFIED", e));
  }
  {
    view_fixture f(listed);  // a Node joins, one leaves
    EXPECT_TRUE(f.apply("ADDED", "m", R"("keep/a":"1")"));
    EXPECT_EQ(f.view.size(), 2U);
    EXPECT_TRUE(f.apply("DELETED", "m", ""));
    EXPECT_FALSE(f.apply("DELETED", "m", ""));
    EXPECT_FALSE(f.apply("BOOKMARK", "n", R"("keep/a":"9")"));
    EXPECT_EQ(f.view.size(), 1U);
  }
}

TEST(NodeView, DuplicateKeysAreComparedAsTheyAre) {
  // A key twice with the same value is kept twice; the same key once is then a change, and
  // the pair again is not.
  view_fixture f(R"("keep/a":"1","keep/a":"1")");
  EXPECT_EQ(f.kept().size(), 2U);
  EXPECT_FALSE(f.apply("MODIFIED", "n", R"("keep/a":"1","keep/a":"1","other":"z")"));
  EXPECT_TRUE(f.apply("MODIFIED", "n", R"("keep/a":"1")"));
  EXPECT_FALSE(f.apply("MODIFIED", "n", R"("keep/a":"1")"));
  // Kept once, sent twice: a change (the in-place comparison sees the key a second time).
  EXPECT_TRUE(f.apply("MODIFIED", "n", R"("keep/a":"1","keep/a":"1")"));
}

TEST(NodeView, SixtyFourKeptLabelsAreComparedInPlaceAndSixtyFiveBuilt) {
  for (const int count : {64, 65}) {
    std::string labels;
    for (int i = 0; i < count; ++i) {
      if (i != 0) labels += ',';
      labels += R"("keep/)" + std::to_string(1000 + i) + R"(":"v")";
    }
    view_fixture f(labels);
    EXPECT_EQ(f.kept().size(), static_cast<std::size_t>(count));
    EXPECT_FALSE(f.apply("MODIFIED", "n", labels + R"(,"other":"1")")) << count;
    const std::string last = "\"keep/" + std::to_string(1000 + count - 1) + "\":\"v\"";
    std::string changed = labels;
    changed.replace(changed.rfind(last), last.size(),
                    "\"keep/" + std::to_string(1000 + count - 1) + "\":\"w\"");
    EXPECT_TRUE(f.apply("MODIFIED", "n", changed)) << count;
    std::string fewer = labels.substr(0, labels.rfind(','));
    EXPECT_TRUE(f.apply("MODIFIED", "n", fewer)) << count;
    EXPECT_EQ(f.kept().size(), static_cast<std::size_t>(count - 1));
  }
}

// Nodes whose kept labels are the same share one vector of them, and a set no Node and no
// list uses any more is dropped at the next list.
TEST(NodeView, NodesWithTheSameKeptLabelsShareThemAndASetNoneUsesIsDropped) {
  node_view view{[](std::string_view key) { return key.starts_with("keep/"); }};
  simdjson::dom::parser parser;
  const auto element = [&](std::string_view name, std::string_view labels) {
    static std::string text;  // the element views it until the next call
    text = view_fixture::node(name, labels);
    simdjson::dom::element e;
    EXPECT_FALSE(parser.parse(text).get(e));
    return e;
  };
  const auto relist = [&](std::string_view a, std::string_view b, std::string_view c) {
    view.add_listed(element("a", a));
    view.add_listed(element("b", b));
    view.add_listed(element("c", c));
    view.finish_list();
  };
  relist(R"("keep/z":"1","other":"x")", R"("other":"y","keep/z":"1")", R"("keep/z":"2")");
  {
    const auto l = view.list();
    ASSERT_EQ(l.nodes.size(), 3u);
    EXPECT_EQ(&l.nodes[0].labels.get(), &l.nodes[1].labels.get()) << "a and b keep the same";
    EXPECT_NE(&l.nodes[0].labels.get(), &l.nodes[2].labels.get());
  }
  EXPECT_EQ(view.label_sets(), 2u);
  // b takes c's set, c a new one: a watch event finds a set in use too.
  EXPECT_TRUE(view.apply("MODIFIED", element("b", R"("keep/z":"2")")));
  EXPECT_TRUE(view.apply("MODIFIED", element("c", R"("keep/z":"3")")));
  {
    const auto l = view.list();
    EXPECT_NE(&l.nodes[1].labels.get(), &l.nodes[2].labels.get());
    using kv = std::pair<std::string, std::string>;
    EXPECT_EQ(l.nodes[1].labels.get(), (std::vector<kv>{{"keep/z", "2"}}));
    EXPECT_EQ(l.nodes[2].labels.get(), (std::vector<kv>{{"keep/z", "3"}}));
  }
  EXPECT_EQ(view.label_sets(), 3u);
  // A list handed out keeps a set alive across a sweep; once it is gone, so is the set, at the
  // next one (z=1 and z=3 here).
  auto held = view.list();
  relist(R"("keep/z":"2")", R"("keep/z":"2")", R"("keep/z":"3")");
  EXPECT_EQ(view.label_sets(), 3u) << "z=1: no Node has it now, the list handed out does";
  held = {};
  EXPECT_TRUE(view.apply("MODIFIED", element("c", R"("keep/z":"2")")));
  relist(R"("keep/z":"2")", R"("keep/z":"2")", R"("keep/z":"2")");
  EXPECT_EQ(view.label_sets(), 1u);
  const auto l = view.list();
  EXPECT_EQ(&l.nodes[0].labels.get(), &l.nodes[2].labels.get());
}

// Between lists, the sets no Node uses are dropped whenever the sets doubled since the last
// sweep (at least 1,024): a watch that gives one Node a new value again and again, with no
// relist, holds about twice the sets in use, never one per event; a set in use is never dropped.
TEST(NodeView, ManyNewValuesWithoutARelistKeepTheSetsBounded) {
  node_view view{[](std::string_view key) { return key.starts_with("keep/"); }};
  simdjson::dom::parser parser;
  std::string text;
  const auto element = [&](const std::string& name, const std::string& value) {
    text = view_fixture::node(name, R"("keep/z":")" + value + R"(","other":"x")");
    simdjson::dom::element e;
    EXPECT_FALSE(parser.parse(text).get(e));
    return e;
  };
  const auto name_of = [](int i) {
    std::string s = std::to_string(i);
    return "node-" + std::string(5 - s.size(), '0') + s;
  };
  // A few Nodes: the floor of 1,024 bounds the sets.
  for (int i = 0; i < 3; ++i) view.add_listed(element(name_of(i), "0"));
  view.finish_list();
  EXPECT_EQ(view.label_sets(), 1u);
  std::size_t most = 0;
  for (int k = 1; k <= 5000; ++k) {
    ASSERT_TRUE(view.apply("MODIFIED", element(name_of(k % 3), "v" + std::to_string(k))));
    most = std::max(most, view.label_sets());
  }
  EXPECT_GE(most, 1000u) << "not swept at each event";
  EXPECT_LT(most, 1024u) << "swept when they reached 1,024";

  // 1,500 Nodes with a value each: every set is in use, the bound follows them (twice as many).
  for (int i = 0; i < 1500; ++i) view.add_listed(element(name_of(i), "n" + std::to_string(i)));
  view.finish_list();
  EXPECT_EQ(view.label_sets(), 1500u);
  most = 0;
  for (int k = 1; k <= 5000; ++k) {
    ASSERT_TRUE(view.apply("MODIFIED", element(name_of(0), "w" + std::to_string(k))));
    most = std::max(most, view.label_sets());
  }
  EXPECT_GT(most, 2900u) << "not swept at each event";
  EXPECT_LE(most, 3010u) << "swept when they reached twice those in use";
  const auto l = view.list();
  ASSERT_EQ(l.nodes.size(), 1500u);
  using kv = std::pair<std::string, std::string>;
  EXPECT_EQ(l.nodes[0].labels.get(), (std::vector<kv>{{"keep/z", "w5000"}}));
  for (std::size_t i = 1; i < l.nodes.size(); ++i)
    ASSERT_EQ(l.nodes[i].labels.get(), (std::vector<kv>{{"keep/z", "n" + std::to_string(i)}}))
        << "a set in use is kept: " << l.nodes[i].name.str();
}

TEST(NodeView, EachListTakenNamesTheNodesChangedSinceTheOneBefore) {
  view_fixture f(listed);
  const core::node_list first = *f.view.take();
  EXPECT_NE(first.id, 0U);
  EXPECT_EQ(first.since, 0U);  // nothing taken before it
  EXPECT_TRUE(f.apply("ADDED", "b", R"("keep/a":"1")"));
  EXPECT_TRUE(f.apply("MODIFIED", "n", R"("keep/a":"2")"));
  EXPECT_FALSE(f.apply("MODIFIED", "n", R"("keep/a":"2","other":"3")"));  // not a change
  EXPECT_TRUE(f.apply("ADDED", "a", R"("keep/a":"1")"));
  EXPECT_TRUE(f.apply("MODIFIED", "b", R"("keep/a":"3")"));
  const core::node_list second = *f.view.take();
  EXPECT_EQ(second.since, first.id);
  EXPECT_GT(second.id, first.id);
  EXPECT_EQ(second.changed, (std::vector<std::string>{"a", "b", "n"}));  // sorted, once each
  EXPECT_EQ(second.nodes.size(), 3U);
  EXPECT_TRUE(f.apply("DELETED", "a", ""));
  const core::node_list third = *f.view.take();
  EXPECT_EQ(third.since, second.id);
  EXPECT_EQ(third.changed, (std::vector<std::string>{"a"}));
  const core::node_list fourth = *f.view.take();  // nothing changed in between
  EXPECT_EQ(fourth.since, third.id);
  EXPECT_TRUE(fourth.changed.empty());
}

TEST(NodeView, AfterARelistOrPastSixtyFourChangesNoChangeIsNamed) {
  view_fixture f(listed);
  (void)f.view.take();
  // 64 Nodes changed (the view holds fewer than 1,024: 64 is the bound) are named; 65 are not.
  for (const int count : {64, 65}) {
    for (int i = 0; i < count; ++i)
      EXPECT_TRUE(f.apply("ADDED", "m" + std::to_string(count) + "-" + std::to_string(i), ""));
    const core::node_list l = *f.view.take();
    EXPECT_EQ(l.since != 0, count == 64) << count;
    EXPECT_EQ(l.changed.size(), count == 64 ? 64U : 0U) << count;
  }
  EXPECT_TRUE(f.apply("DELETED", "n", ""));
  simdjson::dom::element e;
  const std::string text = view_fixture::node("n", listed);
  ASSERT_FALSE(f.parser.parse(text).get(e));
  f.view.add_listed(e);
  f.view.finish_list();  // a relist: what happened while the watch was cut is not known
  const core::node_list relisted = *f.view.take();
  EXPECT_EQ(relisted.since, 0U);
  EXPECT_TRUE(relisted.changed.empty());
  EXPECT_EQ(relisted.nodes.size(), 1U);
  EXPECT_TRUE(f.apply("DELETED", "n", ""));
  EXPECT_EQ(f.view.take()->since, relisted.id);  // and named again from there
}

// Each list taken is the one before with the changed Nodes edited in: the same Nodes as a list
// built from the whole view, sharing every chunk but those of the Nodes that changed.
TEST(NodeView, AListTakenSharesTheChunksOfTheNodesThatDidNotChange) {
  view_fixture f(listed);
  simdjson::dom::element e;
  for (int i = 0; i < 1000; ++i) {
    const std::string text = view_fixture::node("w" + std::to_string(1000 + i), R"("keep/a":"1")");
    ASSERT_FALSE(f.parser.parse(text).get(e));
    f.view.add_listed(e);
  }
  f.view.finish_list();
  const auto first = f.view.take();
  // The chunks a walk over both lists in name order passes over whole, as diffs do.
  const auto shared_chunks = [](const core::node_list& a, const core::node_list& b) {
    std::size_t n = 0;
    auto i = a.nodes.begin();
    auto j = b.nodes.begin();
    while (i != a.nodes.end() && j != b.nodes.end()) {
      if (i.shares_chunk_with(j)) {
        ++n;
        i.skip_chunk();
        j.skip_chunk();
      } else if (i->name == j->name) {
        ++i;
        ++j;
      } else if (i->name < j->name) {
        ++i;
      } else {
        ++j;
      }
    }
    return n;
  };
  EXPECT_TRUE(f.apply("MODIFIED", "w1500", R"("keep/a":"2")"));
  const auto second = f.view.take();
  EXPECT_EQ(second->nodes, f.view.list().nodes);
  EXPECT_EQ(*second->find("w1500")->label("keep/a"), "2");
  EXPECT_EQ(*first->find("w1500")->label("keep/a"), "1");  // the list taken before is as it was
  EXPECT_EQ(shared_chunks(*first, *second), first->nodes.chunk_count() - 1);
  // A Node that joins and one that leaves: only their chunks are copied.
  EXPECT_TRUE(f.apply("ADDED", "w1250x", R"("keep/a":"1")"));
  EXPECT_TRUE(f.apply("DELETED", "w1999", ""));
  const auto third = f.view.take();
  EXPECT_EQ(third->nodes, f.view.list().nodes);
  EXPECT_EQ(third->nodes.size(), second->nodes.size());
  EXPECT_EQ(third->find("w1999"), nullptr);
  ASSERT_NE(third->find("w1250x"), nullptr);
  EXPECT_GE(shared_chunks(*second, *third), second->nodes.chunk_count() - 3);
}

}  // namespace
}  // namespace topogate::inventory::detail
