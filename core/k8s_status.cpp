#include "core/k8s_status.hpp"

#include <array>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

namespace topogate::core {

using namespace std::string_view_literals;

namespace {

// Each error_type's cause up to its message's text, in one piece:
// `,{"reason":"<cause type>","message":"[` (without the comma for the first cause, without the
// bracket for an error without a rule id). The cause type is apimachinery's field.ErrorType
// value, which a metav1.StatusCause carries verbatim.
constexpr std::string_view cause_head_open = R"(,{"reason":")";
constexpr std::string_view cause_head_close = R"(","message":"[)";
constexpr std::array<std::string_view, 8> cause_heads = {
    R"(,{"reason":"FieldValueRequired","message":"[)",
    R"(,{"reason":"FieldValueInvalid","message":"[)",
    R"(,{"reason":"FieldValueForbidden","message":"[)",
    R"(,{"reason":"FieldValueDuplicate","message":"[)",
    R"(,{"reason":"FieldValueTooMany","message":"[)",
    R"(,{"reason":"FieldValueNotSupported","message":"[)",
    R"(,{"reason":"FieldValueTooLong","message":"[)",
    R"(,{"reason":"FieldValueNotFound","message":"[)",
};
static_assert(static_cast<std::size_t>(error_type::not_found) + 1 == cause_heads.size());

constexpr std::string_view cause_head(error_type t) noexcept {
  const auto i = static_cast<std::size_t>(t);
  return cause_heads[i < cause_heads.size() ? i : static_cast<std::size_t>(error_type::invalid)];
}

constexpr std::string_view cause_type_in(std::string_view head) noexcept {
  return head.substr(cause_head_open.size(),
                     head.size() - cause_head_open.size() - cause_head_close.size());
}
static_assert(cause_type_in(cause_head(error_type::not_supported)) == "FieldValueNotSupported");

}  // namespace

std::string_view status_cause_type(error_type t) noexcept { return cause_type_in(cause_head(t)); }

namespace {

// A failure Status up to its message's opening quote, with the type meta (a whole document)
// or without (embedded in an AdmissionReview response).
constexpr std::string_view typed_status_head =
    R"({"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":")";
constexpr std::string_view embedded_status_head =
    R"({"metadata":{},"status":"Failure","message":")";

// `"details":{"name":..,"group":..,"kind":..`, left open for the causes.
void open_details(std::string& out, std::string_view name, std::string_view group,
                  std::string_view kind) {
  out += R"("details":{"name":)"sv;
  append_json_string(out, name);
  out += R"(,"group":)"sv;
  append_json_string(out, group);
  out += R"(,"kind":)"sv;
  append_json_string(out, kind);
}

// A cause up to its message's text: `{"reason":"FieldValue...","message":"[RULE] `, after a
// comma unless it is the first. The rule id leads the message so that tooling can match on it.
[[gnu::always_inline]] inline void open_cause(std::string& out, const field_error& e, bool first) {
  const std::string_view head = cause_head(e.type);
  const std::size_t skip = first ? 1 : 0;
  out.append(head.substr(skip, head.size() - skip - (e.rule.empty() ? 1 : 0)));
  if (!e.rule.empty()) {
    append_json_chars(out, e.rule);
    out += "] "sv;
  }
}
constexpr std::string_view cause_field = R"(","field":")";
constexpr std::string_view cause_end = R"("})";

// A cause whose texts are escaped here (apimachinery's ErrorBody() and the field).
void append_cause(std::string& out, const field_error& e, bool first) {
  open_cause(out, e, first);
  e.append_json_body_to(out);
  out += cause_field;
  append_json_chars(out, e.path);
  out += cause_end;
}

void append_causes(std::string& out, const error_list& errors) {
  out += R"(,"causes":[)"sv;
  for (std::size_t i = 0; i < errors.size(); ++i) append_cause(out, errors[i], i == 0);
  out += ']';
}

// Where an error's escaped field and body (the text after "<field>: ") lie in the output, so
// that its cause copies them instead of escaping them again. in_message: false for an error
// whose text repeats an earlier one's (the aggregate leaves it out; its cause escapes anew).
struct escaped_error {
  std::size_t field_at, field_size, body_at, body_size;
  bool in_message;
};

// field.ErrorList.ToAggregate() keeps each error text ("<field>: <body>") once. Whether the
// text just written for errors[i] repeats one kept before it: escaped texts are compared, and
// the raw texts confirm a match (escaping maps every invalid UTF-8 byte to one replacement).
// A denial usually holds a few errors, compared pairwise; past that, by a hash of the text.
class repeat_finder {
 public:
  explicit repeat_finder(std::size_t count) {
    if (count > pairwise_up_to) kept_.emplace();
  }
  // Whether repeats() must be asked about a text of `size` bytes: always once texts are
  // hashed; otherwise only when a text of that size modulo 64 was seen (most texts are new
  // by their size alone, and then cost a bit test).
  bool may_repeat(std::size_t size) noexcept {
    const std::uint64_t bit = std::uint64_t{1} << (size % 64);
    const bool seen = (sizes_seen_ & bit) != 0;
    sizes_seen_ |= bit;
    return seen || kept_.has_value();
  }

  bool repeats(const std::string& out, const error_list& errors, const escaped_error* pieces,
               std::size_t i) {
    const escaped_error& p = pieces[i];
    const std::size_t size = text_size(p);
    const auto same = [&](std::size_t j) {
      const escaped_error& q = pieces[j];
      return text_size(q) == size &&
             std::memcmp(out.data() + q.field_at, out.data() + p.field_at, size) == 0 &&
             errors[j].to_string() == errors[i].to_string();
    };
    if (!kept_) {
      for (std::size_t j = 0; j < i; ++j)
        if (pieces[j].in_message && same(j)) return true;
      return false;
    }
    const std::size_t h =
        std::hash<std::string_view>{}(std::string_view(out.data() + p.field_at, size));
    const auto [first, last] = kept_->equal_range(h);
    for (auto it = first; it != last; ++it)
      if (same(it->second)) return true;
    kept_->emplace(h, i);
    return false;
  }

 private:
  static constexpr std::size_t pairwise_up_to = 16;
  static std::size_t text_size(const escaped_error& p) {
    return p.body_at + p.body_size - p.field_at;
  }
  std::uint64_t sizes_seen_ = 0;
  // Past pairwise_up_to errors: text hash -> index of the error kept with that text.
  std::optional<std::unordered_multimap<std::size_t, std::size_t>> kept_;
};

}  // namespace

std::string failure_status(int code, std::string_view reason, std::string_view message,
                           const status_details* details) {
  std::string out(typed_status_head);
  append_json_chars(out, message);
  out += R"(","reason":)"sv;
  append_json_string(out, reason);
  if (details != nullptr) {
    out += ',';
    open_details(out, details->name, details->group, details->kind);
    if (details->causes != nullptr) append_causes(out, *details->causes);
    out += '}';
  }
  out += R"(,"code":)"sv;
  out += std::to_string(code);
  out += '}';
  return out;
}

void append_invalid_status(std::string& out, std::string_view group, std::string_view kind,
                           std::string_view name, const error_list& errors, bool with_type_meta) {
  // apierrors.NewInvalid: fmt.Sprintf("%s %q is invalid: %v", GroupKind.String(), name,
  // errs.ToAggregate()). Each error is escaped once, piece by piece straight into the message
  // (every piece is split off next to an ASCII byte, so the escaped pieces are the escaped
  // text), and each cause copies its escaped texts out of the message.
  out += with_type_meta ? typed_status_head : embedded_status_head;
  // The details repeat the kind, the group and (unless %q changed it) the name: copied from
  // the message too.
  const std::size_t kind_at = out.size();
  append_json_chars(out, kind);
  const std::size_t kind_size = out.size() - kind_at;
  std::size_t group_at = out.size();
  if (!group.empty()) {
    out += '.';
    group_at = out.size();
    append_json_chars(out, group);
  }
  const std::size_t group_size = out.size() - group_at;
  out += ' ';
  const std::size_t name_at = out.size();
  append_json_go_quoted(out, name);
  // Each escape lengthens the text: `\"name\"` four bytes longer holds the name as it is.
  const bool name_as_is = out.size() - name_at == name.size() + 4;
  // No aggregate without errors; a bracketed one for more than one (unless they all say the
  // same: undone below).
  out += errors.empty()       ? " is invalid"sv
         : errors.size() == 1 ? " is invalid: "sv
                              : " is invalid: ["sv;

  // On the stack for the few errors a denial usually holds.
  std::array<escaped_error, 16> few;
  std::vector<escaped_error> many;
  if (errors.size() > few.size()) many.resize(errors.size());
  escaped_error* const pieces = errors.size() > few.size() ? many.data() : few.data();
  if (!errors.empty()) {
    const std::size_t bracket_at = out.size() - 1;
    repeat_finder finder(errors.size());
    std::size_t kept = 0;
    for (std::size_t i = 0; i < errors.size(); ++i) {
      const std::size_t start = out.size();
      if (kept != 0) out += ", "sv;
      escaped_error& p = pieces[i];
      p.field_at = out.size();
      append_json_chars(out, errors[i].path);
      p.field_size = out.size() - p.field_at;
      out += ": "sv;  // plain: nothing to escape
      p.body_at = out.size();
      errors[i].append_json_body_to(out);
      p.body_size = out.size() - p.body_at;
      p.in_message =
          !finder.may_repeat(out.size() - p.field_at) || !finder.repeats(out, errors, pieces, i);
      if (p.in_message)
        ++kept;
      else
        out.resize(start);
    }
    if (kept > 1) {
      out += ']';
    } else if (errors.size() > 1) {
      // Every error said the same: one text, which the aggregate does not bracket.
      out.erase(bracket_at, 1);
      for (std::size_t i = 0; i < errors.size(); ++i) {
        pieces[i].field_at -= pieces[i].field_at > bracket_at ? 1 : 0;
        pieces[i].body_at -= pieces[i].body_at > bracket_at ? 1 : 0;
      }
    }
  }

  out += R"(","reason":"Invalid","details":{"name":")"sv;
  if (name_as_is)
    out.append(out, name_at + 2, name.size());
  else
    append_json_chars(out, name);
  out += R"(","group":")"sv;
  out.append(out, group_at, group_size);
  out += R"(","kind":")"sv;
  out.append(out, kind_at, kind_size);
  out += '"';
  if (!errors.empty()) {
    out += R"(,"causes":[)"sv;
    for (std::size_t i = 0; i < errors.size(); ++i) {
      const escaped_error& p = pieces[i];
      if (!p.in_message) {
        append_cause(out, errors[i], i == 0);
        continue;
      }
      open_cause(out, errors[i], i == 0);
      out.append(out, p.body_at, p.body_size);
      out += cause_field;
      out.append(out, p.field_at, p.field_size);
      out += cause_end;
    }
    out += ']';
  }
  out += R"(},"code":422})"sv;
}

}  // namespace topogate::core
