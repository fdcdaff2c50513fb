// The `kubernetes` store and the Node watch. etcd behind the apiserver is the replicated
// store: a push is acknowledged once the apiserver accepted the write, every replica lists
// and watches the same ConfigMaps, and optimistic concurrency on metadata.resourceVersion
// decides between concurrent writers. topogate builds no replication of its own.

#include <simdjson.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>

#include "core/field_error.hpp"
#include "core/time.hpp"
#include "inventory/kube.hpp"
#include "inventory/node_view.hpp"
#include "inventory/store.hpp"
#include "kube/api_error.hpp"
#include "kube/base64.hpp"
#include "kube/client.hpp"
#include "kube/list.hpp"
#include "kube/watch.hpp"

namespace topogate::inventory {
namespace detail {

namespace {

constexpr std::string_view managed_by_selector = "app.kubernetes.io/managed-by=topogate";
constexpr std::string_view data_key = "snapshot.json";
constexpr std::string_view gzip_key = "snapshot.json.gz";
constexpr std::string_view accepted_at_annotation = "topogate.gpustack.ai/accepted-at";
constexpr std::string_view actor_annotation = "topogate.gpustack.ai/actor";
constexpr std::string_view digest_annotation = "topogate.gpustack.ai/sha256";
// A ConfigMap holds at most 1 MiB of data (keys included) and etcd refuses requests over
// ~1.5 MiB: a snapshot close to S10's 1 MiB is stored gzip-compressed in binaryData.
constexpr std::size_t max_plain_bytes = 900u << 10;

bool gzip(std::string_view in, std::string& out) {
  z_stream zs{};
  if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  out.resize(deflateBound(&zs, static_cast<uLong>(in.size())) + 32);
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  zs.next_out = reinterpret_cast<Bytef*>(out.data());
  zs.avail_out = static_cast<uInt>(out.size());
  const int rc = deflate(&zs, Z_FINISH);
  out.resize(zs.total_out);
  deflateEnd(&zs);
  return rc == Z_STREAM_END;
}

bool gunzip(std::string_view in, std::string& out, std::size_t limit) {
  z_stream zs{};
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return false;
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  out.clear();
  std::array<char, 65536> buf{};
  int rc = Z_OK;
  while (rc == Z_OK) {
    zs.next_out = reinterpret_cast<Bytef*>(buf.data());
    zs.avail_out = static_cast<uInt>(buf.size());
    rc = inflate(&zs, Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END) break;
    out.append(buf.data(), buf.size() - zs.avail_out);
    if (out.size() > limit) {
      rc = Z_DATA_ERROR;  // a decompression bomb is not a snapshot
      break;
    }
  }
  inflateEnd(&zs);
  return rc == Z_STREAM_END;
}

std::string_view str_or(simdjson::dom::element e, std::string_view key) {
  std::string_view v;
  if (e[key].get(v)) return {};
  return v;
}

// ConfigMap JSON -> stored revision; errc::damaged when the object holds none of ours. `name`
// and `out.version` are set whenever the object has metadata, even when it fails.
core::result<void> decode_configmap(simdjson::dom::element cm, stored_revision& out,
                                    std::string& name) {
  simdjson::dom::element meta;
  if (cm["metadata"].get(meta))
    return core::fail(core::errc::damaged, "ConfigMap without metadata");
  name = std::string(str_or(meta, "name"));
  out.version = std::string(str_or(meta, "resourceVersion"));
  simdjson::dom::element ann;
  if (!meta["annotations"].get(ann)) {
    if (auto t = core::parse_rfc3339(str_or(ann, accepted_at_annotation))) out.accepted_at = *t;
    out.actor = std::string(str_or(ann, actor_annotation));
  }
  std::string_view plain;
  simdjson::dom::element data;
  if (!cm["data"].get(data) && !data[data_key].get(plain)) {
    out.json.assign(plain);
  } else {
    std::string_view b64;
    simdjson::dom::element bin;
    std::string compressed;
    if (cm["binaryData"].get(bin) || bin[gzip_key].get(b64) ||
        !kube::base64_decode(b64, compressed) || !gunzip(compressed, out.json, 2u << 20)) {
      return core::fail(core::errc::damaged, "ConfigMap " + name + " holds no readable snapshot");
    }
  }
  std::string_view digest;
  if (!meta["annotations"].get(ann) && !ann[digest_annotation].get(digest) &&
      digest != sha256_hex(out.json)) {
    return core::fail(core::errc::damaged, "ConfigMap " + name + ": snapshot digest mismatch");
  }
  return {};
}

std::string encode_configmap(const std::string& ns, const std::string& cm_name,
                             const std::string& inventory, const stored_revision& rev,
                             const std::string& resource_version) {
  std::string out = R"({"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":)";
  core::append_json_string(out, cm_name);
  out += R"(,"namespace":)";
  core::append_json_string(out, ns);
  if (!resource_version.empty()) {
    out += R"(,"resourceVersion":)";
    core::append_json_string(out, resource_version);
  }
  out +=
      R"(,"labels":{"app.kubernetes.io/managed-by":"topogate","app.kubernetes.io/component":"inventory-store"},)";
  out += R"("annotations":{)";
  core::append_json_string(out, accepted_at_annotation);
  out.push_back(':');
  core::append_json_string(out, core::format_rfc3339_ms(rev.accepted_at));
  out.push_back(',');
  core::append_json_string(out, actor_annotation);
  out.push_back(':');
  core::append_json_string(out, rev.actor);
  out.push_back(',');
  core::append_json_string(out, digest_annotation);
  out.push_back(':');
  core::append_json_string(out, sha256_hex(rev.json));
  out += R"(,"topogate.gpustack.ai/inventory":)";
  core::append_json_string(out, inventory);
  out += "}}";
  std::string compressed;
  if (rev.json.size() > max_plain_bytes && gzip(rev.json, compressed)) {
    out += R"(,"binaryData":{)";
    core::append_json_string(out, gzip_key);
    out.push_back(':');
    core::append_json_string(out, kube::base64_encode(compressed));
    out += "}";
  } else {
    out += R"(,"data":{)";
    core::append_json_string(out, data_key);
    out.push_back(':');
    core::append_json_string(out, rev.json);
    out += "}";
  }
  out += "}";
  return out;
}

std::chrono::milliseconds remaining(store_deadline deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline -
                                                               std::chrono::steady_clock::now());
}

class kube_store final : public revision_store {
 public:
  kube_store(kube::endpoint ep, std::string ns)
      : ns_(std::move(ns)), client_(ep), watch_client_(std::move(ep)) {}
  ~kube_store() override { stop(); }

  [[nodiscard]] std::string describe() const override { return "kubernetes:" + ns_; }

  // A list of the one object, not a GET: the list's resourceVersion says when the answer
  // held (a quorum read), also when there is no object, so a watch event older than the
  // read is recognised as such.
  core::result<void> load(const std::string& inventory, store_state& out,
                          store_deadline deadline) override {
    out = {};
    const auto budget = remaining(deadline);
    if (budget.count() <= 0)
      return core::fail(core::errc::unavailable, "no time left for the read");
    const auto name = cm_name(inventory);
    const auto r = client_.request(
        "GET", collection_path() + "?fieldSelector=" + kube::url_encode("metadata.name=" + name),
        {}, budget);
    if (!r || r->status != 200) {
      auto e = kube::api_error("get ConfigMap " + name, r);
      e.code = core::errc::unavailable;
      return e;
    }
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    simdjson::dom::array items;
    std::string_view rv;
    if (p.parse(r->body).get(doc) || doc["metadata"]["resourceVersion"].get(rv) ||
        doc["items"].get(items))
      return core::fail(core::errc::unavailable, "get ConfigMap: malformed response");
    out.as_of = std::string(rv);
    for (auto item : items) {
      stored_revision rev;
      std::string item_name;
      const auto decoded = decode_configmap(item, rev, item_name);
      if (item_name != name) continue;
      if (!decoded) {
        stored_revision version_only;
        version_only.version = std::move(rev.version);
        out.rev = std::move(version_only);
        out.damaged = true;
        return decoded;
      }
      out.rev = std::move(rev);
    }
    return {};
  }

  core::result<std::string> save(const std::string& inventory, const stored_revision& rev,
                                 const std::string& expected_version,
                                 store_deadline deadline) override {
    const auto name = cm_name(inventory);
    const auto budget = remaining(deadline);
    if (budget.count() <= 0)
      return core::fail(core::errc::unavailable, "no time left for the write");
    const auto body = encode_configmap(ns_, name, inventory, rev, expected_version);
    // Create when no version is known; otherwise replace exactly that version: a 409 means
    // another replica wrote in between, and the caller decides (412, or retry).
    const auto r = expected_version.empty()
                       ? client_.request("POST", collection_path(), body, budget)
                       : client_.request("PUT", object_path(name), body, budget);
    if (!r || (r->status != 200 && r->status != 201)) {
      // A store answers conflict or unavailable, nothing else.
      auto e = kube::api_error("write ConfigMap " + name, r);
      if (e.code != core::errc::conflict) e.code = core::errc::unavailable;
      return e;
    }
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view rv;
    if (p.parse(r->body).get(doc) || doc["metadata"]["resourceVersion"].get(rv)) {
      // The write happened; only its version is unknown. The watch will tell.
      return std::string();
    }
    return std::string(rv);
  }

  void start_watch(const std::vector<std::string>& inventories, change_fn fn) override {
    if (inventories.empty() || thread_.joinable()) return;
    for (const auto& i : inventories) by_cm_[cm_name(i)] = i;
    fn_ = std::move(fn);
    thread_ = std::thread([this] { run(); });
  }

  void stop() override {
    stop_.stop();
    watch_client_.cancel();
    if (thread_.joinable()) thread_.join();
  }

  void set_log(log_fn log) { log_ = std::move(log); }

 private:
  static std::string cm_name(const std::string& inventory) { return "topogate-" + inventory; }
  std::string collection_path() const {
    return "/api/v1/namespaces/" + kube::url_encode(ns_) + "/configmaps";
  }
  std::string object_path(const std::string& name) const {
    return collection_path() + "/" + kube::url_encode(name);
  }

  // One object of a list or a watch event, as the state of its inventory at `as_of` (the
  // event's own version; a deletion's is the version that deleted it).
  void deliver(simdjson::dom::element cm, bool deleted) {
    store_state state;
    stored_revision rev;
    std::string name;
    const auto decoded = decode_configmap(cm, rev, name);
    const auto it = by_cm_.find(name);
    if (it == by_cm_.end()) return;
    state.as_of = rev.version;
    if (deleted) {
      if (log_) log_("warn", "kubernetes store: ConfigMap " + name + " deleted");
    } else if (!decoded) {
      // Hand-edited into something that is no revision: nothing to serve from it (the next
      // push replaces it). Its version still moves the inventory's view forward.
      if (log_) log_("warn", decoded.error().message);
      stored_revision version_only;
      version_only.version = rev.version;
      state.rev = std::move(version_only);
      state.damaged = true;
    } else {
      state.rev = std::move(rev);
    }
    fn_(it->second, state);
  }

  // Every inventory's state as of the list: its object, or none (deleted while no watch was
  // open, or never written). Returns the list's version.
  core::result<std::string> list(const std::string& path) {
    std::map<std::string, bool> listed;
    for (const auto& [cm, inv] : by_cm_) listed[cm] = false;
    std::string version;
    kube::list_options o;
    o.page_timeout = std::chrono::seconds(30);
    simdjson::dom::parser p;
    auto r = kube::list_raw_pages(
        watch_client_, path, o, [&](const std::string& body) -> core::result<std::string> {
          simdjson::dom::element doc;
          std::string_view rv;
          simdjson::dom::array items;
          if (p.parse(body).get(doc) || doc["metadata"]["resourceVersion"].get(rv) ||
              doc["items"].get(items))
            return core::fail(core::errc::unavailable, "malformed response");
          version = std::string(rv);
          for (auto item : items) {
            listed[std::string(str_or(item["metadata"], "name"))] = true;
            deliver(item, false);
          }
          std::string_view next;
          return doc["metadata"]["continue"].get(next) ? std::string() : std::string(next);
        });
    if (!r) return std::move(r).error();
    for (const auto& [cm, seen] : listed) {
      const auto it = by_cm_.find(cm);
      if (!seen && it != by_cm_.end()) fn_(it->second, store_state{std::nullopt, false, version});
    }
    return version;
  }

  void run() {
    kube::reflector r;
    r.path = collection_path() + "?labelSelector=" + kube::url_encode(managed_by_selector);
    r.list = [&] { return list(r.path); };
    r.on_event = [&](std::string_view type, simdjson::dom::element obj) {
      if (type == "ADDED" || type == "MODIFIED" || type == "DELETED")
        deliver(obj, type == "DELETED");
    };
    r.on_failure = [&](const core::error& e) {
      if (log_) log_("warn", "kubernetes store: " + e.message);
    };
    kube::reflect(watch_client_, r, stop_);
  }

  std::string ns_;
  kube::client client_;        // pushes and loads
  kube::client watch_client_;  // the long-running list and watch (cancelled on stop)
  std::map<std::string, std::string> by_cm_;
  change_fn fn_;
  log_fn log_;
  kube::stop_signal stop_;
  std::thread thread_;
};

class api_node_watch final : public node_watch {
 public:
  api_node_watch(kube::endpoint ep, log_fn log) : client_(std::move(ep)), log_(std::move(log)) {}
  ~api_node_watch() override { stop(); }

  void start(label_filter keep, std::function<void(list_source)> on_change) override {
    view_ = std::make_shared<shared_view>(std::move(keep));
    on_change_ = std::move(on_change);
    thread_ = std::thread([this] { run(); });
  }

  void stop() override {
    stop_.stop();
    client_.cancel();
    if (thread_.joinable()) thread_.join();
  }

 private:
  // The view, shared with the list_source handed over (which may outlive this watch): the
  // watch thread writes it under the lock, a taker copies it out under the lock.
  struct shared_view {
    explicit shared_view(label_filter keep) : nodes(std::move(keep)) {}
    std::mutex mu;
    node_view nodes;
  };

  void publish() {
    on_change_([view = view_] {
      std::lock_guard lk(view->mu);
      return view->nodes.take();
    });
  }

  // Names and labels are all the watch reads: the API sends Nodes as PartialObjectMetadata
  // (as client-go's metadata informers ask). Returns the list's version.
  core::result<std::string> list_all() {
    const auto began = std::chrono::steady_clock::now();
    std::string version;
    kube::list_options o;
    o.accept = kube::metadata_list_accept;
    o.page_size = kube::node_list_page;
    o.page_timeout = std::chrono::seconds(30);
    simdjson::dom::parser p;
    auto r = kube::list_raw_pages(
        client_, "/api/v1/nodes", o, [&](const std::string& body) -> core::result<std::string> {
          simdjson::dom::element doc;
          std::string_view rv;
          if (p.parse(body).get(doc) || doc["metadata"]["resourceVersion"].get(rv))
            return core::fail(core::errc::unavailable, "malformed response");
          version = std::string(rv);
          simdjson::dom::array items;
          if (!doc["items"].get(items)) {
            // The list being built is the watch thread's alone: no lock until it becomes the
            // view.
            for (auto item : items) view_->nodes.add_listed(item);
          }
          std::string_view next;
          return doc["metadata"]["continue"].get(next) ? std::string() : std::string(next);
        });
    if (!r) {
      view_->nodes.discard_list();
      return std::move(r).error();
    }
    std::size_t count = 0;
    {
      std::lock_guard lk(view_->mu);
      view_->nodes.finish_list();
      count = view_->nodes.size();
    }
    // Each list is logged: after the first, a relist (the watch's version expired, or the
    // watch failed) re-reads every Node, and a stream of them points at the API server. The
    // line comes before the list is handed over, so whoever sees the list can find its line.
    const bool again = lists_++ > 0;
    if (log_) {
      const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::steady_clock::now() - began)
                          .count();
      log_("info", std::string(again ? "Node watch: listed again " : "Node watch: listed ") +
                       std::to_string(count) + " Nodes in " + std::to_string(ms) + " ms");
    }
    publish();
    return version;
  }

  void run() {
    kube::reflector r;
    r.path = "/api/v1/nodes";
    r.watch_accept = kube::metadata_watch_accept;
    // Under a stream of events the watch is read at most once per coalescing window: the
    // events that arrive meanwhile cost one wake-up and one recv together. A change that
    // matters is applied at the end of a window anyway, so reading a stream more often than
    // windows close buys nothing but wake-ups (at 20 selection flips a second, a 50 ms pace
    // cost a flip about twice the CPU). A change in a stream is applied at most one window
    // later than it would be read at once; events further apart than a window (no stream) are
    // read as they come.
    r.read_pace = node_coalesce;
    r.list = [&] { return list_all(); };
    r.on_event = [&](std::string_view type, simdjson::dom::element obj) {
      bool changed = false;
      {
        std::lock_guard lk(view_->mu);
        changed = view_->nodes.apply(type, obj);
      }
      if (changed) publish();
    };
    r.on_failure = [&](const core::error& e) {
      if (log_) log_("warn", e.message);
    };
    kube::reflect(client_, r, stop_);
  }

  kube::client client_;
  log_fn log_;
  std::function<void(list_source)> on_change_;
  std::shared_ptr<shared_view> view_;
  std::uint64_t lists_ = 0;  // the lists made (the watch thread's)
  kube::stop_signal stop_;
  std::thread thread_;
};

}  // namespace

}  // namespace detail

kube::api_access api_access(const store_config& cfg) {
  return {cfg.kube_api_server, cfg.kube_token_file, cfg.kube_ca_file};
}

core::result<std::unique_ptr<revision_store>> make_kube_store(const store_config& cfg, log_fn log) {
  auto ep = kube::resolve_endpoint(api_access(cfg));
  if (!ep) return std::move(ep).error();
  if (cfg.kube_namespace.empty()) {
    return core::fail(core::errc::invalid_argument,
                      "store.namespace is required for the kubernetes store");
  }
  auto s = std::make_unique<detail::kube_store>(std::move(*ep), cfg.kube_namespace);
  s->set_log(std::move(log));
  return std::unique_ptr<revision_store>(std::move(s));
}

core::result<std::unique_ptr<node_watch>> make_node_watch(const store_config& cfg, log_fn log) {
  auto ep = kube::resolve_endpoint(api_access(cfg));
  if (!ep) return std::move(ep).error();
  return std::unique_ptr<node_watch>(
      std::make_unique<detail::api_node_watch>(std::move(*ep), std::move(log)));
}

registry_deps make_dependencies(const store_config& cfg, bool watch_nodes, const log_fn& log) {
  registry_deps d;
  if (cfg.type == store_config::kind::kubernetes) {
    if (auto s = make_kube_store(cfg, log)) {
      d.store = std::move(*s);
    } else {
      d.store_error = std::move(s).error().message;
    }
  } else {
    d = make_file_dependencies(cfg);
  }
  if (watch_nodes) {
    if (auto w = make_node_watch(cfg, log)) {
      d.nodes = std::move(*w);
    } else {
      d.nodes_error = std::move(w).error().message;
    }
  }
  return d;
}

}  // namespace topogate::inventory
