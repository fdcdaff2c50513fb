// The file source: its push refusal and its reading by the reconcile loop.

#include "inventory/source_file.hpp"

#include "inventory/registry_impl.hpp"

namespace topogate::inventory {

using detail::steady;

std::string file_source::push_refusal(std::string_view name) const {
  // One input per inventory keeps every replica deterministic: a file and pushes racing
  // would leave replicas serving whichever they saw last.
  return "inventory \"" + std::string(name) + "\" is fed by " + path_ + "; pushes are refused";
}

std::string file_source::input(const revision_store* /*store*/) const { return "file:" + path_; }

bool registry::impl::check_snapshot_file(entry& e, bool confirm_invalid) {
  auto* fs = e.src->as_file();
  if (fs == nullptr) return false;
  if (e.awaiting_nodes.load() && steady::now() < nodes_grace_until) return false;
  auto r = detail::read_source(fs->path(), e.inv->name(), core::max_snapshot_bytes);
  const inventory::offer_options opts{
      "file:" + (r.resolved_path.empty() ? fs->path() : r.resolved_path), "", std::nullopt,
      std::nullopt};
  std::lock_guard lk(e.write_mu);
  if (!r.ok) {
    if (r.error != fs->error) {
      const auto before = e.inv->attempts_recorded();
      e.inv->record_failure(opts, r.error + " (keeping the last valid revision)");
      report(e, before);
    }
    fs->error = r.error;
    fs->digest.clear();
    fs->ok = false;
    return false;
  }
  fs->error.clear();
  auto digest = detail::sha256_hex(r.bytes);
  const auto generation = e.inv->nodes_generation();
  if (digest == fs->digest && (fs->ok || generation == fs->generation)) {
    // Unchanged and still what the source says: the served revision is fresh. A Node
    // change was already applied to it by set_nodes().
    if (fs->ok) e.inv->confirm(fs->etag);
    fs->generation = generation;
    return false;
  }
  const auto before = e.inv->attempts_recorded();
  auto p = e.inv->prepare(r.bytes, opts);
  if (!p.candidate) {
    if (!confirm_invalid && digest != fs->pending_invalid_digest) {
      fs->pending_invalid_digest = digest;
      return true;
    }
    e.inv->record_rejection(p, opts);
    fs->ok = false;
  } else {
    e.inv->commit(p);
    release_freed_memory();
    const auto cur = e.inv->current();
    fs->ok = cur != nullptr;
    fs->etag = cur ? cur->etag : std::string();
  }
  fs->pending_invalid_digest.clear();
  fs->digest = std::move(digest);
  fs->generation = generation;
  report(e, before);
  return false;
}

}  // namespace topogate::inventory
