#pragma once
// Typed reads of the members of a parsed JSON object (config.json, tokenizer.json). nlohmann's value()
// and get<>() say only "type must be boolean, but is string"; these name the key, what it holds and
// what it should hold.
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

namespace wick::llm::detail {

// Throws Error(Io) `<context>: "<name>" is a string ("yes"); expected a boolean`; the value shown is
// cut to a few dozen bytes.
[[noreturn]] void json_type_error(const std::string& context, const std::string& name, const nlohmann::json& found,
                                  const char* expected);

// obj[key] as T (bool, std::string or double), or nullopt where absent or null (HF writes null for
// "unset"); any other type is a json_type_error naming prefix + key.
template <class T>
std::optional<T> json_field(const nlohmann::json& obj, const char* key, const std::string& context,
                            const std::string& prefix = "") {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return std::nullopt;
  if constexpr (std::is_same_v<T, bool>) {
    if (it->is_boolean()) return it->template get<bool>();
    json_type_error(context, prefix + key, *it, "a boolean");
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (it->is_string()) return it->template get<std::string>();
    json_type_error(context, prefix + key, *it, "a string");
  } else {
    static_assert(std::is_same_v<T, double>, "json_field reads bool, std::string or double");
    if (it->is_number()) return it->template get<double>();
    json_type_error(context, prefix + key, *it, "a number");
  }
}

// obj[key] as T, or dflt where absent or null.
template <class T>
T json_field_or(const nlohmann::json& obj, const char* key, T dflt, const std::string& context,
                const std::string& prefix = "") {
  return json_field<T>(obj, key, context, prefix).value_or(std::move(dflt));
}

// obj[key] where it is an object, nullptr where absent or null; any other type is a json_type_error.
const nlohmann::json* json_object_field(const nlohmann::json& obj, const char* key, const std::string& context,
                                        const std::string& prefix = "");

}  // namespace wick::llm::detail
