// Internal to the loader: typed, error-collecting reads from yaml-cpp nodes.
//
// Every read either returns a value or records an error at the node's
// position and returns nullopt; the caller keeps its default and carries on,
// so one pass finds every problem in the file.
#pragma once

#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "policy/loader.h"

namespace conduit::policy::detail {

class ErrorSink {
 public:
  // text: the document, for positions yaml-cpp does not keep (empty_item_mark()).
  explicit ErrorSink(std::string_view file, std::string_view text = {})
      : file_(file), text_(text) {}
  void add(const YAML::Mark& mark, std::string message);
  std::vector<PolicyError> take();
  bool empty() const { return errors_.empty(); }

  // Where an empty list item sits. yaml-cpp places "- " with nothing after it
  // at the next token (the next item's '-', or the key after the list, lines
  // further down); this finds its own '-'. at: the item's mark; list: the
  // list's. An explicit null (~) keeps its mark; so does an empty entry of a
  // flow list ("[1, , 3]": the ',' that ends it). list when neither is found.
  YAML::Mark empty_item_mark(const YAML::Mark& at, const YAML::Mark& list) const;

 private:
  std::string_view line(size_t n) const;

  std::string file_;
  std::string_view text_;
  mutable std::vector<size_t> line_starts_;  // of text_, filled on first use
  std::vector<PolicyError> errors_;
  bool truncated_ = false;
};

// "a mapping", "a sequence", "a scalar", "nothing (null)".
std::string describe(const YAML::Node& node);

// A value with where it sits: its key path ("traffic_classes[1].dscp") and the
// position to report (the key's position when the value is empty, because
// yaml-cpp places an empty value at the start of the next line).
struct Field {
  YAML::Node node;
  YAML::Mark mark;
  std::string path;
};

// One YAML mapping: hands out values by key and, in finish(), reports every
// key nobody asked for, with the closest known key as a suggestion.
class MapReader {
 public:
  // A null node reads as an empty mapping (a section with all lines
  // commented out); any other non-mapping is reported.
  MapReader(ErrorSink& sink, const Field& f);
  MapReader(const MapReader&) = delete;
  MapReader& operator=(const MapReader&) = delete;

  bool is_map() const { return is_map_; }
  const YAML::Mark& mark() const { return mark_; }
  // "daemon.lcores"; key itself at top level.
  std::string child(std::string_view key) const;
  // The value for key, marking key known whether or not it is present.
  std::optional<Field> take(std::string_view key);
  // Reports unknown keys. Call once, after every take().
  void finish();

 private:
  struct Entry {
    std::string key;
    YAML::Node key_node;
    YAML::Node value;
    bool used = false;
  };
  ErrorSink& sink_;
  std::string path_;
  YAML::Mark mark_;
  bool is_map_ = false;
  std::vector<Entry> entries_;
  std::vector<std::string_view> known_;
};

// Value readers. Ranges are inclusive.
std::optional<std::string> read_string(ErrorSink& sink, const Field& f);
std::optional<uint64_t> read_uint(ErrorSink& sink, const Field& f, uint64_t min, uint64_t max);
std::optional<bool> read_bool(ErrorSink& sink, const Field& f);
std::optional<uint64_t> read_rate_bps(ErrorSink& sink, const Field& f, uint64_t min, uint64_t max);
std::optional<uint64_t> read_duration_ns(ErrorSink& sink, const Field& f, uint64_t min,
                                         uint64_t max);
std::optional<uint64_t> read_size_bytes(ErrorSink& sink, const Field& f, uint64_t min,
                                        uint64_t max);

template <typename E>
using EnumNames = std::vector<std::pair<std::string_view, E>>;

std::optional<size_t> read_choice(ErrorSink& sink, const Field& f,
                                  const std::vector<std::string_view>& names);

template <typename E>
std::optional<E> read_enum(ErrorSink& sink, const Field& f, const EnumNames<E>& table) {
  std::vector<std::string_view> names;
  for (const auto& [name, value] : table) names.push_back(name);
  auto index = read_choice(sink, f, names);
  if (!index) return std::nullopt;
  return table[*index].second;
}

// Sequence elements, or a single scalar read as a one-element list
// ("lcores: 2"); an empty value is an empty list; a mapping is reported.
std::optional<std::vector<Field>> read_list(ErrorSink& sink, const Field& f);

}  // namespace conduit::policy::detail
