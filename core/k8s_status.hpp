#pragma once
// The Kubernetes metav1.Status of a failure, written the way apimachinery writes it: the one
// place that knows its JSON shape, for the AdmissionReview denial (admission/), the HTTP error
// bodies and the inventory's push outcomes (server/). Pure: strings in, JSON out.
//
// Keys are written in the order of Go's encoding/json over metav1.Status; "details" keeps its
// name, group and kind even when empty (a decoder reads an absent and an empty string alike).
// Text is escaped as append_json_string escapes it (YAML-safe).

#include <string>
#include <string_view>

#include "core/field_error.hpp"

namespace topogate::core {

// apimachinery's field.ErrorType, which a metav1.StatusCause carries verbatim as its reason
// ("FieldValueRequired", "FieldValueNotSupported", ...).
[[nodiscard]] std::string_view status_cause_type(error_type t) noexcept;

struct status_details {
  std::string_view name;
  std::string_view group;
  std::string_view kind;
  const error_list* causes = nullptr;  // null: no "causes" key
};

// A failure metav1.Status as a whole JSON document:
// {"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":...,"reason":...,
//  "details":{"name":..,"group":..,"kind":..,"causes":[...]},"code":N}
// ("details" only when details != nullptr; each cause as append_invalid_status writes it).
[[nodiscard]] std::string failure_status(int code, std::string_view reason,
                                         std::string_view message,
                                         const status_details* details = nullptr);

// apierrors.NewInvalid(schema.GroupKind{group, kind}, name, errors) as JSON, appended to `out`.
// The message is `<Kind>.<group> "<name>" is invalid: <aggregate>` (`<Kind> "<name>"` when the
// group is empty; the name quoted as Go's %q quotes it), the aggregate being
// field.ErrorList.ToAggregate()'s text: each distinct error text ("<field>: <ErrorBody()>")
// once, in order, joined with ", " and bracketed only when more than one remains.
// With no errors the message is `<Kind>.<group> "<name>" is invalid` and "causes" is left out,
// as apimachinery (whose causes are `omitempty`) does. Reason "Invalid", code 422, details
// {name, group, kind, causes}; each cause, one per error (duplicates included):
//   {"reason":"FieldValue...","message":"[RULE] <error text without its field>","field":"<path>"}
// ("[RULE] " left out when the rule is empty).
// with_type_meta: true writes "kind":"Status","apiVersion":"v1" first (a whole HTTP body);
// false writes the form embedded in an AdmissionReview response ({"metadata":{},...}).
void append_invalid_status(std::string& out, std::string_view group, std::string_view kind,
                           std::string_view name, const error_list& errors, bool with_type_meta);

}  // namespace topogate::core
