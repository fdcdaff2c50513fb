#pragma once
// Decoding a stream of similar JSON objects (an AdmissionReview's request.object, review after
// review) into one tree that the caller's json_decoder keeps from one document to the next.
// The tree's strings and vectors keep their capacity, so that a document shaped like the
// previous one costs no allocation; and the object can be built during the caller's own parse
// of the document around it (the envelope), so that one parse serves both.
//
// These decoders report no errors. True means "decode_json accepts this object without any
// error, and reused_tree() is exactly the tree it builds"; false says nothing about the text
// (and leaves the tree unspecified): the caller then asks decode_json for the verdict.

#include <simdjson.h>

#include <string_view>

#include "document.hpp"

namespace topogate::core {

// Parses `text` (the envelope) with the decoder's second On Demand parser, over a padded
// copy in a buffer of its own. `copy` views that copy (views read from `doc` point into it);
// they stay valid while the decoder is used by the functions below and by decode_json, until
// the next iterate_envelope with it.
[[nodiscard]] simdjson::error_code iterate_envelope(json_decoder& decoder, std::string_view text,
                                                    simdjson::ondemand::document& doc,
                                                    std::string_view& copy);

// The JSON object `text` (white space may surround it) decoded into the decoder's tree, over
// whatever the previous document left there.
[[nodiscard]] bool decode_object_reusing(json_decoder& decoder, std::string_view text,
                                         const decode_limits& limits = {});

// The same for an object open in the caller's On Demand document (iterate_envelope's, or one
// of its own), built as it is read. `rest` starts at the object's `{` and runs to the end of
// the input. True is not enough: the caller then finds the object's text (to the next token,
// as raw_json() would have: the document's current_location() once the object is read) and
// checks it with json_text_acceptable; the tree is decode_json's tree of that text only when
// both succeed.
[[nodiscard]] bool build_object_reusing(json_decoder& decoder, simdjson::ondemand::object& obj,
                                        std::string_view rest, const decode_limits& limits = {});

// decode_json's checks of the text itself, which come before any parsing: its size, and
// yaml.v3's character and escape rules.
[[nodiscard]] bool json_text_acceptable(std::string_view text, const decode_limits& limits = {});

// The tree the last successful decode_object_reusing or build_object_reusing built. It views
// nothing, and stays valid until the next reusing decode or release_reused_tree with the
// decoder.
[[nodiscard]] const doc_node& reused_tree(const json_decoder& decoder) noexcept;

// Frees the tree and the capacity it kept (after an unusually large document, so that a
// decoder kept for a long time does not hold on to it).
void release_reused_tree(json_decoder& decoder) noexcept;

}  // namespace topogate::core
