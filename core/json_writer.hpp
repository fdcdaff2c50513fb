#pragma once
// The project's JSON writer: strings escaped so that the consumer's YAML decoder and
// apimachinery's messages read them as the consumer writes them. Every JSON body topogate
// writes (field errors, Status objects, snapshots, reports) goes through these.

#include <string>
#include <string_view>

namespace topogate::core {

// JSON string literal with YAML-safe escaping (control and non-printable characters
// as \uXXXX), used by every JSON writer in the project.
void append_json_string(std::string& out, std::string_view s);
// The same without the quotes: the escaped characters alone. Escaping is per character and
// never joins an ASCII byte to its neighbours, so the pieces of a text split next to an ASCII
// byte escape to the pieces of the escaped text.
void append_json_chars(std::string& out, std::string_view s);
// Go's %q of s (strconv.Quote, as apimachinery quotes a string value and a resource name in
// its messages), escaped as append_json_chars escapes it, without JSON quotes around it.
void append_json_go_quoted(std::string& out, std::string_view s);

// Go's %q of s (strconv.Quote) as plain text, without JSON escaping: how apimachinery quotes
// a value in a field error's message.
void append_go_quoted(std::string& out, std::string_view s);

}  // namespace topogate::core
