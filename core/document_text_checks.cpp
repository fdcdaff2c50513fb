// yaml.v3's rules on the text itself, which yaml-cpp or simdjson do not enforce: line numbers
// as yaml.v3 counts them (a lone CR ends a line), the escapes and the end of quoted scalars,
// JSON read as YAML (the `\/` escape, escaped surrogates, a key's distance to its `:`), and
// directives and the region before the first token.

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "document_internal.hpp"

namespace topogate::core::detail {
namespace {

// A CR not followed by LF: a line break to yaml.v3, as LF and CR LF are.
bool lone_cr_at(std::string_view text, std::size_t i) noexcept {
  return text[i] == '\r' && (i + 1 == text.size() || text[i + 1] != '\n');
}

}  // namespace

// yaml.v3's line number (1-based) of the byte at `offset`: LF, CR LF and a lone CR each end
// a line.
std::size_t line_of(std::string_view text, std::size_t offset) {
  std::size_t line = 1;
  for (std::size_t i = 0; i < std::min(offset, text.size()); ++i)
    if (text[i] == '\n' || lone_cr_at(text, i)) ++line;
  return line;
}

// `text` with every lone CR turned into LF, in `out`; false (and `out` untouched) when it
// has none.
bool lone_crs_as_lf(std::string_view text, std::string& out) {
  for (std::size_t i = text.find('\r'); i != std::string_view::npos; i = text.find('\r', i + 1)) {
    if (!lone_cr_at(text, i)) continue;
    out.assign(text);
    for (std::size_t j = i; j < out.size(); ++j)
      if (lone_cr_at(out, j)) out[j] = '\n';
    return true;
  }
  return false;
}

std::string at_line(std::size_t line, std::string_view msg) {
  std::string out = "line " + std::to_string(line) + ": ";
  out += msg;
  return out;
}

// Checks the escapes of one double-quoted scalar starting at `open` (the quote). yaml.v3
// knows 0 a b t TAB n v f r e SPACE " ' \ N _ L P x u U and escaped line breaks; `\/` (JSON)
// is unknown to it, and \x \u \U may not name a surrogate or pass U+10FFFF.
std::string check_double_quoted(std::string_view text, std::size_t open) {
  std::size_t i = open + 1;
  while (i < text.size()) {
    const char c = text[i];
    if (c == '"') return {};
    if (c != '\\') {
      ++i;
      continue;
    }
    if (i + 1 >= text.size()) break;
    const char e = text[i + 1];
    int digits = 0;
    switch (e) {
      case '0':
      case 'a':
      case 'b':
      case 't':
      case '\t':
      case 'n':
      case 'v':
      case 'f':
      case 'r':
      case 'e':
      case ' ':
      case '"':
      case '\'':
      case '\\':
      case 'N':
      case '_':
      case 'L':
      case 'P':
      case '\n':
      case '\r':
        i += 2;
        continue;
      case 'x':
        digits = 2;
        break;
      case 'u':
        digits = 4;
        break;
      case 'U':
        digits = 8;
        break;
      default:
        if (static_cast<unsigned char>(e) >= 0x80) {
          // U+0085, U+2028, U+2029 are line breaks for yaml.v3; anything else is unknown.
          const std::string_view rest = text.substr(i + 1, 3);
          if (rest.substr(0, 2) == "\xc2\x85" || rest == "\xe2\x80\xa8" || rest == "\xe2\x80\xa9") {
            i += 1 + (rest[0] == '\xc2' ? 2 : 3);
            continue;
          }
        }
        return at_line(line_of(text, i), "found unknown escape character");
    }
    std::uint32_t cp = 0;
    for (int d = 0; d < digits; ++d) {
      const std::size_t at = i + 2 + static_cast<std::size_t>(d);
      const int v = at < text.size() ? hex_value(text[at]) : -1;
      if (v < 0) return at_line(line_of(text, i), "did not find expected hexdecimal number");
      cp = (cp << 4) | static_cast<std::uint32_t>(v);
    }
    if ((cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
      return at_line(line_of(text, i), "found invalid Unicode character escape code");
    i += 2 + static_cast<std::size_t>(digits);
  }
  // No closing quote: yaml-cpp takes a scalar cut off by the end of the text (after a line
  // break) as it stands; yaml.v3 does not.
  return at_line(line_of(text, text.size()), "found unexpected end of stream");
}

// As check_double_quoted, for a single-quoted scalar (where '' is a quote): only its end.
std::string check_single_quoted(std::string_view text, std::size_t open) {
  for (std::size_t i = open + 1; i < text.size(); ++i) {
    if (text[i] != '\'') continue;
    if (i + 1 < text.size() && text[i + 1] == '\'') {
      ++i;
      continue;
    }
    return {};
  }
  return at_line(line_of(text, text.size()), "found unexpected end of stream");
}

std::string check_json_as_yaml(std::string_view text) {
  // Before the first token yaml.v3 is in block context, where a tab cannot start a token.
  for (char c : text) {
    if (c == ' ' || c == '\n' || c == '\r') continue;
    if (c == '\t') return "line 1: found character that cannot start any token";
    break;
  }
  std::size_t i = 0;
  while ((i = text.find('\\', i)) != std::string_view::npos) {
    // In valid JSON a backslash only occurs inside a string; find that string's opening
    // quote is not needed: the escape itself is what yaml.v3 judges.
    if (i + 1 >= text.size()) break;
    const char e = text[i + 1];
    if (e == '/') return at_line(line_of(text, i), "found unknown escape character");
    if (e == 'u') {
      std::uint32_t cp = 0;
      for (std::size_t d = 0; d < 4; ++d) {
        const int v = i + 2 + d < text.size() ? hex_value(text[i + 2 + d]) : -1;
        if (v < 0) return at_line(line_of(text, i), "did not find expected hexdecimal number");
        cp = (cp << 4) | static_cast<std::uint32_t>(v);
      }
      if (cp >= 0xd800 && cp <= 0xdfff)
        return at_line(line_of(text, i), "found invalid Unicode character escape code");
      i += 6;
      continue;
    }
    i += 2;
  }
  return {};
}

bool json_key_fits_yaml(std::string_view text, std::size_t open) {
  std::size_t i = open + 1;
  while (i < text.size() && text[i] != '"') i += text[i] == '\\' ? 2 : 1;
  ++i;
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
  if (i >= text.size() || text[i] != ':') return false;
  if (i - open <= 1024) return true;
  std::size_t chars = 0;
  for (std::size_t j = open; j < i; ++j)
    if ((static_cast<unsigned char>(text[j]) & 0xc0) != 0x80) ++chars;
  return chars <= 1024;
}

// Directives and the region before the first token, where yaml-cpp is more lenient than
// yaml.v3: only `%YAML 1.1` is accepted (once), a directive must be followed by `---`, and a
// tab cannot start a line there.
std::string check_prologue(std::string_view text) {
  std::size_t i = 0;
  if (text.substr(0, 3) == "\xef\xbb\xbf") i = 3;
  bool yaml_directive = false, any_directive = false;
  std::size_t line = 1;
  while (i < text.size()) {
    std::size_t eol = text.find('\n', i);
    if (eol == std::string_view::npos) eol = text.size();
    std::string_view l = text.substr(i, eol - i);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    const std::size_t first = l.find_first_not_of(" \t");
    if (first != std::string_view::npos &&
        l.substr(0, first).find('\t') != std::string_view::npos && l[first] != '#') {
      return at_line(line, "found character that cannot start any token");
    }
    if (first == std::string_view::npos || l[first] == '#') {
      if (first != std::string_view::npos &&
          l.substr(0, first).find('\t') != std::string_view::npos)
        return at_line(line, "found character that cannot start any token");
      if (first == std::string_view::npos && l.find('\t') != std::string_view::npos)
        return at_line(line, "found character that cannot start any token");
      i = eol + 1;
      ++line;
      continue;
    }
    if (l[0] == '%') {
      any_directive = true;
      if (l.substr(0, 5) == "%YAML" && (l.size() == 5 || l[5] == ' ' || l[5] == '\t')) {
        if (yaml_directive) return at_line(line, "found duplicate %YAML directive");
        yaml_directive = true;
        std::string_view v = l.substr(5);
        const std::size_t b = v.find_first_not_of(" \t");
        v = b == std::string_view::npos ? std::string_view() : v.substr(b);
        const std::size_t e = v.find_first_of(" \t#");
        v = v.substr(0, e);
        if (v != "1.1") return at_line(line, "found incompatible YAML document");
      }
      i = eol + 1;
      ++line;
      continue;
    }
    if (any_directive &&
        !(l.substr(0, 3) == "---" && (l.size() == 3 || l[3] == ' ' || l[3] == '\t'))) {
      return at_line(line, "did not find expected <document start>");
    }
    break;
  }
  return {};
}

}  // namespace topogate::core::detail
