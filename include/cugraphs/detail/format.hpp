// The message formatting cugraphs needs, without a dependency: "{}" placeholders, the
// count checked against the arguments at compile time, each argument written as text
// (strings, numbers, bools, pointers in hex). Users never see it: it only words Errors.
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace cugraphs::detail {

// How many "{}" `text` holds ("{{" and "}}" are literal braces); -1 when a brace is unpaired.
[[nodiscard]] constexpr int count_placeholders(std::string_view text) noexcept {
  int n = 0;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    if (c == '{' && next == '{') {
      ++i;
    } else if (c == '{' && next == '}') {
      ++n;
      ++i;
    } else if (c == '}' && next == '}') {
      ++i;
    } else if (c == '{' || c == '}') {
      return -1;
    }
  }
  return n;
}

// Not constexpr: reached while checking a format string, it makes the check fail to
// compile, and the compiler's message names it.
inline void the_message_placeholders_do_not_match_its_arguments() noexcept {}

// A format string whose placeholders match `Args`, checked where it is written.
template <class... Args>
struct FormatString {
  std::string_view text;
  template <class S>
    requires std::convertible_to<const S&, std::string_view>
  consteval FormatString(const S& s) : text(s) {  // NOLINT: implicit, as fmt's format_string
    if (count_placeholders(text) != static_cast<int>(sizeof...(Args)))
      the_message_placeholders_do_not_match_its_arguments();  // a compile error
  }
};
template <class... Args>
using format_string = FormatString<std::type_identity_t<Args>...>;

template <class T>
void append_value(std::string& out, const T& v) {
  using U = std::remove_cvref_t<T>;
  if constexpr (std::is_same_v<U, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_same_v<U, char>) {
    out += v;
  } else if constexpr (std::is_convertible_v<const T&, std::string_view>) {
    out += std::string_view(v);
  } else if constexpr (std::is_enum_v<U>) {
    append_value(out, static_cast<std::underlying_type_t<U>>(v));
  } else if constexpr (std::is_arithmetic_v<U>) {
    char buffer[64];
    const auto r = std::to_chars(buffer, buffer + sizeof buffer, v);
    // (pointer, count), not an iterator pair: g++ 12 at -O3 reports a false -Wrestrict
    // overlap in the iterator form's replace() path.
    out.append(buffer, static_cast<std::size_t>(r.ptr - buffer));
  } else if constexpr (std::is_pointer_v<U> || std::is_null_pointer_v<U>) {
    char buffer[2 + 2 * sizeof(std::uintptr_t)];
    const auto r = std::to_chars(buffer, buffer + sizeof buffer, reinterpret_cast<std::uintptr_t>(v), 16);
    out += "0x";
    out.append(buffer, static_cast<std::size_t>(r.ptr - buffer));
  } else {
    static_assert(std::is_arithmetic_v<U>, "cugraphs: detail::format cannot write this type");
  }
}

// Appends `f` with its placeholders replaced by `args`, in order.
template <class... Args>
void format_to(std::string& out, format_string<Args...> f, const Args&... args) {
  const std::string_view text = f.text;
  std::size_t i = 0;
  auto literal_until_placeholder = [&] {
    while (i < text.size()) {
      const char c = text[i];
      if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
        out += c;
        i += 2;
      } else if (c == '{') {
        i += 2;  // "{}": checked when the format string was made
        return;
      } else {
        out += c;
        ++i;
      }
    }
  };
  ((literal_until_placeholder(), append_value(out, args)), ...);
  literal_until_placeholder();
}

// The message `f` words with `args`. An object, not a function template: calls with an
// argument from namespace std (a std::string_view, say) would otherwise also find std::format
// by argument-dependent lookup wherever <format> is visible (libstdc++ 13's <chrono> includes
// it), and be ambiguous.
struct Format {
  template <class... Args>
  [[nodiscard]] std::string operator()(format_string<Args...> f, const Args&... args) const {
    std::string out;
    out.reserve(f.text.size() + 16 * sizeof...(Args));
    detail::format_to(out, f, args...);
    return out;
  }
};
inline constexpr Format format{};

}  // namespace cugraphs::detail
