#include "inventory/etag.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>

namespace topogate::inventory {

namespace {

// The gear table: 256 fixed 64-bit values (splitmix64 from seed 0). Part of the ETag's
// definition: changing it changes every ETag.
constexpr std::array<std::uint64_t, 256> gear_table() {
  std::array<std::uint64_t, 256> t{};
  std::uint64_t x = 0;
  for (auto& v : t) {
    x += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    v = z ^ (z >> 31);
  }
  return t;
}
constexpr auto gear = gear_table();
// A chunk ends where the hash's top 10 bits are zero: about every 1 KiB. The hash is shifted
// left once per byte, so bit 63 depends on the last 64 bytes and no earlier one.
constexpr unsigned cut_shift = 64 - 10;
constexpr std::size_t window = 64;
// A group of chunk sums ends after a sum whose first byte is below 4: about every 64 sums.
constexpr unsigned char group_cut = 4;
// The most update() keeps of the bytes it gathered for the next call.
constexpr std::size_t kept_gather_bytes = 256 * 1024;

const EVP_MD* sha256() {
  static const EVP_MD* md = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  return md;
}

struct md_ctx_free {
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
};

bool hash(std::string_view bytes, unsigned char* out) {
  thread_local std::unique_ptr<EVP_MD_CTX, md_ctx_free> ctx(EVP_MD_CTX_new());
  const EVP_MD* md = sha256();
  unsigned int len = 0;
  return md != nullptr && ctx && EVP_DigestInit_ex2(ctx.get(), md, nullptr) == 1 &&
         EVP_DigestUpdate(ctx.get(), bytes.data(), bytes.size()) == 1 &&
         EVP_DigestFinal_ex(ctx.get(), out, &len) == 1 && len == 32;
}

}  // namespace

void body_digest::cut(std::string_view bytes, std::size_t base, std::size_t from, std::size_t to,
                      reuse from_before) {
  // byte(i) is the body's byte i.
  const auto* b = reinterpret_cast<const unsigned char*>(bytes.data());
  const auto byte = [b, base](std::size_t i) { return b[i - base]; };
  std::size_t start = from;
  const auto add = [&](std::size_t end) {
    sum s{};
    ok_ = hash(bytes.substr(start - base, end - start), s.data()) && ok_;
    hashed_ += end - start;
    ends_.push_back(static_cast<std::uint32_t>(end));
    sums_.push_back(s);
    start = end;
  };
  // The rolling hash over bytes [i, stop), cutting where it says. The hash at a byte covers
  // the 64 bytes ending there: it starts 64 bytes early.
  const auto scan = [&](std::size_t i, std::size_t stop) {
    if (i >= stop) return;
    std::uint64_t h = 0;
    const std::size_t warm = i > window ? i - window : 0;
    for (std::size_t j = warm; j < i; ++j) h = (h << 1) + gear[byte(j)];
    scanned_ += stop - warm;
    for (; i < stop; ++i) {
      h = (h << 1) + gear[byte(i)];
      if ((h >> cut_shift) == 0) add(i + 1);
    }
  };
  // A chunk ends after the last byte whatever the hash says there.
  const std::size_t last = to > from ? to - 1 : from;
  std::size_t i = from;
  {
    const auto ends_begin = from_before.ends.begin();
    const auto ends_end = from_before.ends.end();
    for (const known& k : from_before.copied) {
      const std::size_t a = std::max(k.from, i);
      const std::size_t z = std::min(k.to, last);
      if (a >= z) continue;
      scan(i, a);
      // A cut after byte j of [a, z) here is one after byte j + shift there: an end at
      // j + shift + 1.
      const auto old = [&k](std::size_t j) {
        return static_cast<std::size_t>(static_cast<std::ptrdiff_t>(j) + k.shift);
      };
      for (auto e = std::lower_bound(ends_begin, ends_end, old(a) + 1);
           e != ends_end && *e <= old(z); ++e) {
        add(static_cast<std::size_t>(static_cast<std::ptrdiff_t>(*e) - k.shift));
      }
      i = z;
    }
  }
  scan(i, last);
  if (to > start) add(to);
}

void body_digest::finish(const body_digest* before, std::span<const std::int32_t> origin) {
  group_ends_.reserve(sums_.size() / 32 + 2);
  group_sums_.reserve(sums_.size() / 32 + 2);
  // Whether the sums [a, b) are the body before's group that starts at its sum origin[a]:
  // then that group's sum is this one's.
  const auto kept_group = [&](std::size_t a, std::size_t b) -> const sum* {
    if (before == nullptr || origin.size() != sums_.size() || origin[a] < 0) return nullptr;
    const auto c = static_cast<std::size_t>(origin[a]);
    for (std::size_t i = a + 1; i < b; ++i) {
      if (origin[i] != static_cast<std::int32_t>(c + (i - a))) return nullptr;
    }
    const std::size_t c_end = c + (b - a);
    const auto& ends = before->group_ends_;
    const auto k = std::lower_bound(ends.begin(), ends.end(), static_cast<std::uint32_t>(c_end));
    if (k == ends.end() || *k != c_end) return nullptr;
    const std::size_t c_start = k == ends.begin() ? 0 : *(k - 1);
    if (c_start != c) return nullptr;
    return &before->group_sums_[static_cast<std::size_t>(k - ends.begin())];
  };
  for (std::size_t a = 0; a < sums_.size();) {
    std::size_t b = a;
    while (b < sums_.size() && sums_[b][0] >= group_cut) ++b;
    b = std::min(b + 1, sums_.size());  // the sum that ends it, or the last
    sum g{};
    if (const sum* k = kept_group(a, b)) {
      g = *k;
    } else {
      const std::string_view bytes(reinterpret_cast<const char*>(sums_[a].data()),
                                   (b - a) * sizeof(sum));
      ok_ = hash(bytes, g.data()) && ok_;
      group_bytes_hashed_ += bytes.size();
    }
    group_ends_.push_back(static_cast<std::uint32_t>(b));
    group_sums_.push_back(g);
    a = b;
  }
  const std::string_view all(reinterpret_cast<const char*>(group_sums_.data()),
                             group_sums_.size() * sizeof(sum));
  ok_ = hash(all, root_.data()) && ok_;
}

body_digest body_digest::of(std::string_view body) {
  body_digest d;
  d.ends_.reserve(body.size() / 512 + 2);
  d.sums_.reserve(body.size() / 512 + 2);
  d.cut(body, 0, 0, body.size());
  d.finish(nullptr, {});
  return d;
}

body_digest body_digest::update(const body_digest& before, std::string_view body,
                                std::span<const kept> runs) {
  return update_with(before, body.size(), runs,
                     [body](body_digest& d, std::size_t from, std::size_t to, reuse r) {
                       d.cut(body, 0, from, to, r);
                     });
}

body_digest body_digest::update(const body_digest& before, const core::shared_text& body,
                                std::span<const kept> runs) {
  // The gathered bytes, kept between calls: a few KiB each time, not an allocation each (an
  // update that gathered much, say the whole body, does not keep that much).
  thread_local std::string bytes;
  auto out = update_with(before, body.size(), runs,
                         [&body](body_digest& d, std::size_t from, std::size_t to, reuse r) {
                           const std::size_t base = from > window ? from - window : 0;
                           bytes.clear();
                           body.copy_to(bytes, base, to - base);
                           d.cut(bytes, base, from, to, r);
                         });
  if (bytes.capacity() > kept_gather_bytes) std::string().swap(bytes);
  return out;
}

template <class Cut>
body_digest body_digest::update_with(const body_digest& before, std::size_t size,
                                     std::span<const kept> runs, Cut&& cut) {
  body_digest d;
  d.ends_.reserve(before.ends_.size() + 8);
  d.sums_.reserve(before.ends_.size() + 8);
  // Where the rolling hash need not be computed: the bytes of each run from its 64th on,
  // whose hash is the one the body before had there (not that body's last byte, which ends
  // it whatever the hash). In the body's order; none if the runs are not in it.
  std::vector<known> copied;
  copied.reserve(runs.size());
  // For each of the new body's sums, the index of the body before's it was kept from (-1: hashed
  // anew): a group of sums kept whole keeps its group sum.
  std::vector<std::int32_t> origin;
  origin.reserve(before.ends_.size() + 8);
  for (std::size_t prev_end = 0; const kept& k : runs) {
    const std::size_t len = k.to - k.from;
    if (k.at < prev_end) {
      copied.clear();
      break;
    }
    prev_end = k.at + len;
    const std::size_t to = k.at + len - (k.to == before.size() ? 1 : 0);
    if (k.at + window - 1 < to)
      copied.push_back({k.at + window - 1, to,
                        static_cast<std::ptrdiff_t>(k.from) - static_cast<std::ptrdiff_t>(k.at)});
  }
  // The body before's ends but its last (the end of that body, not a cut).
  const std::span<const std::uint32_t> before_ends =
      before.ends_.empty()
          ? std::span<const std::uint32_t>()
          : std::span<const std::uint32_t>(before.ends_).first(before.ends_.size() - 1);
  std::size_t next_copied = 0;
  // Cuts the new body's [from, to), given the copied bytes within it.
  const auto cut_new = [&](std::size_t from, std::size_t to) {
    while (next_copied < copied.size() && copied[next_copied].to <= from) ++next_copied;
    std::size_t end = next_copied;
    while (end < copied.size() && copied[end].from < to) ++end;
    cut(d, from, to,
        {before_ends, std::span<const known>(copied).subspan(next_copied, end - next_copied)});
    origin.resize(d.sums_.size(), -1);  // hashed anew
  };
  std::size_t done = 0;  // the new body is cut up to here
  std::size_t r = 0;
  std::size_t start = 0;  // where the old chunk starts
  for (std::size_t j = 0; j < before.ends_.size(); start = before.ends_[j], ++j) {
    const std::size_t end = before.ends_[j];
    // A chunk keeps its sum when its bytes and the 64 before them (what decides where it
    // starts and that it has no end inside) were copied as one run; one that starts within
    // 64 bytes of the body's start, only when nothing came before it in either body.
    const std::size_t reach = start > window ? start - window : 0;
    while (r < runs.size() && runs[r].to < end) ++r;
    if (r == runs.size()) break;
    const kept& k = runs[r];
    if (k.from > reach || end > k.to) continue;
    if (start < window && (k.from != 0 || k.at != 0)) continue;
    const std::size_t at = start - k.from + k.at;
    const std::size_t at_end = end - k.from + k.at;
    // The old body's last chunk ends with the body, not by the hash: the same in the new
    // body only when that ends there too.
    if (j + 1 == before.ends_.size() && at_end != size) continue;
    if (at_end > size || at < done) continue;  // runs out of order: cut anew
    if (at > done) cut_new(done, at);
    d.ends_.push_back(static_cast<std::uint32_t>(at_end));
    d.sums_.push_back(before.sums_[j]);
    origin.push_back(static_cast<std::int32_t>(j));
    done = at_end;
  }
  if (done < size) cut_new(done, size);
  d.ok_ = d.ok_ && before.ok_;
  d.finish(&before, origin);
  return d;
}

std::string body_digest::etag() const {
  if (!ok_) return "\"unavailable\"";
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 + 2 * root_.size());
  out.push_back('"');
  for (const unsigned char c : root_) {
    out.push_back(hex[c >> 4]);
    out.push_back(hex[c & 0x0f]);
  }
  out.push_back('"');
  return out;
}

}  // namespace topogate::inventory
