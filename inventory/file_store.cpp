#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <system_error>

#include "inventory/file_watch.hpp"
#include "inventory/store.hpp"
#include "util/file.hpp"

namespace topogate::inventory {
namespace detail {

std::string sha256_hex(std::string_view bytes) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md, &len, EVP_sha256(), nullptr) != 1) return {};
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    out.push_back(hex[md[i] >> 4]);
    out.push_back(hex[md[i] & 0x0f]);
  }
  return out;
}

std::optional<int> version_order(std::string_view a, std::string_view b) {
  const auto integer = [](std::string_view v) {
    return !v.empty() && v.front() != '0' &&
           std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!integer(a) || !integer(b)) return std::nullopt;
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

namespace {

// Inventory names come from the configuration; anything outside a conservative set is
// escaped so a name can never leave the store directory.
std::string file_name(const std::string& inventory) {
  std::string out;
  for (const char c : inventory) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '-' || c == '_' || (c == '.' && !out.empty());
    if (plain) {
      out.push_back(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
      out += buf;
    }
  }
  return out + ".snapshot";
}

std::string escape_actor(std::string_view a) {
  std::string out;
  for (const char c : a) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7f || c == '%') {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", u);
      out += buf;
    } else {
      out.push_back(c);
    }
  }
  return out.empty() ? "-" : out;
}

std::string unescape_actor(std::string_view a) {
  if (a == "-") return {};
  std::string out;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i] == '%' && i + 2 < a.size()) {
      unsigned v = 0;
      std::from_chars(a.data() + i + 1, a.data() + i + 3, v, 16);
      out.push_back(static_cast<char>(v));
      i += 2;
    } else {
      out.push_back(a[i]);
    }
  }
  return out;
}

// Format: one header line, then the canonical JSON.
//   topogate-store 1 <acceptedAt unix ns> <sha256 of the JSON> <actor, %-escaped or ->
// The digest catches a file damaged outside topogate; rename makes torn writes impossible.
constexpr std::string_view magic = "topogate-store 1 ";

class file_store final : public revision_store {
 public:
  explicit file_store(std::string dir) : dir_(std::move(dir)) {}

  [[nodiscard]] std::string describe() const override { return "file:" + dir_; }

  // A read blocks only where the disk does; the deadline is the caller's to enforce (the
  // lane answers the waiting push; this returns when the disk does).
  core::result<void> load(const std::string& inventory, store_state& state,
                          store_deadline /*deadline*/) override {
    state = {};
    auto& out = state.rev;
    const auto path = dir_ + "/" + file_name(inventory);
    auto r = read_stable(path, 4u << 20);
    if (!r.ok) {
      if (::access(path.c_str(), F_OK) != 0 && errno == ENOENT) return {};
      return core::fail(core::errc::unavailable, r.error);
    }
    std::string_view all = r.bytes;
    const auto nl = all.find('\n');
    if (!all.starts_with(magic) || nl == std::string_view::npos) {
      out = stored_revision{};
      state.damaged = true;
      return core::fail(core::errc::damaged, path + ": not a topogate store file");
    }
    std::string_view header = all.substr(magic.size(), nl - magic.size());
    const std::string_view body = all.substr(nl + 1);
    const auto sp1 = header.find(' ');
    const auto sp2 = sp1 == std::string_view::npos ? sp1 : header.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) {
      out = stored_revision{};
      state.damaged = true;
      return core::fail(core::errc::damaged, path + ": bad header");
    }
    long long ns = 0;
    std::from_chars(header.data(), header.data() + sp1, ns);
    const auto digest = header.substr(sp1 + 1, sp2 - sp1 - 1);
    if (digest != sha256_hex(body)) {
      out = stored_revision{};
      state.damaged = true;
      return core::fail(core::errc::damaged, path + ": digest mismatch (file damaged)");
    }
    stored_revision rev;
    rev.json.assign(body);
    rev.accepted_at = std::chrono::system_clock::time_point(
        std::chrono::duration_cast<std::chrono::system_clock::duration>(
            std::chrono::nanoseconds(ns)));
    rev.actor = unescape_actor(header.substr(sp2 + 1));
    rev.version.assign(digest);
    state.as_of = rev.version;
    out = std::move(rev);
    return {};
  }

  core::result<std::string> save(const std::string& inventory, const stored_revision& rev,
                                 const std::string& /*expected_version*/,
                                 store_deadline deadline) override {
    const auto final_path = dir_ + "/" + file_name(inventory);
    const auto tmp_path = dir_ + "/." + file_name(inventory) + ".tmp-" +
                          std::to_string(::getpid()) + "-" + std::to_string(counter_.fetch_add(1));
    const auto digest = sha256_hex(rev.json);
    std::string data(magic);
    data += std::to_string(
        std::chrono::duration_cast<std::chrono::nanoseconds>(rev.accepted_at.time_since_epoch())
            .count());
    data += ' ';
    data += digest;
    data += ' ';
    data += escape_actor(rev.actor);
    data += '\n';
    data += rev.json;

    // The rename is the commit point: a write that took past its deadline (a disk that
    // stalled in fsync) is abandoned before it, so a push answered 503 is not stored.
    util::atomic_write_options options;
    options.mode = 0600;
    options.temp_path = tmp_path;
    options.deadline = deadline;
    if (auto w = util::write_file_atomic(final_path, data, options); !w) {
      return core::fail(core::errc::unavailable, std::move(w.error().message));
    }
    return digest;
  }

  // Leftovers of writes interrupted by a crash; never acknowledged, never loaded.
  void clean_temporaries() const {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) return;
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.starts_with(".") && n.find(".snapshot.tmp-") != std::string::npos) {
        ::unlink((dir_ + "/" + n).c_str());
      }
    }
    ::closedir(d);
  }

 private:
  std::string dir_;
  std::atomic<std::uint64_t> counter_{0};
};

}  // namespace

}  // namespace detail

core::result<std::unique_ptr<revision_store>> make_file_store(const std::string& directory) {
  if (directory.empty()) {
    return core::fail(core::errc::invalid_argument,
                      "store.directory is required for the file store");
  }
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    return core::fail(core::errc::io,
                      "create store directory " + directory + ": " + core::errno_text(errno));
  }
  struct stat st {};
  if (::stat(directory.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return core::fail(core::errc::invalid_argument,
                      "store directory " + directory + " is not a directory");
  }
  if (::access(directory.c_str(), W_OK) != 0) {
    return core::fail(core::errc::io, "store directory " + directory +
                                          " is not writable: " + core::errno_text(errno));
  }
  auto s = std::make_unique<detail::file_store>(directory);
  s->clean_temporaries();
  return std::unique_ptr<revision_store>(std::move(s));
}

}  // namespace topogate::inventory
