#include "inventory/inventory.hpp"

#include "inventory/inventory_internal.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>

#include "core/syntax.hpp"

namespace topogate::inventory {

namespace {

class real_clock final : public clock {
 public:
  [[nodiscard]] std::chrono::system_clock::time_point now() const override {
    return std::chrono::system_clock::now();
  }
};

// A short, single-line summary of an error list for 503 reasons and history.
std::string summarize(const core::error_list& errors) {
  if (errors.empty()) return {};
  std::string out = std::to_string(errors.size());
  out += errors.size() == 1 ? " error: [" : " errors, first: [";
  out += errors.front().rule;
  out += "] ";
  out += errors.front().to_string();
  return out;
}

// "N Node(s) unknown to the cluster: " and the first of their names: a note is logged and kept
// in the history for every revision a Node change makes, and must not grow with the pruned
// Nodes (/status lists them all).
constexpr std::size_t pruned_names_in_note = 20;
std::string pruned_note(const std::vector<std::string>& pruned) {
  std::string out = std::to_string(pruned.size()) + " Node(s) unknown to the cluster: ";
  const std::size_t shown = std::min(pruned.size(), pruned_names_in_note);
  for (std::size_t i = 0; i < shown; ++i) {
    if (i != 0) out += ", ";
    out += pruned[i];
  }
  if (shown < pruned.size())
    out += " and " + std::to_string(pruned.size() - shown) + " more (/status lists them)";
  return out;
}

const core::profile_assignment& profiles_of(const std::shared_ptr<const revision>& rev) {
  static const core::profile_assignment none;
  return rev && rev->profiles ? *rev->profiles : none;
}

// The impact of `next` against the revision served before it; for a process's first revision,
// against the profiles the selected Nodes carry (what the consumer applied last) when the Node
// list is known, else against nothing.
std::shared_ptr<const core::profile_impact> impact_between(
    const std::shared_ptr<const revision>& baseline, const std::shared_ptr<const revision>& next,
    const core::node_list* selected) {
  if (baseline) {
    return std::make_shared<const core::profile_impact>(
        core::compute_profile_impact(profiles_of(baseline), profiles_of(next)));
  }
  core::profile_impact im = core::compute_profile_impact(
      selected ? core::profiles_from_node_labels(*selected) : core::profile_assignment{},
      profiles_of(next));
  im.baseline = selected ? core::impact_baseline::node_labels : core::impact_baseline::none;
  return std::make_shared<const core::profile_impact>(std::move(im));
}

// True when the canonical rendering lists Nodes and labels in the snapshot's own order
// (names, then each Node's keys, strictly increasing): decoding json_body then gives back
// this very snapshot, order included, and no packed copy is needed.
bool in_canonical_order(const core::snapshot& s) {
  if (!detail::names_increasing(s)) return false;
  for (const auto& n : s.nodes) {
    for (std::size_t j = 1; j < n.labels.size(); ++j) {
      if (!(n.labels[j - 1].key < n.labels[j].key)) return false;
    }
  }
  return true;
}

// Length-prefixed strings (native-endian u32; the packed form never leaves the process):
// exact for any string, order preserved, no size limit to trip over when read back (the
// unpruned snapshot of a pruned revision may render larger than S10 allows).
void put_u32(std::string& out, std::size_t n) {
  const auto v = static_cast<std::uint32_t>(n);
  out.append(reinterpret_cast<const char*>(&v), sizeof v);
}

void put_str(std::string& out, std::string_view s) {
  put_u32(out, s.size());
  out.append(s);
}

bool get_u32(std::string_view& in, std::uint32_t& v) {
  if (in.size() < sizeof v) return false;
  std::memcpy(&v, in.data(), sizeof v);
  in.remove_prefix(sizeof v);
  return true;
}

bool get_str(std::string_view& in, std::string& s) {
  std::uint32_t n = 0;
  if (!get_u32(in, n) || in.size() < n) return false;
  s.assign(in.data(), n);
  in.remove_prefix(n);
  return true;
}

bool unpack(std::string_view in, core::snapshot& s) {
  std::uint32_t nodes = 0;
  if (!get_str(in, s.api_version) || !get_str(in, s.revision) || !get_u32(in, nodes)) return false;
  s.nodes.clear();
  s.nodes.reserve(nodes);
  for (std::uint32_t i = 0; i < nodes; ++i) {
    auto& n = s.nodes.emplace_back();
    std::uint32_t labels = 0;
    if (!get_str(in, n.name) || !get_u32(in, labels)) return false;
    n.labels.resize(labels);
    for (auto& l : n.labels) {
      if (!get_str(in, l.key) || !get_str(in, l.value)) return false;
    }
  }
  return in.empty();
}

// Bodies below this are not worth a heap walk after rendering: what they free fits in the
// pages malloc keeps anyway.
constexpr std::size_t small_body = 64u << 10;

// Not reachable: an accepted revision always reads back. Reported as its own error rather
// than evaluating an empty snapshot.
core::error_list unreadable_revision() {
  return {core::invalid("S1", "", "", "the accepted revision could not be read back")};
}

}  // namespace

namespace detail {

std::string pack(const core::snapshot& s) {
  std::size_t size = 12 + s.api_version.size() + s.revision.size();
  for (const auto& n : s.nodes) {
    size += 8 + n.name.size();
    for (const auto& l : n.labels) size += 8 + l.key.size() + l.value.size();
  }
  std::string out;
  out.reserve(size);
  put_str(out, s.api_version);
  put_str(out, s.revision);
  put_u32(out, s.nodes.size());
  for (const auto& n : s.nodes) {
    put_str(out, n.name);
    put_u32(out, n.labels.size());
    for (const auto& l : n.labels) {
      put_str(out, l.key);
      put_str(out, l.value);
    }
  }
  return out;
}

bool names_increasing(const core::snapshot& s) {
  for (std::size_t i = 1; i < s.nodes.size(); ++i)
    if (!(s.nodes[i - 1].name < s.nodes[i].name)) return false;
  return true;
}

}  // namespace detail

void detail::release_freed_memory() {
  // Not under AddressSanitizer: its allocator holds the memory, and glibc's trim of arenas
  // it never used raced a thread's exit there (malloc assertion in
  // __malloc_arena_thread_freeres, KubeStore.ConcurrentConditionalPushes, 2 runs in 15).
#if defined(__GLIBC__) && !defined(__SANITIZE_ADDRESS__)
  ::malloc_trim(0);
#endif
}

const std::string& revision::json_body() const {
  if (const std::string* whole = json_text.whole()) return *whole;
  std::call_once(json_cache->once, [this] { json_cache->text = json_text.str(); });
  return json_cache->text;
}

const std::string& revision::yaml_body() const {
  std::call_once(yaml_cache->once, [this] {
    // json_body is the canonical rendering of exactly the served snapshot: decoding it gives
    // that snapshot back. A decoder of its own, freed on return: the parser buffers for a
    // 1 MiB body are several times its size and this runs once per revision. A body in
    // pieces is gathered for the decoder alone, not kept (its readers are served the pieces).
    std::string gathered;
    const std::string* whole = json_text.whole();
    if (whole == nullptr) gathered = json_text.str();
    auto decoded = core::decode_snapshot(whole != nullptr ? *whole : gathered);
    if (!decoded.ok()) return;  // not reachable: json_body passed the same decoder
    yaml_cache->text = core::render_snapshot_yaml(decoded.value);
    yaml_cache->text.shrink_to_fit();
    decoded = {};
    std::string().swap(gathered);
    // Without this, 16 inventories of 1 MiB asked for YAML once each grew RSS by 30 MiB for
    // 18 MiB of YAML (bench/README.md).
    if (json_text.size() >= small_body) detail::release_freed_memory();
  });
  return yaml_cache->text;
}

bool revision::accepted_snapshot(core::snapshot& out) const {
  if (accepted_decoded) {
    out = *accepted_decoded;
    return true;
  }
  if (accepted_packed) return unpack(*accepted_packed, out);
  auto decoded = core::decode_snapshot(json_body());
  if (!decoded.ok()) return false;
  out = std::move(decoded.value);
  return true;
}

std::shared_ptr<const core::snapshot> revision::accepted_shared() const {
  if (accepted_decoded) return accepted_decoded;
  auto out = std::make_shared<core::snapshot>();
  if (!accepted_snapshot(*out)) return nullptr;
  return out;
}

const clock& system_clock() {
  static const real_clock c;
  return c;
}

inventory::inventory(inventory_config cfg, const clock& clk) : cfg_(std::move(cfg)), clock_(clk) {
  if (cfg_.history_size == 0) cfg_.history_size = 1;
}

std::string inventory::etag_of(std::string_view json_body) {
  return body_digest::of(json_body).etag();
}

bool inventory::if_match_matches(std::string_view header, const std::string* current_etag) {
  header = core::trim_ows(header);
  if (header == "*") return current_etag != nullptr;
  if (current_etag == nullptr) return false;
  while (!header.empty()) {
    const auto comma = header.find(',');
    const auto tag = core::trim_ows(header.substr(0, comma));
    // Strong comparison (RFC 9110 §8.8.3.2): a weak validator never matches If-Match.
    if (!tag.starts_with("W/") && tag == *current_etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

inventory::evaluation inventory::evaluate(const core::snapshot& snap,
                                          const std::shared_ptr<const core::node_list>& selected,
                                          const revision* from,
                                          std::shared_ptr<const core::snapshot> decoded) const {
  evaluation ev;
  // `selected` is the inventory's selected Nodes (set_nodes() applied the nodeSelector).
  const core::snapshot_context ctx{&cfg_.source, selected.get(), true};
  const core::snapshot* served = &snap;
  core::snapshot pruned;
  std::vector<std::string> gone;
  if (cfg_.unknown_nodes == unknown_nodes_policy::prune && selected != nullptr) {
    // Prune only the Nodes the list does not have (S3); any other error still rejects. A
    // snapshot that names a Node the list lacks fails S3 as it is, so it is only checked
    // as pruned (one validation where a Node change prunes, not two), and as it is only to
    // report its errors when the pruned one fails too.
    std::vector<bool> known(snap.nodes.size());
    core::node_list::cursor lookup(*selected);
    for (std::size_t i = 0; i < snap.nodes.size(); ++i) {
      known[i] = lookup.find(snap.nodes[i].name) != nullptr;
      if (!known[i]) gone.push_back(snap.nodes[i].name);
    }
    if (!gone.empty()) {
      pruned.api_version = snap.api_version;
      pruned.revision = snap.revision + "+pruned-" + std::to_string(gone.size());
      pruned.nodes.reserve(snap.nodes.size() - gone.size());
      for (std::size_t i = 0; i < snap.nodes.size(); ++i) {
        if (known[i]) pruned.nodes.push_back(snap.nodes[i]);
      }
      if (!core::validate_snapshot(pruned, ctx).empty()) {
        ev.errors = core::validate_snapshot(snap, ctx);  // report the unpruned errors
        return ev;
      }
      served = &pruned;
    }
  }
  if (served == &snap) {
    ev.errors = core::validate_snapshot(snap, ctx);
    if (!ev.errors.empty()) return ev;
  }

  auto rev = std::make_shared<revision>();
  std::vector<std::uint32_t> members;
  rev->json_text = core::shared_text(
      core::render_snapshot_json(*served, selected != nullptr ? &members : nullptr));
  if (rev->json_text.size() > core::max_snapshot_bytes) {
    // S10 as served: the consumer's reader refuses a body larger than 1 MiB.
    ev.errors.push_back(core::too_long("S10", "", rev->json_text.size(), core::max_snapshot_bytes));
    return ev;
  }
  auto digest = std::make_shared<const body_digest>(body_digest::of(rev->json_body()));
  rev->etag = digest->etag();
  if (selected != nullptr) rev->digest = std::move(digest);  // kept with `members`
  rev->revision_id = served->revision;
  rev->accepted_revision_id = snap.revision;
  rev->node_count = served->nodes.size();
  const bool canonical = in_canonical_order(snap);
  // Kept decoded (a Node list), the accepted snapshot needs no packed copy beside it.
  const bool keeps_decoded = selected != nullptr && decoded != nullptr;
  if ((!gone.empty() || !canonical) && !keeps_decoded) {
    rev->accepted_packed = from != nullptr && from->accepted_packed
                               ? from->accepted_packed
                               : std::make_shared<const std::string>(detail::pack(snap));
  }
  rev->profiles = std::make_shared<const core::profile_assignment>(
      core::assign_profiles(cfg_.source, served, selected.get()));
  rev->pruned_nodes = std::move(gone);
  if (selected != nullptr) {
    rev->accepted_decoded = std::move(decoded);
    rev->members = std::make_shared<const std::vector<std::uint32_t>>(std::move(members));
    rev->accepted_sorted = detail::names_increasing(snap);
    rev->accepted_canonical = canonical;
    if (rev->accepted_sorted)
      rev->carriers = detail::carriers_of(cfg_.source, snap, rev->pruned_nodes);
  }
  ev.rev = std::move(rev);
  return ev;
}

std::shared_ptr<const revision> inventory::current() const {
  std::lock_guard lk(mu_);
  return current_;
}

serve_decision inventory::serve() const {
  const auto now = clock_.now();
  std::lock_guard lk(mu_);
  if (!current_) return {nullptr, unavailable_reason_};
  if (cfg_.max_age.count() > 0) {
    const auto age = now - confirmed_at_;
    if (age > cfg_.max_age) {
      // The consumer's own maxStaleness clock must start: a 503 does that, stale data would not.
      return {nullptr, "revision older than maxAge (revision " + current_->revision_id + " age " +
                           core::format_go_duration(
                               std::chrono::duration_cast<std::chrono::nanoseconds>(age)) +
                           " > maxAge " +
                           core::format_go_duration(
                               std::chrono::duration_cast<std::chrono::nanoseconds>(cfg_.max_age)) +
                           ")"};
    }
  }
  return {current_, {}};
}

bool inventory::ready() const {
  // Staleness does not make a replica unready: unready replicas leave the Service and the
  // consumer would see connection errors instead of a 503 that explains itself.
  std::lock_guard lk(mu_);
  return current_ != nullptr || cfg_.allow_empty_start;
}

inventory::prepared inventory::prepare(std::string_view bytes, const offer_options& o) const {
  prepared p;
  std::shared_ptr<const core::node_list> selected;
  std::shared_ptr<const revision> baseline;
  {
    std::lock_guard lk(mu_);
    selected = selected_;
    baseline = last_served_;
    p.nodes_generation = generation_;
    p.result.served = current_;
    if (o.if_match) {
      // Preconditions are evaluated before the request's own semantics (RFC 9110 §13.2.2):
      // a stale writer gets 412 even when its body would also be invalid.
      if (!if_match_matches(*o.if_match, current_ ? &current_->etag : nullptr)) {
        p.precondition_failed = true;
        return p;
      }
    }
  }

  const core::snapshot_context ctx{&cfg_.source, selected.get()};
  // One parser state per thread that validates: a small snapshot's buffers are reused. A
  // large one's (several times the document) are handed back once it is decoded: large
  // documents come rarely (a file change, a push), and every thread that ever validated one
  // would otherwise keep them.
  thread_local core::json_decoder decoder;
  const bool large = bytes.size() >= small_body;
  auto decoded = core::decode_snapshot(decoder, bytes);
  if (!decoded.ok()) {
    // The failure path decodes again so the core reports every error it can, S1 to S10.
    p.result.errors = core::check_snapshot(decoder, bytes, ctx);
    if (p.result.errors.empty()) p.result.errors = std::move(decoded.errors);
    if (large) decoder = core::json_decoder{};
    return p;
  }
  if (large) decoder = core::json_decoder{};
  // With a Node list, the decoded snapshot is kept for the Node changes to come.
  auto shared =
      selected ? std::make_shared<const core::snapshot>(std::move(decoded.value)) : nullptr;
  auto ev =
      shared ? evaluate(*shared, selected, nullptr, shared) : evaluate(decoded.value, selected);
  if (!ev.rev) {
    p.result.errors = std::move(ev.errors);
    return p;
  }
  ev.rev->accepted_at = o.accepted_at.value_or(clock_.now());
  ev.rev->origin = o.origin;
  ev.rev->actor = o.actor;
  p.result.impact = impact_between(baseline, ev.rev, selected.get());
  if (baseline) p.result.impact_baseline_etag = baseline->etag;
  const std::size_t limit = cfg_.max_profile_changes;
  if (limit != 0 && baseline &&
      (p.result.impact->profile_changes() > limit || p.result.impact->flavor_changes() > limit) &&
      !(o.accept_impact && if_match_matches(*o.accept_impact, &baseline->etag))) {
    // A fat-fingered export must not drain the queue: every profile change makes GPUStack
    // hold and drain the ClusterQueue and Kueue evict the Workloads admitted on it.
    p.result.impact_refused = true;
    p.refused = std::move(ev.rev);
    return p;
  }
  p.result.accepted = true;
  p.candidate = std::move(ev.rev);
  return p;
}

void inventory::push_history(attempt a) {
  if (history_.size() >= cfg_.history_size) {
    history_.erase(
        history_.begin(),
        history_.begin() + static_cast<std::ptrdiff_t>(history_.size() - cfg_.history_size + 1));
  }
  history_.push_back(std::move(a));
  ++attempts_;
}

void inventory::commit(const prepared& p) {
  if (!p.candidate) return;
  std::lock_guard wl(write_mu_);
  std::shared_ptr<const revision> rev = p.candidate;
  std::shared_ptr<const core::node_list> selected;
  bool stale_nodes = false;
  {
    std::lock_guard lk(mu_);
    stale_nodes = p.nodes_generation != generation_;
    selected = selected_;
  }
  core::error_list errors;
  if (stale_nodes) {
    // The Node list changed between prepare() and commit(): what is served must be a
    // function of the current list, so evaluate the accepted snapshot again.
    evaluation ev;
    if (auto snap = p.candidate->accepted_shared()) {
      ev = evaluate(*snap, selected, p.candidate.get(), snap);
    } else {
      ev.errors = unreadable_revision();
    }
    if (ev.rev) {
      ev.rev->accepted_at = p.candidate->accepted_at;
      ev.rev->origin = p.candidate->origin;
      ev.rev->actor = p.candidate->actor;
      rev = std::move(ev.rev);
    } else {
      rev = nullptr;
      errors = std::move(ev.errors);
    }
  }

  const auto now = clock_.now();
  std::lock_guard lk(mu_);
  // The accepted snapshot (unpruned) is what a later Node change re-evaluates. The candidate
  // itself, not a copy: its bodies are what current_ serves when nothing was pruned.
  base_ = p.candidate;
  attempt a;
  a.at = now;
  a.revision_id = p.candidate->accepted_revision_id;
  a.origin = p.candidate->origin;
  a.actor = p.candidate->actor;
  if (rev) {
    // The impact the offer reported holds unless the baseline or the served form moved since.
    a.impact =
        rev == p.candidate && p.result.impact &&
                p.result.impact_baseline_etag == (last_served_ ? last_served_->etag : std::string())
            ? p.result.impact
            : impact_between(last_served_, rev, selected.get());
    set_delta(selected, rev->profiles);
    current_ = rev;
    last_served_ = rev;
    impact_refusal_.clear();
    // accepted_at is the offer's time, or the original acknowledgement for a reload from the
    // store, so a restart does not make an old revision look fresh.
    confirmed_at_ = rev->accepted_at;
    a.accepted = true;
    a.etag = rev->etag;
    a.revision_id = rev->revision_id;
    a.pruned_nodes = rev->pruned_nodes.size();
    if (!rev->pruned_nodes.empty()) {
      a.note = "pruned " + pruned_note(rev->pruned_nodes);
    }
  } else {
    set_delta(nullptr, nullptr);
    current_ = nullptr;
    unavailable_reason_ = "revision " + p.candidate->accepted_revision_id +
                          " is not valid for the current Nodes (" + summarize(errors) + ")";
    a.errors = std::move(errors);
    a.note = "Node list changed before publication";
  }
  push_history(std::move(a));
}

void inventory::record_rejection(const prepared& p, const offer_options& o) {
  const auto now = clock_.now();
  attempt a;
  a.at = now;
  a.origin = o.origin;
  a.actor = o.actor;
  a.accepted = false;
  a.errors = p.result.errors;
  if (p.precondition_failed) a.note = "If-Match precondition failed";
  if (p.result.impact_refused) {
    if (p.refused) a.revision_id = p.refused->revision_id;
    a.impact = p.result.impact;
    a.impact_refused = true;
    a.note = "refused by maxProfileChanges " + std::to_string(cfg_.max_profile_changes) + " (" +
             core::summarize_impact(*p.result.impact) + "; " +
             std::to_string(p.result.impact->profile_changes()) + " profile change(s), " +
             std::to_string(p.result.impact->flavor_changes()) +
             " profile(s) appearing or disappearing) without acceptance of the impact";
  }
  std::lock_guard wl(write_mu_);
  std::lock_guard lk(mu_);
  if (p.result.impact_refused)
    impact_refusal_ = a.revision_id.empty() ? a.note : "revision " + a.revision_id + " " + a.note;
  if (!base_ && !p.precondition_failed) {
    unavailable_reason_ = "no valid revision yet (last attempt from " + o.origin +
                          " rejected: " + summarize(p.result.errors) + ")";
  }
  push_history(std::move(a));
}

void inventory::record_stranded_refusal(const prepared& p, const offer_options& o,
                                        std::size_t stranded, const std::string& summary) {
  attempt a;
  a.at = clock_.now();
  a.origin = o.origin;
  a.actor = o.actor;
  if (p.candidate) a.revision_id = p.candidate->revision_id;
  a.impact = p.result.impact;
  a.stranded_workloads = stranded;
  a.stranded_refused = true;
  a.note = "refused by maxStrandedWorkloads " +
           std::to_string(cfg_.max_stranded_workloads.value_or(0)) + " (" + summary +
           ") without acceptance of the impact";
  std::lock_guard wl(write_mu_);
  std::lock_guard lk(mu_);
  push_history(std::move(a));
}

void inventory::record_failure(const offer_options& o, std::string note) {
  attempt a;
  a.at = clock_.now();
  a.origin = o.origin;
  a.actor = o.actor;
  a.note = std::move(note);
  std::lock_guard wl(write_mu_);
  std::lock_guard lk(mu_);
  if (!base_) unavailable_reason_ = "no valid revision yet (" + a.note + ")";
  push_history(std::move(a));
}

void inventory::withdraw(std::string reason) {
  std::lock_guard wl(write_mu_);
  std::lock_guard lk(mu_);
  base_ = nullptr;
  current_ = nullptr;
  set_delta(nullptr, nullptr);
  unavailable_reason_ = std::move(reason);
}

void inventory::set_delta(std::shared_ptr<const core::node_list> nodes,
                          std::shared_ptr<const core::profile_assignment> profiles) {
  delta_nodes_ = profiles ? std::move(nodes) : nullptr;
  delta_profiles_ = std::move(profiles);
}

std::string inventory::impact_refusal() const {
  std::lock_guard lk(mu_);
  return impact_refusal_;
}

std::shared_ptr<const revision> inventory::last_served() const {
  std::lock_guard lk(mu_);
  return last_served_;
}

std::uint64_t inventory::attempts_recorded() const {
  std::lock_guard lk(mu_);
  return attempts_;
}

offer_result inventory::offer(std::string_view bytes, const offer_options& o) {
  auto p = prepare(bytes, o);
  if (p.candidate && !p.precondition_failed) {
    commit(p);
    p.result.served = current();
    if (!p.result.served) p.result.accepted = false;
  } else {
    record_rejection(p, o);
    p.result.served = current();
  }
  return std::move(p.result);
}

void inventory::set_nodes(std::optional<core::node_list> nodes) {
  set_nodes(nodes ? std::make_shared<const core::node_list>(std::move(*nodes)) : nullptr);
}

void inventory::set_nodes(std::shared_ptr<const core::node_list> nodes) {
  std::lock_guard wl(write_mu_);
  std::shared_ptr<const core::node_list> selected;
  // What is served is a function of the accepted snapshot and the selected Nodes: a change
  // to a Node this inventory does not select (or to none of what it keeps) changes nothing.
  // (selected_ and nodes_seen_ are written only under write_mu_, which this holds.)
  node_diff diff;
  const std::uint64_t since = nodes ? nodes->since : 0;
  const std::uint64_t seen = std::exchange(nodes_seen_, nodes ? nodes->id : 0);
  if (nodes && selected_ && delta_ && since != 0 && since == seen) {
    // The source named the Nodes that changed since the list selected_ came from.
    selected = select_changed(nodes, *selected_, diff);
    if (!selected) return;
  } else {
    if (nodes) full_count_.fetch_add(1, std::memory_order_relaxed);
    if (nodes && cfg_.source.node_selector) {
      selected = std::make_shared<const core::node_list>(core::select_nodes(*nodes, cfg_.source));
    } else {
      selected = std::move(nodes);  // every Node is selected: the list itself
    }
    if (selected && selected_) {
      diff =
          diff_nodes(*selected_, *selected, std::max<std::size_t>(64, selected->nodes.size() / 16));
      if (!diff.many && diff.changes.empty()) return;
    }
  }
  std::shared_ptr<const revision> base;
  std::shared_ptr<const revision> cur;
  std::shared_ptr<const core::node_list> before;
  {
    std::lock_guard lk(mu_);
    before = std::move(selected_);
    selected_ = selected;
    ++generation_;
    base = base_;
    // Only what the consumer last saw can take the change alone (its impact is measured
    // against it).
    if (current_ && current_ == last_served_) cur = current_;
  }
  if (!base) return;

  std::optional<evaluation> change;
  // A diff of the lists the served revision is known to be exact for (a Node change past
  // cur, or cur made from other Nodes, is evaluated in full).
  if (delta_ && cur && before && selected && delta_nodes_ == before && delta_profiles_)
    change = evaluate_change(*cur, *base, diff, selected, delta_profiles_);
  evaluation ev;
  if (change) {
    delta_count_.fetch_add(1, std::memory_order_relaxed);
    if (change->unchanged) {
      set_delta(selected, delta_profiles_);
      return;
    }
    ev = std::move(*change);
  } else if (auto snap = base->accepted_shared()) {
    ev = evaluate(*snap, selected, base.get(), snap);
  } else {
    ev.errors = unreadable_revision();
  }
  const auto now = clock_.now();
  std::lock_guard lk(mu_);
  attempt a;
  a.at = now;
  a.origin = "nodes";
  a.revision_id = base->accepted_revision_id;
  if (ev.rev) {
    // The cluster already changed: the impact is recorded and counted, never refused.
    auto impact = impact_between(last_served_, ev.rev, selected.get());
    ev.rev->accepted_at = base->accepted_at;
    ev.rev->origin = base->origin;
    ev.rev->actor = base->actor;
    if (current_ && current_->etag == ev.rev->etag) {
      // The same bytes, but a Node the snapshot does not describe joined, left or changed a
      // read-only parent: the consumer assigns profiles from Nodes too.
      if (impact->empty()) {
        // Nothing the consumer would notice; the next change starts from these Nodes.
        set_delta(selected, ev.rev->profiles);
        return;
      }
      a.accepted = true;
      a.etag = ev.rev->etag;
      a.revision_id = ev.rev->revision_id;
      a.pruned_nodes = ev.rev->pruned_nodes.size();
      a.note = "Node list changed: profiles of managed Nodes changed (" +
               core::summarize_impact(*impact) + ")";
      a.impact = std::move(impact);
      set_delta(selected, ev.rev->profiles);
      current_ = std::move(ev.rev);
      last_served_ = current_;
      push_history(std::move(a));
      return;
    }
    a.impact = std::move(impact);
    a.accepted = true;
    a.etag = ev.rev->etag;
    a.revision_id = ev.rev->revision_id;
    a.pruned_nodes = ev.rev->pruned_nodes.size();
    a.note = ev.rev->pruned_nodes.empty()
                 ? std::string("Node list changed: revision valid again")
                 : "Node list changed: pruned " + pruned_note(ev.rev->pruned_nodes);
    set_delta(selected, ev.rev->profiles);
    current_ = std::move(ev.rev);
    last_served_ = current_;
  } else {
    set_delta(nullptr, nullptr);
    const auto reason = "revision " + base->accepted_revision_id +
                        " is not valid for the current Nodes (" + summarize(ev.errors) + ")";
    if (!current_ && unavailable_reason_ == reason) return;
    // A revision the consumer would reject is not served: 503 with the reason instead.
    current_ = nullptr;
    unavailable_reason_ = reason;
    a.accepted = false;
    a.errors = std::move(ev.errors);
    a.note = "Node list changed: revision no longer valid";
  }
  push_history(std::move(a));
}

void inventory::confirm(std::string_view etag) {
  const auto now = clock_.now();
  std::lock_guard lk(mu_);
  if (current_ && current_->etag == etag) confirmed_at_ = std::max(confirmed_at_, now);
}

std::shared_ptr<const revision> inventory::accepted() const {
  std::lock_guard lk(mu_);
  return base_;
}

std::chrono::system_clock::time_point inventory::confirmed_at() const {
  std::lock_guard lk(mu_);
  return confirmed_at_;
}

std::optional<std::size_t> inventory::selected_node_count() const {
  std::lock_guard lk(mu_);
  if (!selected_) return std::nullopt;
  return selected_->nodes.size();
}

std::uint64_t inventory::nodes_generation() const {
  std::lock_guard lk(mu_);
  return generation_;
}

std::vector<attempt> inventory::history() const {
  std::lock_guard lk(mu_);
  return history_;
}

std::vector<attempt> inventory::attempts_after(std::uint64_t count) const {
  std::lock_guard lk(mu_);
  if (attempts_ <= count) return {};
  const auto n =
      static_cast<std::ptrdiff_t>(std::min<std::uint64_t>(attempts_ - count, history_.size()));
  return {history_.end() - n, history_.end()};
}

std::optional<attempt> inventory::last_attempt() const {
  std::lock_guard lk(mu_);
  if (history_.empty()) return std::nullopt;
  return history_.back();
}

}  // namespace topogate::inventory
