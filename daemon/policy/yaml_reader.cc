#include "policy/yaml_reader.h"

#include <algorithm>
#include <cctype>

#include "policy/quote.h"
#include "policy/suggest.h"
#include "policy/units.h"

namespace conduit::policy::detail {
namespace {

std::string join_names(const std::vector<std::string_view>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i != 0) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

// The scalar text of f, or an error naming what was expected instead.
std::optional<std::string> scalar(ErrorSink& sink, const Field& f, std::string_view expected) {
  if (!f.node.IsScalar()) {
    sink.add(f.mark, f.path + ": expected " + std::string(expected) + ", got " + describe(f.node));
    return std::nullopt;
  }
  return f.node.Scalar();
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isdigit(static_cast<unsigned char>(c)) != 0;
  });
}

std::string range_text(uint64_t min, uint64_t max, std::string (*format)(uint64_t)) {
  return format(min) + ".." + format(max);
}

std::string plain(uint64_t v) { return std::to_string(v); }

// Well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool is_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
    unsigned char c = byte(i);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1Fu) : len == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (size_t k = 1; k < len; ++k) {
      if ((byte(i + k) & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (byte(i + k) & 0x3Fu);
    }
    static constexpr uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

using UnitParser = std::optional<uint64_t> (*)(std::string_view, std::string*);

std::optional<uint64_t> read_quantity(ErrorSink& sink, const Field& f, uint64_t min, uint64_t max,
                                      std::string_view what, UnitParser parse,
                                      std::string (*format)(uint64_t)) {
  auto text = scalar(sink, f, what);
  if (!text) return std::nullopt;
  std::string error;
  auto value = parse(*text, &error);
  if (!value) {
    sink.add(f.mark, f.path + ": " + error);
    return std::nullopt;
  }
  if (*value < min || *value > max) {
    sink.add(f.mark,
             f.path + ": " + quote(*text) + " is out of range " + range_text(min, max, format));
    return std::nullopt;
  }
  return value;
}

}  // namespace

void ErrorSink::add(const YAML::Mark& mark, std::string message) {
  if (errors_.size() >= kMaxErrors) {
    truncated_ = true;
    return;
  }
  PolicyError e;
  e.file = file_;
  if (!mark.is_null() && mark.line >= 0 && mark.column >= 0) {
    e.line = static_cast<uint32_t>(mark.line) + 1;
    e.column = static_cast<uint32_t>(mark.column) + 1;
  }
  e.message = std::move(message);
  errors_.push_back(std::move(e));
}

std::string_view ErrorSink::line(size_t n) const {
  if (line_starts_.empty()) {
    // yaml-cpp counts lines at '\n' only, and columns of the first line after a UTF-8 BOM.
    line_starts_.push_back(text_.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0);
    for (size_t i = 0; i < text_.size(); ++i) {
      if (text_[i] == '\n') line_starts_.push_back(i + 1);
    }
  }
  if (n >= line_starts_.size()) return {};
  const size_t start = std::min(line_starts_[n], text_.size());
  const size_t end = n + 1 < line_starts_.size() ? line_starts_[n + 1] - 1 : text_.size();
  return text_.substr(start, end - start);
}

YAML::Mark ErrorSink::empty_item_mark(const YAML::Mark& at, const YAML::Mark& list) const {
  // UTF-16 and UTF-32 files reach yaml-cpp converted: their lines are not text_'s.
  const bool wide =
      text_.size() >= 2 && (text_.substr(0, 2) == "\xFE\xFF" || text_.substr(0, 2) == "\xFF\xFE" ||
                            text_[0] == '\0' || text_[1] == '\0');
  if (wide || at.is_null() || at.line < 0 || at.column < 0 || list.line < 0) return list;
  const auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  std::string_view here = line(static_cast<size_t>(at.line));
  here.remove_prefix(std::min(here.size(), static_cast<size_t>(at.column)));
  if (!here.empty() &&
      (here.front() == '~' || here.front() == '!' || here.front() == '&' || here.front() == '*' ||
       here.substr(0, 4) == "null" || here.substr(0, 4) == "Null" || here.substr(0, 4) == "NULL")) {
    return at;  // written out: ~, null, !!null '', an alias
  }
  // At the end of a file without a final line end, yaml-cpp's mark has column 0 of
  // the last line, before the '-': the whole line is before it.
  const size_t bom = line_starts_.front();
  const bool at_end = at.pos >= 0 && static_cast<size_t>(at.pos) + bom >= text_.size();
  // Back from the mark over blanks, line ends and comments to the item's '-'.
  for (int n = at.line; n >= list.line; --n) {
    std::string_view s = line(static_cast<size_t>(n));
    if (n == at.line && !at_end) {
      s = s.substr(0, std::min(s.size(), static_cast<size_t>(at.column)));
    }
    for (size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '#' && (i == 0 || blank(s[i - 1]))) {
        s = s.substr(0, i);
        break;
      }
    }
    while (!s.empty() && blank(s.back())) s.remove_suffix(1);
    if (s.empty()) continue;
    if (s.back() == '-' && (s.size() == 1 || blank(s[s.size() - 2]))) {
      YAML::Mark m;
      m.line = n;
      m.column = static_cast<int>(s.size() - 1);
      m.pos = static_cast<int>(line_starts_[static_cast<size_t>(n)] + s.size() - 1);
      return m;
    }
    if (s.back() == ',' || s.back() == '[') return at;  // a flow list's empty entry
    break;
  }
  return list;
}

std::vector<PolicyError> ErrorSink::take() {
  std::stable_sort(errors_.begin(), errors_.end(), [](const auto& a, const auto& b) {
    return std::pair(a.line, a.column) < std::pair(b.line, b.column);
  });
  if (truncated_) {
    PolicyError e;
    e.file = file_;
    e.message = "too many errors; stopped after " + std::to_string(kMaxErrors);
    errors_.push_back(std::move(e));
    truncated_ = false;
  }
  return std::move(errors_);
}

std::string describe(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map:
      return "a mapping";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Scalar:
      return "the value " + quote(node.Scalar());
    case YAML::NodeType::Null:
    case YAML::NodeType::Undefined:
      break;
  }
  return "nothing";
}

MapReader::MapReader(ErrorSink& sink, const Field& f) : sink_(sink), path_(f.path), mark_(f.mark) {
  if (f.node.IsNull()) {
    is_map_ = true;
    return;
  }
  if (!f.node.IsMap()) {
    sink_.add(mark_, (path_.empty() ? std::string("policy") : path_) +
                         ": expected a mapping of keys, got " + describe(f.node));
    return;
  }
  is_map_ = true;
  for (auto it = f.node.begin(); it != f.node.end(); ++it) {
    // Copies: the iterator hands out a temporary proxy.
    const YAML::Node key = it->first;
    if (!key.IsScalar()) {
      sink_.add(key.Mark(), (path_.empty() ? std::string() : path_ + ": ") +
                                "keys must be plain names, got " + describe(key));
      continue;
    }
    auto dup = std::find_if(entries_.begin(), entries_.end(),
                            [&](const Entry& e) { return e.key == key.Scalar(); });
    if (dup != entries_.end()) {
      // printable(): the key may hold control bytes; an error stays one line.
      sink_.add(key.Mark(), child(printable(key.Scalar())) + ": duplicate key (first set on line " +
                                std::to_string(dup->key_node.Mark().line + 1) + ")");
      continue;
    }
    entries_.push_back({key.Scalar(), key, it->second, false});
  }
}

std::string MapReader::child(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

std::optional<Field> MapReader::take(std::string_view key) {
  known_.push_back(key);
  for (auto& e : entries_) {
    if (e.key == key) {
      e.used = true;
      YAML::Mark mark = e.value.IsNull() ? e.key_node.Mark() : e.value.Mark();
      return Field{e.value, mark, child(key)};
    }
  }
  return std::nullopt;
}

void MapReader::finish() {
  for (const auto& e : entries_) {
    if (e.used) continue;
    const std::string prefix = path_.empty() ? std::string() : path_ + ": ";
    if (e.key == "<<") {
      // A merge key ("<<: *defaults") reads as an ordinary key to yaml-cpp 0.7.
      sink_.add(e.key_node.Mark(), prefix +
                                       "'<<' is a YAML merge key, which this YAML parser does "
                                       "not expand; write the keys out");
      continue;
    }
    std::string msg = prefix + "unknown key " + quote(e.key);
    if (auto s = did_you_mean(e.key, known_)) {
      msg += "; did you mean '" + *s + "'?";
    } else if (!known_.empty()) {
      msg += " (known keys: " + join_names(known_) + ")";
    }
    sink_.add(e.key_node.Mark(), std::move(msg));
  }
}

std::optional<std::string> read_string(ErrorSink& sink, const Field& f) {
  auto text = scalar(sink, f, "a string");
  if (!text) return std::nullopt;
  // Strings end up in argv, file names and logs: no control bytes, and
  // UTF-8 so the dump can write them back unchanged.
  bool control = std::any_of(text->begin(), text->end(), [](char c) {
    auto u = static_cast<unsigned char>(c);
    return u < 0x20 || u == 0x7F;
  });
  if (control) {
    sink.add(f.mark, f.path + ": contains a control character: " + quote(*text));
    return std::nullopt;
  }
  if (!is_utf8(*text)) {
    sink.add(f.mark, f.path + ": is not valid UTF-8: " + quote(*text));
    return std::nullopt;
  }
  return text;
}

namespace {

// digits in base (2, 8, 10 or 16); nullopt if one is not a digit of it or the value
// does not fit 64 bits.
std::optional<uint64_t> digits_value(std::string_view digits, unsigned base) {
  if (digits.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : digits) {
    const auto u = static_cast<unsigned char>(c);
    unsigned d = 0;
    if (std::isdigit(u) != 0) {
      d = static_cast<unsigned>(u - '0');
    } else if (std::isxdigit(u) != 0) {
      d = static_cast<unsigned>(std::tolower(u) - 'a' + 10);
    } else {
      return std::nullopt;
    }
    if (d >= base || __builtin_mul_overflow(value, uint64_t{base}, &value) ||
        __builtin_add_overflow(value, uint64_t{d}, &value)) {
      return std::nullopt;
    }
  }
  return value;
}

}  // namespace

std::optional<uint64_t> read_uint(ErrorSink& sink, const Field& f, uint64_t min, uint64_t max) {
  auto text = scalar(sink, f, "an integer");
  if (!text) return std::nullopt;
  std::string_view digits = *text;
  bool negative = !digits.empty() && digits.front() == '-';
  if (negative) digits.remove_prefix(1);
  if (!negative && digits.size() > 2 && digits[0] == '0') {
    // YAML 1.2 reads 0x1A and 0o32 as integers, YAML 1.1 0x1A and 0b11010: one spelling
    // of a number is enough, and decimal is the one every tool reads alike.
    const char prefix = static_cast<char>(std::tolower(static_cast<unsigned char>(digits[1])));
    const unsigned base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : prefix == 'b' ? 2 : 0;
    if (base != 0) {
      if (auto value = digits_value(digits.substr(2), base)) {
        sink.add(f.mark, f.path + ": " + quote(*text) + " is " +
                             (base == 16  ? "hexadecimal"
                              : base == 8 ? "octal"
                                          : "binary") +
                             "; write the decimal number (" + std::to_string(*value) + ")");
        return std::nullopt;
      }
    }
  }
  if (!all_digits(digits)) {
    sink.add(f.mark, f.path + ": expected an integer, got " + quote(*text));
    return std::nullopt;
  }
  if (digits.size() > 1 && digits[0] == '0') {
    // YAML 1.1 (PyYAML, Ansible) reads 026 as octal 22, YAML 1.2 as decimal 26.
    const auto octal = digits_value(digits, 8);
    const auto decimal = digits_value(digits, 10);
    std::string msg = f.path + ": " + quote(*text) + " has a leading zero";
    if (!negative && octal && decimal && *octal != *decimal) {
      msg += ", which YAML 1.1 tools read as octal (" + std::to_string(*octal) +
             ") and YAML 1.2 as decimal (" + std::to_string(*decimal) + ")";
    }
    sink.add(f.mark, msg + "; write the decimal number without leading zeros");
    return std::nullopt;
  }
  uint64_t value = 0;
  bool overflow = false;
  for (char c : digits) {
    if (__builtin_mul_overflow(value, 10, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(c - '0'), &value)) {
      overflow = true;
    }
  }
  bool is_zero = value == 0 && !overflow;
  if ((negative && !is_zero) || overflow || value < min || value > max) {
    sink.add(f.mark, f.path + ": " + *text + " is out of range " + range_text(min, max, plain));
    return std::nullopt;
  }
  return value;
}

std::optional<bool> read_bool(ErrorSink& sink, const Field& f) {
  auto text = scalar(sink, f, "true or false");
  if (!text) return std::nullopt;
  const std::string& t = *text;
  // YAML 1.2's core schema, exactly; 0/1 too, because that is how the mlx5 sysfs
  // files spell the clamp knobs.
  if (t == "true" || t == "True" || t == "TRUE" || t == "1") return true;
  if (t == "false" || t == "False" || t == "FALSE" || t == "0") return false;
  std::string lower;
  for (char c : t) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::string_view kYaml11[] = {"y",  "Y",   "yes", "Yes", "YES", "n",
                                                 "N",  "no",  "No",  "NO",  "on",  "On",
                                                 "ON", "off", "Off", "OFF"};
  if (lower == "true" || lower == "false") {
    sink.add(f.mark, f.path + ": " + quote(t) + " is not a boolean spelling; write " + lower +
                         ", " + static_cast<char>(std::toupper(lower[0])) + lower.substr(1) +
                         " or " + (lower == "true" ? "TRUE" : "FALSE"));
  } else if (std::find(std::begin(kYaml11), std::end(kYaml11), t) != std::end(kYaml11)) {
    sink.add(f.mark, f.path + ": " + quote(t) +
                         " is a boolean only to YAML 1.1 tools; write true or false");
  } else {
    sink.add(f.mark, f.path + ": expected true or false, got " + quote(t));
  }
  return std::nullopt;
}

std::optional<uint64_t> read_rate_bps(ErrorSink& sink, const Field& f, uint64_t min, uint64_t max) {
  return read_quantity(sink, f, min, max, "a rate such as 25gbit", parse_rate_bps, format_rate);
}

std::optional<uint64_t> read_duration_ns(ErrorSink& sink, const Field& f, uint64_t min,
                                         uint64_t max) {
  return read_quantity(sink, f, min, max, "a duration such as 300us", parse_duration_ns,
                       format_duration);
}

std::optional<uint64_t> read_size_bytes(ErrorSink& sink, const Field& f, uint64_t min,
                                        uint64_t max) {
  return read_quantity(sink, f, min, max, "a size such as 4KiB", parse_size_bytes, format_size);
}

std::optional<size_t> read_choice(ErrorSink& sink, const Field& f,
                                  const std::vector<std::string_view>& names) {
  auto text = scalar(sink, f, "one of " + join_names(names));
  if (!text) return std::nullopt;
  for (size_t i = 0; i < names.size(); ++i) {
    if (*text == names[i]) return i;
  }
  std::string msg =
      f.path + ": unknown value " + quote(*text) + " (expected " + join_names(names) + ")";
  if (auto s = did_you_mean(*text, names)) msg += "; did you mean '" + *s + "'?";
  sink.add(f.mark, std::move(msg));
  return std::nullopt;
}

std::optional<std::vector<Field>> read_list(ErrorSink& sink, const Field& f) {
  std::vector<Field> out;
  if (f.node.IsNull()) return out;  // every entry commented out
  if (f.node.IsScalar()) {
    out.push_back(f);
    return out;
  }
  if (!f.node.IsSequence()) {
    sink.add(f.mark, f.path + ": expected a list, got " + describe(f.node));
    return std::nullopt;
  }
  size_t i = 0;
  for (auto it = f.node.begin(); it != f.node.end(); ++it, ++i) {
    YAML::Mark mark = it->IsNull() ? sink.empty_item_mark(it->Mark(), f.mark) : it->Mark();
    out.push_back(Field{*it, mark, f.path + "[" + std::to_string(i) + "]"});
  }
  return out;
}

}  // namespace conduit::policy::detail
