#include "json_fields.hpp"

#include "wick/error.hpp"

namespace wick::llm::detail {

void json_type_error(const std::string& context, const std::string& name, const nlohmann::json& found,
                     const char* expected) {
  // The file's own text for the value (strings keep their quotes), cut short: an object can be long.
  constexpr size_t kShown = 40;
  std::string shown = found.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (shown.size() > kShown) {
    size_t cut = kShown;
    while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8 characters
    shown = shown.substr(0, cut) + "...";
  }
  const std::string type = found.type_name();
  const char* article = found.is_object() || found.is_array() ? "an " : "a ";
  throw Error(ErrorKind::Io,
              context + ": \"" + name + "\" is " + article + type + " (" + shown + "); expected " + expected);
}

const nlohmann::json* json_object_field(const nlohmann::json& obj, const char* key, const std::string& context,
                                        const std::string& prefix) {
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  if (!it->is_object()) json_type_error(context, prefix + key, *it, "an object");
  return &*it;
}

}  // namespace wick::llm::detail
