// Building a Tokenizer from GGUF tokenizer.ggml.* metadata or from a Hugging Face tokenizer.json.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "json_fields.hpp"
#include "tokenizer_impl.hpp"
#include "wick/error.hpp"
#include "wick/gguf.hpp"

namespace wick::llm {

namespace {

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::Io, "Tokenizer: " + where + ": " + what);
}

// Per-pre-tokenizer decoding/merging flags, as llama.cpp's llama_vocab::impl::load sets them.
void apply_pre_flags(TokenizerData& d) {
  static const std::set<std::string> ignore_merges = {"llama3",
                                                      "llama-v3",
                                                      "llama-bpe",
                                                      "falcon3",
                                                      "falcon-h1",
                                                      "pixtral",
                                                      "midm-2.0",
                                                      "lfm2",
                                                      "tekken",
                                                      "minicpm5",
                                                      "youtu",
                                                      "jina-v5-nano",
                                                      "granite-embed-multi-97m"};
  static const std::set<std::string> add_bos = {"llama3",       "llama-v3", "llama-bpe", "falcon3",
                                                "falcon-h1",    "pixtral",  "midm-2.0",  "lfm2",
                                                "jina-v5-nano", "tekken",   "chameleon"};
  static const std::set<std::string> keep_spaces = {"deepseek-llm", "deepseek-coder",  "deepseek-v3",
                                                    "spark2_5",     "youtu",           "sarvam-moe",
                                                    "command-r",    "qwen2",           "deepseek-r1-qwen",
                                                    "kormo",        "f2llmv2",         "qwen35",
                                                    "poro-chat",    "viking",          "tekken",
                                                    "smollm",       "chameleon",       "gpt-4o",
                                                    "llama4",       "kanana2",         "talkie",
                                                    "tiny_aya",     "cohere2moe",      "superbpe",
                                                    "trillion",     "granite-docling", "bailingmoe",
                                                    "bailingmoe2",  "llada-moe",       "seed-coder",
                                                    "hunyuan",      "hunyuan-dense",   "hy_v4",
                                                    "joyai-llm",    "kimi-k2",         "ufakzeka",
                                                    "grok-2",       "afmoe",           "laguna",
                                                    "minimax-m2",   "solar-open",      "granite-embed-multi-97m"};
  d.ignore_merges = ignore_merges.count(d.pre) != 0;
  d.add_bos = add_bos.count(d.pre) != 0;
  d.clean_spaces = keep_spaces.count(d.pre) == 0;
}

const GGUFValue* find_typed(const GGUFFile& f, const std::string& key, GGUFType type) {
  const GGUFValue* v = f.find(key);
  if (v && v->type != type)
    bad("GGUF key " + key,
        std::string("is ") + gguf_type_name(v->type) + ", expected " + gguf_type_name(type) +
            "; the file was not written by a known converter (re-convert it with llama.cpp's convert_hf_to_gguf.py)");
  return v;
}

// Callers bind the result through a pointer: GCC 13 -Wdangling-reference flags a reference bound to a call
// with temporary arguments, although the array lives in the GGUFFile.
const GGUFArray& array_of(const GGUFFile& f, const std::string& key, std::initializer_list<GGUFType> elem) {
  const GGUFValue* v = find_typed(f, key, GGUFType::Array);
  if (!v) bad("GGUF key " + key, "is missing (needed by this tokenizer model)");
  if (std::find(elem.begin(), elem.end(), v->elem_type) == elem.end())
    bad("GGUF key " + key,
        std::string("is an array of ") + gguf_type_name(v->elem_type) + ", expected " + gguf_type_name(*elem.begin()));
  return v->array;
}

int32_t token_id_key(const GGUFFile& f, const std::string& key, int32_t def, size_t n) {
  const GGUFValue* v = f.find(key);
  if (!v) return def >= 0 && static_cast<size_t>(def) < n ? def : -1;
  int64_t id;
  try {
    id = v->as_i64();
  } catch (const Error&) {
    bad("GGUF key " + key, std::string("is ") + gguf_type_name(v->type) + ", expected an integer token id");
  }
  if (id < 0 || static_cast<uint64_t>(id) >= n)
    bad("GGUF key " + key, "= " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(n) + " tokens)");
  return static_cast<int32_t>(id);
}

bool bool_key(const GGUFFile& f, const std::string& key, bool def) {
  const GGUFValue* v = find_typed(f, key, GGUFType::Bool);
  return v ? v->b : def;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw Error(ErrorKind::Io, "Tokenizer::load: cannot open " + p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

Tokenizer Tokenizer::from_gguf(const GGUFFile& f) {
  auto d = std::make_shared<TokenizerData>();
  const GGUFValue* model = find_typed(f, "tokenizer.ggml.model", GGUFType::String);
  if (!model) bad("GGUF key tokenizer.ggml.model", "is missing: the file holds no tokenizer");
  d->model_kind = model->s;
  if (d->model_kind == "llama") {
    d->kind = TokKind::Spm;
  } else if (d->model_kind == "gpt2") {
    d->kind = TokKind::Bpe;
    d->byte_level = true;
  } else {
    bad("GGUF key tokenizer.ggml.model",
        "= '" + d->model_kind + "' is not supported (supported: 'llama' (SentencePiece), 'gpt2' (byte-level BPE))");
  }
  if (const GGUFValue* pre = find_typed(f, "tokenizer.ggml.pre", GGUFType::String)) d->pre = pre->s;

  const auto* toks_p = &array_of(f, "tokenizer.ggml.tokens", {GGUFType::String});
  const auto& toks = *toks_p;
  const size_t n = toks.size();
  if (n == 0) bad("GGUF key tokenizer.ggml.tokens", "is empty");
  d->tokens.reserve(n);
  for (size_t i = 0; i < n; ++i) d->tokens.emplace_back(toks.string_at(i));

  if (f.find("tokenizer.ggml.scores")) {
    const auto* sc_p = &array_of(f, "tokenizer.ggml.scores", {GGUFType::F32, GGUFType::I32});
    const auto& sc = *sc_p;
    if (sc.size() != n)
      bad("GGUF key tokenizer.ggml.scores",
          "has " + std::to_string(sc.size()) + " entries for " + std::to_string(n) + " tokens");
    d->scores.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      const GGUFValue s = sc[i];
      d->scores.push_back(s.type == GGUFType::F32 ? static_cast<float>(s.f) : static_cast<float>(s.i));
    }
  }
  if (f.find("tokenizer.ggml.token_type")) {
    const auto* tt_p = &array_of(f, "tokenizer.ggml.token_type", {GGUFType::I32});
    const auto& tt = *tt_p;
    if (tt.size() != n)
      bad("GGUF key tokenizer.ggml.token_type",
          "has " + std::to_string(tt.size()) + " entries for " + std::to_string(n) + " tokens");
    d->attrs.reserve(n);
    for (size_t i = 0; i < n; ++i) {
      // GGUF token types: 1 normal, 2 unknown, 3 control, 4 user_defined, 5 unused, 6 byte (0: undefined).
      static const uint32_t map[] = {kAttrUndefined,   kAttrNormal, kAttrUnknown, kAttrControl,
                                     kAttrUserDefined, kAttrUnused, kAttrByte};
      int64_t t = tt[i].i;
      if (t < 0 || t > 6)
        bad("GGUF key tokenizer.ggml.token_type",
            "entry " + std::to_string(i) + " = " + std::to_string(t) + " is not a token type (0..6)");
      d->attrs.push_back(map[t]);
    }
  }

  if (d->kind == TokKind::Spm) {
    d->add_bos = true;
    d->add_space_prefix = true;
    d->bos = token_id_key(f, "tokenizer.ggml.bos_token_id", 1, n);
    d->eos = token_id_key(f, "tokenizer.ggml.eos_token_id", 2, n);
    d->unk = token_id_key(f, "tokenizer.ggml.unknown_token_id", 0, n);
  } else {
    const auto* merges_p = &array_of(f, "tokenizer.ggml.merges", {GGUFType::String});
    const auto& merges = *merges_p;
    d->bpe_ranks.reserve(merges.size());
    for (size_t i = 0; i < merges.size(); ++i) {
      const std::string_view m = merges.string_at(i);
      size_t sp = m.find(' ', 1);  // from 1: a merge's left part may itself be a space
      if (sp == std::string::npos)
        bad("GGUF key tokenizer.ggml.merges",
            "entry " + std::to_string(i) + " '" + std::string(m) + "' is not 'left right'");
      std::string key(m.substr(0, sp));
      key.append(1, '\xff').append(m.substr(sp + 1));
      d->bpe_ranks.emplace(std::move(key), static_cast<int32_t>(i));
    }
    apply_pre_flags(*d);
    d->bos = token_id_key(f, "tokenizer.ggml.bos_token_id", 11, n);
    d->eos = token_id_key(f, "tokenizer.ggml.eos_token_id", 11, n);
    d->unk = token_id_key(f, "tokenizer.ggml.unknown_token_id", -1, n);
    d->pre_tok = PreTokenizer::from_gguf(d->pre == "default" ? "" : d->pre, /*byte_level=*/true);
  }
  d->eot = token_id_key(f, "tokenizer.ggml.eot_token_id", -1, n);
  d->eom = token_id_key(f, "tokenizer.ggml.eom_token_id", -1, n);
  // The padding id plays no part in generation; some converters write one past the vocabulary, so an
  // out-of-range value is dropped rather than refusing the whole model.
  if (const GGUFValue* pad = f.find("tokenizer.ggml.padding_token_id");
      pad && pad->type != GGUFType::Array && pad->type != GGUFType::String) {
    try {
      int64_t id = pad->as_i64();
      d->pad = id >= 0 && static_cast<uint64_t>(id) < n ? static_cast<int32_t>(id) : -1;
    } catch (const Error&) {
      d->pad = -1;
    }
  }
  d->add_bos = bool_key(f, "tokenizer.ggml.add_bos_token", d->add_bos);
  d->add_eos = bool_key(f, "tokenizer.ggml.add_eos_token", d->add_eos);
  d->add_space_prefix = bool_key(f, "tokenizer.ggml.add_space_prefix", d->add_space_prefix);
  if (const GGUFValue* ct = find_typed(f, "tokenizer.chat_template", GGUFType::String)) d->chat_template = ct->s;
  d->finalize();
  return Tokenizer(std::move(d));
}

namespace {

using nlohmann::json;

std::string token_content(const json& v) {  // tokenizer_config's "bos_token": "<s>" or {"content": "<s>", ...}
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return "";
}

// The special tokens HF's post-processor puts around a single sequence: {first, last} (-1: none).
// Recurses through Sequence processors: parse_json_limited bounds the depth.
void template_ends(const json& pp, const TokenizerData& d, int32_t& first, int32_t& last, const std::string& where) {
  if (!pp.is_object()) return;
  const std::string type = detail::json_field_or<std::string>(pp, "type", "", "Tokenizer: " + where, "post_processor.");
  if (type == "Sequence" && pp.contains("processors") && pp["processors"].is_array()) {
    for (const auto& p : pp["processors"]) template_ends(p, d, first, last, where);
  } else if (type == "TemplateProcessing" && pp.contains("single") && pp["single"].is_array() &&
             !pp["single"].empty()) {
    auto special = [&](const json& item) -> int32_t {
      if (!item.is_object() || !item.contains("SpecialToken")) return -1;
      const json& st = item["SpecialToken"];
      return st.is_object() && st.contains("id") && st["id"].is_string() ? d.lookup(st["id"].get<std::string>()) : -1;
    };
    first = special(pp["single"].front());
    last = pp["single"].size() > 1 ? special(pp["single"].back()) : -1;
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    first = d.lookup(pp.contains("cls") && pp["cls"].is_array() && !pp["cls"].empty() && pp["cls"][0].is_string()
                         ? pp["cls"][0].get<std::string>()
                         : "");
    last = d.lookup(pp.contains("sep") && pp["sep"].is_array() && !pp["sep"].empty() && pp["sep"][0].is_string()
                        ? pp["sep"][0].get<std::string>()
                        : "");
  }
}

// Is there a {"type": type} anywhere in j? Walked with an explicit stack: the nesting is the file's to choose.
bool mentions_type(const json& j, const std::string& type) {
  std::vector<const json*> todo{&j};
  while (!todo.empty()) {
    const json& v = *todo.back();
    todo.pop_back();
    if (v.is_object()) {
      if (auto t = v.find("type"); t != v.end() && *t == type) return true;
      for (const auto& e : v) todo.push_back(&e);
    } else if (v.is_array()) {
      for (const auto& e : v) todo.push_back(&e);
    }
  }
  return false;
}

std::shared_ptr<TokenizerData> from_json(const std::filesystem::path& path) {
  const std::string where = path.string();
  const std::string context = "Tokenizer: " + where;  // of the json_field errors
  const json j = parse_json_limited(read_file(path), context);
  if (!j.is_object() || !j.contains("model") || !j["model"].is_object())
    bad(where, "has no \"model\" object (not a tokenizer.json)");
  const json& m = j["model"];
  const std::string type = detail::json_field_or<std::string>(
      m, "type", mentions_type(m, "BPE") || m.contains("merges") ? "BPE" : "", context, "model.");
  if (type != "BPE") bad(where, "model.type '" + type + "' is not supported (supported: BPE)");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && !m[k].is_null() && !(m[k].is_string() && m[k].get<std::string>().empty()))
      bad(where, std::string("model.") + k + " is set; BPE with subword prefixes/suffixes is not supported");
  if (!m.contains("vocab") || !m["vocab"].is_object())
    bad(where, "model.vocab is missing or not an object of token -> id");

  auto d = std::make_shared<TokenizerData>();
  d->kind = TokKind::Bpe;
  d->pre = "tokenizer.json";
  // Collect vocab and added tokens into id order.
  std::vector<std::pair<int64_t, std::string>> entries;
  for (const auto& [tok, id] : m["vocab"].items()) {
    if (!id.is_number_integer()) bad(where, "model.vocab['" + tok + "'] is not an integer id");
    entries.emplace_back(id.get<int64_t>(), tok);
  }
  struct Added {
    int64_t id;
    std::string content;
    bool special, lstrip, rstrip;
  };
  std::vector<Added> added;
  if (j.contains("added_tokens") && !j["added_tokens"].is_null()) {
    if (!j["added_tokens"].is_array()) bad(where, "added_tokens is not an array");
    for (size_t i = 0; i < j["added_tokens"].size(); ++i) {
      const json& a = j["added_tokens"][i];
      if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() || !a.contains("content") ||
          !a["content"].is_string())
        bad(where, "added_tokens[" + std::to_string(i) + "] needs an integer \"id\" and a string \"content\"");
      const std::string at = "added_tokens[" + std::to_string(i) + "].";
      added.push_back({a["id"].get<int64_t>(), a["content"].get<std::string>(),
                       detail::json_field_or(a, "special", false, context, at),
                       detail::json_field_or(a, "lstrip", false, context, at),
                       detail::json_field_or(a, "rstrip", false, context, at)});
    }
  }
  int64_t max_id = -1;
  for (const auto& e : entries) max_id = std::max(max_id, e.first);
  for (const auto& a : added) max_id = std::max(max_id, a.id);
  for (const auto& e : entries)
    if (e.first < 0) bad(where, "model.vocab['" + e.second + "'] has a negative id");
  for (const auto& a : added)
    if (a.id < 0) bad(where, "added token '" + a.content + "' has a negative id");
  // Without a vocabulary every character would be <unk>: no usable tokenizer has one.
  if (entries.empty()) bad(where, "model.vocab is empty (a BPE tokenizer needs its tokens there)");
  if (max_id > 16 * int64_t(entries.size() + added.size()) + 1024)
    bad(where, "token ids go up to " + std::to_string(max_id) + " for " +
                   std::to_string(entries.size() + added.size()) + " tokens");
  const size_t n = static_cast<size_t>(max_id) + 1;
  d->tokens.assign(n, std::string());
  d->attrs.assign(n, kAttrUnused);  // ids no entry names stay unused
  const bool byte_fallback = detail::json_field_or(m, "byte_fallback", false, context, "model.");
  for (const auto& [id, tok] : entries) {
    d->tokens[id] = tok;
    bool is_byte = byte_fallback && tok.size() == 6 && tok.compare(0, 3, "<0x") == 0 && tok[5] == '>';
    d->attrs[id] = is_byte ? kAttrByte : kAttrNormal;
  }
  for (const auto& a : added) {
    d->tokens[a.id] = a.content;
    d->attrs[a.id] =
        (a.special ? kAttrControl : kAttrUserDefined) | (a.lstrip ? kAttrLstrip : 0u) | (a.rstrip ? kAttrRstrip : 0u);
  }
  for (size_t i = 0; i < n; ++i)
    if (d->tokens[i].empty()) d->tokens[i] = "[EMPTY_" + std::to_string(i) + "]";
  // token_to_id is needed below (post-processor, unk); finalize() rebuilds it with the rest.
  for (size_t i = 0; i < n; ++i) d->token_to_id[d->tokens[i]] = static_cast<int32_t>(i);

  if (m.contains("merges") && !m["merges"].is_null()) {
    if (!m["merges"].is_array()) bad(where, "model.merges is not an array");
    const json& ms = m["merges"];
    d->bpe_ranks.reserve(ms.size());
    for (size_t i = 0; i < ms.size(); ++i) {
      std::string l, r;
      if (ms[i].is_string()) {
        const std::string& s = ms[i].get_ref<const std::string&>();
        size_t sp = s.find(' ', 1);
        if (sp == std::string::npos)
          bad(where, "model.merges[" + std::to_string(i) + "] '" + s + "' is not 'left right'");
        l = s.substr(0, sp);
        r = s.substr(sp + 1);
      } else if (ms[i].is_array() && ms[i].size() == 2 && ms[i][0].is_string() && ms[i][1].is_string()) {
        l = ms[i][0].get<std::string>();
        r = ms[i][1].get<std::string>();
      } else {
        bad(where, "model.merges[" + std::to_string(i) + "] is neither \"a b\" nor [\"a\", \"b\"]");
      }
      d->bpe_ranks.emplace(l + '\xff' + r, static_cast<int32_t>(i));
    }
  }
  d->ignore_merges = detail::json_field_or(m, "ignore_merges", false, context, "model.");
  if (m.contains("unk_token") && m["unk_token"].is_string()) d->unk = d->lookup(m["unk_token"].get<std::string>());

  const json pre = j.contains("pre_tokenizer") ? j["pre_tokenizer"] : json();
  const json norm = j.contains("normalizer") ? j["normalizer"] : json();
  d->byte_level = mentions_type(pre, "ByteLevel") || mentions_type(j.value("decoder", json()), "ByteLevel");
  d->model_kind = d->byte_level ? "gpt2" : "llama";
  d->pre_tok = PreTokenizer::from_json(pre);
  d->norm = Normalizer::from_json(norm);
  if (!d->byte_level) {
    // SentencePiece-style (U+2581 for spaces, added by the normalizer or a Metaspace pre-tokenizer):
    // decoding turns U+2581 back into spaces and drops the one the encoder put in front.
    d->unescape_pieces = true;
    d->add_space_prefix = mentions_type(norm, "Prepend") || mentions_type(pre, "Metaspace");
  }

  int32_t first = -1, last = -1;
  if (j.contains("post_processor")) template_ends(j["post_processor"], *d, first, last, where);
  d->add_bos = first >= 0;
  d->add_eos = last >= 0;
  d->bos = first;
  d->eos = last;

  // tokenizer_config.json beside it: bos/eos, add_bos/add_eos, chat_template.
  const auto cfg_path = path.parent_path() / "tokenizer_config.json";
  if (std::filesystem::exists(cfg_path)) {
    const std::string cwhere = cfg_path.string();
    const json c = parse_json_limited(read_file(cfg_path), "Tokenizer: " + cwhere);
    if (!c.is_object()) bad(cwhere, "is not a JSON object");
    auto tok_id = [&](const char* key) -> int32_t {
      if (!c.contains(key) || c[key].is_null()) return -2;  // absent
      std::string t = token_content(c[key]);
      int32_t id = d->lookup(t);
      if (id < 0) bad(cwhere, std::string(key) + " '" + t + "' is not in the vocabulary of " + where);
      return id;
    };
    if (int32_t id = tok_id("bos_token"); id != -2) d->bos = id;
    if (int32_t id = tok_id("eos_token"); id != -2) d->eos = id;
    if (int32_t id = tok_id("unk_token"); id != -2) d->unk = id;
    if (int32_t id = tok_id("pad_token"); id != -2) d->pad = id;
    if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) d->add_bos = c["add_bos_token"].get<bool>();
    if (c.contains("add_eos_token") && c["add_eos_token"].is_boolean()) d->add_eos = c["add_eos_token"].get<bool>();
    if (c.contains("clean_up_tokenization_spaces") && c["clean_up_tokenization_spaces"].is_boolean())
      d->clean_spaces = c["clean_up_tokenization_spaces"].get<bool>();
    if (c.contains("chat_template")) {
      const json& ct = c["chat_template"];
      if (ct.is_string()) {
        d->chat_template = ct.get<std::string>();
      } else if (ct.is_array()) {  // [{"name": "default", "template": "..."}, ...]
        for (const auto& e : ct)
          if (e.is_object() && e.contains("name") && e["name"] == "default" && e.contains("template") &&
              e["template"].is_string())
            d->chat_template = e["template"].get<std::string>();
      }
    }
  }
  // generation_config.json beside it: eos_token_id (one id or a list, e.g. Llama 3 Instruct's three)
  // are all end-of-generation tokens, as transformers' generate() treats them.
  const auto gen_path = path.parent_path() / "generation_config.json";
  if (std::filesystem::exists(gen_path)) {
    const std::string gwhere = gen_path.string();
    const json g = parse_json_limited(read_file(gen_path), "Tokenizer: " + gwhere);
    if (g.is_object() && g.contains("eos_token_id") && !g["eos_token_id"].is_null()) {
      const json& e = g["eos_token_id"];
      std::vector<json> ids = e.is_array() ? std::vector<json>(e.begin(), e.end()) : std::vector<json>{e};
      for (const json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= static_cast<int64_t>(n))
          bad(gwhere,
              "eos_token_id " + id.dump() + " is not a token id of " + where + " (" + std::to_string(n) + " tokens)");
        d->eog.insert(static_cast<int32_t>(id.get<int64_t>()));
      }
    }
  }
  if (d->add_bos && d->bos < 0) bad(where, "adds a BOS token but names none (set bos_token in tokenizer_config.json)");
  if (d->add_eos && d->eos < 0) bad(where, "adds an EOS token but names none (set eos_token in tokenizer_config.json)");
  d->finalize();
  return d;
}

}  // namespace

Tokenizer Tokenizer::load(const std::string& path) {
  namespace fs = std::filesystem;
  fs::path p(path);
  std::error_code ec;
  if (fs::is_directory(p, ec)) {
    if (fs::exists(p / "tokenizer.json")) return Tokenizer(from_json(p / "tokenizer.json"));
    throw Error(ErrorKind::Io,
                "Tokenizer::load: directory " + path +
                    " holds no tokenizer.json (a SentencePiece tokenizer.model alone is not read: convert it with"
                    " transformers' AutoTokenizer.from_pretrained(dir).save_pretrained(dir), or pass a .gguf file)");
  }
  if (!fs::exists(p, ec)) throw Error(ErrorKind::Io, "Tokenizer::load: " + path + " does not exist");
  char magic[4] = {0, 0, 0, 0};
  {
    std::ifstream in(p, std::ios::binary);
    in.read(magic, 4);
  }
  if (std::string(magic, 4) == "GGUF") return from_gguf(GGUFFile::open(path));
  return Tokenizer(from_json(p));
}

}  // namespace wick::llm
