// Go's net/url.Parse, reduced to what T9 needs (parse_url): the URLs it accepts, and the error
// messages of the Go consumer.

#include <array>
#include <cstring>
#include <string>
#include <string_view>

#include "syntax.hpp"
#include "syntax_internal.hpp"

namespace topogate::core {

// ---------------------------------------------------------------------------------------
// net/url.Parse

namespace {

using detail::go_quote;
using detail::is_alnum;

constexpr bool is_digit(char c) noexcept { return c >= '0' && c <= '9'; }

// s.rfind(c), with a forward memchr first: most hosts hold no '[', '@' or ':', and
// string_view's rfind walks back byte by byte.
std::size_t last_of(std::string_view s, char c) noexcept {
  if (s.empty() || std::memchr(s.data(), c, s.size()) == nullptr) return std::string_view::npos;
  return s.rfind(c);
}

constexpr bool is_hex(char c) noexcept {
  return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
constexpr unsigned hex_value(char c) noexcept {
  if (is_digit(c)) return static_cast<unsigned>(c - '0');
  if (c >= 'a' && c <= 'f') return static_cast<unsigned>(c - 'a' + 10);
  return static_cast<unsigned>(c - 'A' + 10);
}

// Characters net/url leaves unescaped in a host (RFC 3986 reg-name, plus ':' for the
// port, '[' ']' for IP literals and '<' '>' '"', which Go tolerates there).
constexpr bool host_char_ok(char c) noexcept {
  if (is_alnum(c)) return true;
  switch (c) {
    case '-':
    case '_':
    case '.':
    case '~':
    case '!':
    case '$':
    case '&':
    case '\'':
    case '(':
    case ')':
    case '*':
    case '+':
    case ',':
    case ';':
    case '=':
    case ':':
    case '[':
    case ']':
    case '<':
    case '>':
    case '"':
      return true;
    default:
      return false;
  }
}

// Bytes a host holds as they are: what host_char_ok allows, and every non-ASCII byte.
constexpr std::array<bool, 256> host_plain = [] {
  std::array<bool, 256> t{};
  for (int c = 0; c < 256; ++c)
    t[static_cast<std::size_t>(c)] = c >= 0x80 || (c != '%' && host_char_ok(static_cast<char>(c)));
  return t;
}();

enum class escape_mode { path, host, zone, user_password, fragment };

// Go's unescape(): every '%' needs two hex digits; in a host a %-escape may only encode a
// non-ASCII byte (or be "%25"), and raw ASCII that a host may not contain is rejected.
result<void> unescape(std::string_view s, escape_mode mode, std::string& out) {
  // Most URLs have no escape and nothing a host may not hold: checked, then copied at once.
  const bool host_like = mode == escape_mode::host || mode == escape_mode::zone;
  bool plain = false;
  if (!host_like) {
    plain = s.find('%') == std::string_view::npos;
  } else {
    std::size_t i = 0;
    while (i < s.size() && host_plain[static_cast<unsigned char>(s[i])]) ++i;
    plain = i == s.size();
  }
  if (plain) {
    out.assign(s.data(), s.size());
    return {};
  }
  out.clear();
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size();) {
    const char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size() || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) {
        return fail(errc::invalid_argument, "invalid URL escape " + go_quote(s.substr(i, 3)));
      }
      const auto v = static_cast<unsigned char>(hex_value(s[i + 1]) << 4 | hex_value(s[i + 2]));
      const bool is_pct25 = s.substr(i, 3) == "%25";
      if (mode == escape_mode::host && hex_value(s[i + 1]) < 8 && !is_pct25) {
        return fail(errc::invalid_argument, "invalid URL escape " + go_quote(s.substr(i, 3)));
      }
      if (mode == escape_mode::zone && !is_pct25 && v != ' ' &&
          !host_char_ok(static_cast<char>(v))) {
        return fail(errc::invalid_argument, "invalid URL escape " + go_quote(s.substr(i, 3)));
      }
      out.push_back(static_cast<char>(v));
      i += 3;
      continue;
    }
    if ((mode == escape_mode::host || mode == escape_mode::zone) &&
        static_cast<unsigned char>(c) < 0x80 && !host_char_ok(c)) {
      return fail(errc::invalid_argument,
                  "invalid character " + go_quote(s.substr(i, 1)) + " in host name");
    }
    out.push_back(c);
    ++i;
  }
  return {};
}

// ":" followed by digits, or nothing.
bool valid_optional_port(std::string_view port) noexcept {
  if (port.empty()) return true;
  if (port[0] != ':') return false;
  for (char c : port.substr(1)) {
    if (!is_digit(c)) return false;
  }
  return true;
}

// netip.ParseAddr's dotted quad: four decimal octets, no leading zeros.
bool parse_ipv4_fields(std::string_view s) noexcept {
  int val = 0;
  int fields = 0;
  int digits = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (is_digit(c)) {
      if (digits == 1 && val == 0) return false;
      val = val * 10 + (c - '0');
      ++digits;
      if (val > 255) return false;
    } else if (c == '.') {
      if (i == 0 || i == s.size() - 1 || s[i - 1] == '.') return false;
      if (fields == 3) return false;
      ++fields;
      val = 0;
      digits = 0;
    } else {
      return false;
    }
  }
  return fields == 3;
}

// netip.ParseAddr restricted to what may sit inside brackets: an IPv6 address (optionally
// with a non-empty zone); IPv4 or anything else is refused.
bool is_bracketable_ipv6(std::string_view in) noexcept {
  for (char c : in) {
    if (c == '.' || c == '%') return false;  // IPv4 (Is4 is refused) or a zone with no address
    if (c == ':') break;
  }
  if (in.find(':') == std::string_view::npos) return false;
  std::string_view s = in;
  if (const std::size_t pct = s.find('%'); pct != std::string_view::npos) {
    if (pct + 1 == s.size()) return false;  // zone must be non-empty
    s = s.substr(0, pct);
  }
  int groups = 0;  // 16-bit groups parsed (Go counts bytes; same thing, halved)
  bool ellipsis = false;
  if (s.size() >= 2 && s[0] == ':' && s[1] == ':') {
    ellipsis = true;
    s.remove_prefix(2);
    if (s.empty()) return true;
  }
  while (groups < 8) {
    std::size_t off = 0;
    unsigned acc = 0;
    for (; off < s.size() && is_hex(s[off]); ++off) {
      if (off > 3) return false;
      acc = (acc << 4) + hex_value(s[off]);
    }
    if (off == 0) return false;
    if (off < s.size() && s[off] == '.') {
      // A trailing dotted quad replaces the last two groups.
      if (!ellipsis && groups != 6) return false;
      if (groups + 2 > 8) return false;
      if (!parse_ipv4_fields(s)) return false;
      s = {};
      groups += 2;
      break;
    }
    ++groups;
    s.remove_prefix(off);
    if (s.empty()) break;
    if (s[0] != ':' || s.size() == 1) return false;
    s.remove_prefix(1);
    if (s[0] == ':') {
      if (ellipsis) return false;
      ellipsis = true;
      s.remove_prefix(1);
      if (s.empty()) break;
    }
  }
  if (!s.empty()) return false;
  if (groups < 8) return ellipsis;
  return !ellipsis;  // "::" must stand for at least one group
}

// Go's parseHost: host[:port] or [ipv6]:port, then the host-mode unescape.
result<void> parse_host(std::string_view scheme_lower, std::string_view host, std::string& out) {
  const std::size_t open = last_of(host, '[');
  if (open != std::string_view::npos && open > 0)
    return fail(errc::invalid_argument, "invalid IP-literal");
  if (open == 0) {
    const std::size_t close = host.rfind(']');
    if (close == std::string_view::npos) return fail(errc::invalid_argument, "missing ']' in host");
    const std::string_view colon_port = host.substr(close + 1);
    if (!valid_optional_port(colon_port)) {
      return fail(errc::invalid_argument, "invalid port " + go_quote(colon_port) + " after host");
    }
    const std::string_view hostname = host.substr(1, close - 1);
    std::string unescaped;
    const std::size_t zone = hostname.find("%25");
    if (zone != std::string_view::npos) {
      std::string host_part;
      std::string zone_part;
      if (auto r = unescape(hostname.substr(0, zone), escape_mode::host, host_part); !r) return r;
      if (auto r = unescape(hostname.substr(zone), escape_mode::zone, zone_part); !r) return r;
      unescaped = host_part + zone_part;
    } else if (auto r = unescape(hostname, escape_mode::host, unescaped); !r) {
      return r;
    }
    if (!is_bracketable_ipv6(unescaped))
      return fail(errc::invalid_argument, "invalid host: " + go_quote(unescaped));
    out = "[" + unescaped + "]" + std::string(colon_port);
    return {};
  }
  if (const std::size_t first = host.find(':'); first != std::string_view::npos) {
    std::size_t i = first;
    // Go refuses extra colons in http(s) hosts; other schemes keep the last one as the port.
    if (scheme_lower != "http" && scheme_lower != "https") i = host.rfind(':');
    const std::string_view colon_port = host.substr(i);
    if (!valid_optional_port(colon_port)) {
      return fail(errc::invalid_argument, "invalid port " + go_quote(colon_port) + " after host");
    }
  }
  return unescape(host, escape_mode::host, out);
}

// RFC 3986 userinfo characters (Go also tolerates '@' inside it).
bool valid_userinfo(std::string_view s) noexcept {
  for (char c : s) {
    if (is_alnum(c)) continue;
    switch (c) {
      case '-':
      case '.':
      case '_':
      case ':':
      case '~':
      case '!':
      case '$':
      case '&':
      case '\'':
      case '(':
      case ')':
      case '*':
      case '+':
      case ',':
      case ';':
      case '=':
      case '%':
      case '@':
        continue;
      default:
        return false;
    }
  }
  return true;
}

std::string to_lower_ascii(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace

result<parsed_url> parse_url(std::string_view raw) {
  parsed_url url;
  const std::size_t hash = raw.find('#');
  std::string_view u = raw.substr(0, hash);
  const std::string_view frag =
      hash == std::string_view::npos ? std::string_view{} : raw.substr(hash + 1);

  for (char c : u) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f)
      return fail(errc::invalid_argument, "net/url: invalid control character in URL");
  }
  if (u == "*") {
    url.path = "*";
  } else {
    // Scheme: [a-zA-Z][a-zA-Z0-9+.-]* followed by ':'.
    std::string_view rest = u;
    for (std::size_t i = 0; i < u.size(); ++i) {
      const char c = u[i];
      if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) continue;
      if (is_digit(c) || c == '+' || c == '-' || c == '.') {
        if (i == 0) break;
        continue;
      }
      if (c == ':') {
        if (i == 0) return fail(errc::invalid_argument, "missing protocol scheme");
        url.scheme = std::string(u.substr(0, i));
        rest = u.substr(i + 1);
      }
      break;
    }
    const std::string scheme_lower = to_lower_ascii(url.scheme);

    const std::size_t q = rest.find('?');
    if (q != std::string_view::npos) {
      url.raw_query = std::string(rest.substr(q + 1));
      rest = rest.substr(0, q);
    }

    bool opaque = false;
    if (rest.empty() || rest[0] != '/') {
      if (!url.scheme.empty()) {
        opaque = true;  // "https:host/path": a rootless, opaque URL with no host
      } else {
        const std::string_view segment = rest.substr(0, rest.find('/'));
        if (segment.find(':') != std::string_view::npos) {
          return fail(errc::invalid_argument, "first path segment in URL cannot contain colon");
        }
      }
    }
    if (!opaque) {
      if ((!url.scheme.empty() || rest.substr(0, 3) != "///") && rest.substr(0, 2) == "//") {
        std::string_view authority = rest.substr(2);
        rest = {};
        if (const std::size_t slash = authority.find('/'); slash != std::string_view::npos) {
          rest = authority.substr(slash);
          authority = authority.substr(0, slash);
        }
        const std::size_t at = last_of(authority, '@');
        std::string host;
        if (auto r = parse_host(scheme_lower,
                                at == std::string_view::npos ? authority : authority.substr(at + 1),
                                host);
            !r) {
          return std::move(r).error();
        }
        if (at != std::string_view::npos) {
          const std::string_view userinfo = authority.substr(0, at);
          if (!valid_userinfo(userinfo))
            return fail(errc::invalid_argument, "net/url: invalid userinfo");
          std::string scratch;
          const std::size_t colon = userinfo.find(':');
          if (auto r = unescape(userinfo.substr(0, colon), escape_mode::user_password, scratch);
              !r) {
            return std::move(r).error();
          }
          if (colon != std::string_view::npos) {
            if (auto r = unescape(userinfo.substr(colon + 1), escape_mode::user_password, scratch);
                !r) {
              return std::move(r).error();
            }
          }
          url.has_user_info = true;
        }
        // Hostname()/Port(): a trailing ":digits" is the port; brackets are dropped.
        std::string_view h = host;
        if (const std::size_t colon = last_of(h, ':');
            colon != std::string_view::npos && valid_optional_port(h.substr(colon))) {
          url.port = std::string(h.substr(colon + 1));
          h = h.substr(0, colon);
        }
        if (h.size() >= 2 && h.front() == '[' && h.back() == ']') h = h.substr(1, h.size() - 2);
        if (h.size() == host.size())
          url.host = std::move(host);
        else
          url.host = std::string(h);
      }
      if (auto r = unescape(rest, escape_mode::path, url.path); !r) return std::move(r).error();
    }
  }
  if (!frag.empty()) {
    if (auto r = unescape(frag, escape_mode::fragment, url.fragment); !r)
      return std::move(r).error();
  }
  return url;
}

}  // namespace topogate::core
