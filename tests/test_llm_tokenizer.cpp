// Tokenizer on tiny hand-made vocabularies (written here as GGUF metadata or tokenizer.json), with
// the expected ids worked out by hand from the algorithms (SentencePiece: merge the best-scoring
// adjacent pair first; BPE: merge the lowest-ranked pair first), plus malformed-file errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "wick/error.hpp"
#include "wick/gguf.hpp"
#include "wick/llm/tokenizer.hpp"

using wick::GGUFType;
using wick::GGUFValue;
using wick::llm::StreamDecoder;
using wick::llm::Tokenizer;
using wick::test::tmp_path;
using Meta = std::vector<std::pair<std::string, GGUFValue>>;
using Ids = std::vector<int32_t>;

namespace {

const std::string S = "\xe2\x96\x81";  // U+2581

GGUFValue strings(const std::vector<std::string>& v) {
  std::vector<GGUFValue> e;
  for (const auto& s : v) e.push_back(GGUFValue::of_string(s));
  return GGUFValue::of_array(GGUFType::String, e);
}
GGUFValue floats(const std::vector<float>& v) {
  std::vector<GGUFValue> e;
  for (float f : v) e.push_back(GGUFValue::of_f32(f));
  return GGUFValue::of_array(GGUFType::F32, e);
}
GGUFValue ints(const std::vector<int32_t>& v) {
  std::vector<GGUFValue> e;
  for (int32_t x : v) e.push_back(GGUFValue::of_i32(x));
  return GGUFValue::of_array(GGUFType::I32, e);
}

Tokenizer from_meta(const Meta& m, const std::string& name = "t.gguf") {
  std::string path = tmp_path(name);
  wick::save_gguf(path, m, {});
  return Tokenizer::load(path);
}

// SentencePiece vocabulary. Types: 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte.
//  id: 0 <unk>  1 <s>  2 </s>  3 ▁  4 a  5 b  6 c  7 ▁a  8 ab  9 bc  10 ▁ab  11 abc
//      12 <0xC3> 13 <0xA9> 14 <0x21> 15 <0xE2> 16 <0x82> 17 <0xAC> 18 <tool>
Meta spm_meta() {
  std::vector<std::string> toks = {"<unk>",  "<s>",    "</s>",   S,        "a",     "b",      "c",
                                   S + "a",  "ab",     "bc",     S + "ab", "abc",   "<0xC3>", "<0xA9>",
                                   "<0x21>", "<0xE2>", "<0x82>", "<0xAC>", "<tool>"};
  std::vector<float> scores = {0, 0, 0, -1, -2, -3, -4, -5, -1.5f, -1.0f, -0.5f, -6, 0, 0, 0, 0, 0, 0, 0};
  std::vector<int32_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, 1, 6, 6, 6, 6, 6, 6, 4};
  return {{"tokenizer.ggml.model", GGUFValue::of_string("llama")},
          {"tokenizer.ggml.tokens", strings(toks)},
          {"tokenizer.ggml.scores", floats(scores)},
          {"tokenizer.ggml.token_type", ints(types)},
          {"tokenizer.ggml.bos_token_id", GGUFValue::of_u32(1)},
          {"tokenizer.ggml.eos_token_id", GGUFValue::of_u32(2)},
          {"tokenizer.ggml.unknown_token_id", GGUFValue::of_u32(0)},
          {"tokenizer.chat_template", GGUFValue::of_string("{{ messages }}")}};
}

TEST(TokenizerSpm, MergesByScore) {
  Tokenizer t = from_meta(spm_meta());
  EXPECT_EQ(t.model_kind(), "llama");
  EXPECT_EQ(t.vocab_size(), 19u);
  EXPECT_EQ(t.chat_template(), "{{ messages }}");
  // "ab" -> "▁ab": pairs ▁a (-5), ab (-1.5): ab first; then ▁+ab = ▁ab (-0.5).
  EXPECT_EQ(t.encode("ab", false), (Ids{10}));
  // "abc" -> "▁abc": bc (-1.0) beats ab (-1.5) and ▁a (-5); then a+bc = abc (-6) loses to ▁a (-5);
  // ▁a + bc = "▁abc" is no token: [▁a, bc]. (Left-to-right greedy would give ▁ab + c.)
  EXPECT_EQ(t.encode("abc", false), (Ids{7, 9}));
  // add_special: BOS in front (SPM default add_bos); the space prefix applies only once.
  EXPECT_EQ(t.encode("ab", true), (Ids{1, 10}));
  // Spaces become ▁: "ab ab" -> "▁ab▁ab".
  EXPECT_EQ(t.encode("ab ab", false), (Ids{10, 10}));
}

TEST(TokenizerSpm, ByteFallbackAndUnknown) {
  Tokenizer t = from_meta(spm_meta());
  // "é!" -> "▁é!": é (C3 A9) and ! have no token: their bytes.
  EXPECT_EQ(t.encode("\xC3\xA9!", false), (Ids{3, 12, 13, 14}));
  // "z" has neither a token nor a byte token: <unk>.
  EXPECT_EQ(t.encode("z", false), (Ids{3, 0}));
  EXPECT_EQ(t.decode({3, 12, 13, 14}), "\xC3\xA9!");  // the leading space (the added prefix) is dropped
  EXPECT_EQ(t.token_bytes(12), "\xC3");
  EXPECT_EQ(t.token_bytes(10), " ab");
}

TEST(TokenizerSpm, SpecialTokens) {
  Tokenizer t = from_meta(spm_meta());
  // parse_special: "</s>" is the control token; the text after it gets the space prefix again.
  EXPECT_EQ(t.encode("a</s>b", false, true), (Ids{7, 2, 3, 5}));
  // Without parse_special, "</s>" is plain text: < / s > are unknown (no tokens, no byte tokens).
  EXPECT_EQ(t.encode("a</s>b", false, false), (Ids{7, 0, 0, 0, 0, 5}));
  // A user-defined token is split out even without parse_special (as llama.cpp and HF).
  EXPECT_EQ(t.encode("a<tool>b", false, false), (Ids{7, 18, 3, 5}));
  EXPECT_EQ(t.decode({1, 10, 2}), "<s> ab</s>");
  // The prefix space comes off the first text output (as Hugging Face; llama.cpp would keep " ab").
  EXPECT_EQ(t.decode({1, 10, 2}, /*skip_special=*/true), "ab");
  EXPECT_EQ(t.decode({10, 18, 5}), "ab<tool>b");
  EXPECT_TRUE(t.is_special(1));
  EXPECT_FALSE(t.is_special(10));
  EXPECT_TRUE(t.is_eog(2));
  EXPECT_FALSE(t.is_eog(1));
  EXPECT_EQ(t.find(S + "ab"), 10);
  EXPECT_FALSE(t.find("zz").has_value());
  EXPECT_EQ(t.bos_id(), 1);
  EXPECT_EQ(t.eos_id(), 2);
  EXPECT_TRUE(t.add_bos());
}

TEST(TokenizerSpm, NoSpacePrefixWhenMetadataSaysSo) {
  Meta m = spm_meta();
  m.push_back({"tokenizer.ggml.add_space_prefix", GGUFValue::of_bool(false)});
  m.push_back({"tokenizer.ggml.add_bos_token", GGUFValue::of_bool(false)});
  Tokenizer t = from_meta(m);
  EXPECT_EQ(t.encode("ab", true), (Ids{8}));  // no ▁, no BOS
  EXPECT_EQ(t.decode({10}), " ab");           // nothing to strip
}

TEST(TokenizerStream, HoldsBackSplitUtf8) {
  Tokenizer t = from_meta(spm_meta());
  StreamDecoder sd(t);
  EXPECT_EQ(sd.push(10), " ab");
  EXPECT_EQ(sd.push(15), "");  // E2: the lead byte of a 3-byte sequence (€ = E2 82 AC)
  EXPECT_EQ(sd.push(16), "");
  EXPECT_EQ(sd.push(17), "\xE2\x82\xAC");
  EXPECT_EQ(sd.push(12), "");
  EXPECT_EQ(sd.push(13), "\xC3\xA9");
  EXPECT_EQ(sd.push(2), "");  // a control token renders nothing (skip_special by default)
  EXPECT_EQ(sd.push(12), "");
  EXPECT_EQ(sd.flush(), "\xC3");  // an incomplete tail comes out as is at the end
  EXPECT_EQ(sd.flush(), "");
  StreamDecoder raw(t, /*skip_special=*/false);
  EXPECT_EQ(raw.push(2), "</s>");
  EXPECT_EQ(raw.push(14), "!");
}

// Byte-level BPE (GPT-2 map: ' ' -> 'Ġ' U+0120).
//  id: 0 a  1 b  2 c  3 Ġ  4 ab  5 Ġa  6 abc  7 Ġab  8 <|end|>  9 .  10 Ġ.
//  merges (rank order): "a b", "Ġ a", "ab c", "Ġ ."
const std::string G = "\xC4\xA0";
Meta bpe_meta(const std::string& pre) {
  return {
      {"tokenizer.ggml.model", GGUFValue::of_string("gpt2")},
      {"tokenizer.ggml.pre", GGUFValue::of_string(pre)},
      {"tokenizer.ggml.tokens", strings({"a", "b", "c", G, "ab", G + "a", "abc", G + "ab", "<|end|>", ".", G + "."})},
      {"tokenizer.ggml.token_type", ints({1, 1, 1, 1, 1, 1, 1, 1, 3, 1, 1})},
      {"tokenizer.ggml.merges", strings({"a b", G + " a", "ab c", G + " ."})},
      {"tokenizer.ggml.eos_token_id", GGUFValue::of_u32(8)},
      {"tokenizer.ggml.bos_token_id", GGUFValue::of_u32(8)}};
}

TEST(TokenizerBpe, MergesByRank) {
  // "gpt-2": GPT-2's regex alone (llama.cpp's "default" splits punctuation off first).
  Tokenizer t = from_meta(bpe_meta("gpt-2"));
  EXPECT_EQ(t.model_kind(), "gpt2");
  EXPECT_FALSE(t.add_bos());
  // GPT-2 split: "abc", " ab" -> "abc", "Ġab". Word 1: a b (rank 0) -> ab, then ab c (rank 2) -> abc.
  // Word 2: Ġ a b: "a b" (rank 0) beats "Ġ a" (rank 1) -> Ġ ab; "Ġ ab" is no merge: [Ġ, ab]
  // (even though Ġab is a token: merges decide).
  EXPECT_EQ(t.encode("abc ab"), (Ids{6, 3, 4}));
  EXPECT_EQ(t.decode({6, 3, 4}), "abc ab");
  // Special tokens with parse_special; control tokens are dropped by skip_special.
  EXPECT_EQ(t.encode("ab<|end|>", false, true), (Ids{4, 8}));
  EXPECT_EQ(t.decode({4, 8}), "ab<|end|>");
  EXPECT_EQ(t.decode({4, 8}, true), "ab");
  EXPECT_TRUE(t.is_eog(8));
  // clean_up_tokenization_spaces (on for gpt-2, as llama.cpp): " ." -> ".".
  EXPECT_EQ(t.encode("ab ."), (Ids{4, 10}));
  EXPECT_EQ(t.decode({4, 10}), "ab.");
  // llama.cpp's "default" pre-tokenizer isolates punctuation first: " ." is " " + ".".
  EXPECT_EQ(from_meta(bpe_meta("default"), "d.gguf").encode("ab ."), (Ids{4, 3, 9}));
}

TEST(TokenizerBpe, IgnoreMergesForLlama3) {
  // llama-bpe takes a pre-token that is itself a token whole (tokenizer.json's ignore_merges).
  Tokenizer t = from_meta(bpe_meta("llama-bpe"));
  EXPECT_TRUE(t.add_bos());  // llama3's default (no add_bos_token key here)
  EXPECT_EQ(t.encode("abc ab", false), (Ids{6, 7}));
  EXPECT_EQ(t.encode("abc ab", true), (Ids{8, 6, 7}));
}

template <class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no wick::Error thrown";
  } catch (const wick::Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << "\n lacks: " << p;
  }
}

Meta without(Meta m, const std::string& key) {
  std::erase_if(m, [&](const auto& kv) { return kv.first == key; });
  return m;
}
Meta with(Meta m, const std::string& key, GGUFValue v) {
  for (auto& kv : m)
    if (kv.first == key) {
      kv.second = std::move(v);
      return m;
    }
  m.push_back({key, std::move(v)});
  return m;
}

TEST(TokenizerErrors, MalformedGguf) {
  expect_error([] { from_meta(without(spm_meta(), "tokenizer.ggml.model")); }, {"tokenizer.ggml.model", "missing"});
  expect_error([] { from_meta(with(spm_meta(), "tokenizer.ggml.model", GGUFValue::of_string("bert"))); },
               {"'bert'", "not supported", "'llama'", "'gpt2'"});
  expect_error([] { from_meta(without(spm_meta(), "tokenizer.ggml.tokens")); }, {"tokenizer.ggml.tokens", "missing"});
  expect_error(
      [] {
        from_meta(with(spm_meta(), "tokenizer.ggml.scores", floats({1, 2})));
      },
      {"tokenizer.ggml.scores", "2 entries for 19 tokens"});
  expect_error([] { from_meta(with(spm_meta(), "tokenizer.ggml.token_type", floats(std::vector<float>(19, 1.0f)))); },
               {"tokenizer.ggml.token_type", "f32"});
  expect_error([] { from_meta(with(spm_meta(), "tokenizer.ggml.token_type", ints(std::vector<int32_t>(19, 9)))); },
               {"tokenizer.ggml.token_type", "entry 0 = 9"});
  expect_error([] { from_meta(with(spm_meta(), "tokenizer.ggml.eos_token_id", GGUFValue::of_u32(19))); },
               {"tokenizer.ggml.eos_token_id", "19", "outside the vocabulary (19 tokens)"});
  expect_error([] { from_meta(with(spm_meta(), "tokenizer.ggml.tokens", GGUFValue::of_string("a"))); },
               {"tokenizer.ggml.tokens", "is string"});
  expect_error([] { from_meta(without(bpe_meta("default"), "tokenizer.ggml.merges")); },
               {"tokenizer.ggml.merges", "missing"});
  expect_error([] { from_meta(with(bpe_meta("default"), "tokenizer.ggml.merges", strings({"ab"}))); },
               {"tokenizer.ggml.merges", "entry 0 'ab'"});
  expect_error([] { from_meta(with(bpe_meta("default"), "tokenizer.ggml.pre", GGUFValue::of_string("no-such-pre"))); },
               {"tokenizer.ggml.pre", "no-such-pre"});
  expect_error([] { Tokenizer::load(tmp_path("does_not_exist.gguf")); }, {"does_not_exist.gguf", "does not exist"});
  Tokenizer t = from_meta(spm_meta());
  expect_error([&] { t.decode({19}); }, {"token id 19", "vocabulary (size 19)"});
  expect_error([&] { t.token_bytes(-1); }, {"token id -1"});
}

void write(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << text;
}

// The byte-level vocabulary of bpe_meta as a tokenizer.json (ids the same): the same ids must come out.
const char* kByteLevelJson = R"({
  "version": "1.0",
  "added_tokens": [{"id": 8, "content": "<|end|>", "single_word": false, "lstrip": false, "rstrip": false,
                    "normalized": false, "special": true}],
  "normalizer": null,
  "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
  "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
  "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
  "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
            "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
            "vocab": {"a": 0, "b": 1, "c": 2, "Ġ": 3, "ab": 4, "Ġa": 5, "abc": 6, "Ġab": 7, ".": 9, "Ġ.": 10},
            "merges": [["a", "b"], ["Ġ", "a"], "ab c", ["Ġ", "."]]}
})";

TEST(TokenizerJson, ByteLevelBpe) {
  const std::string dir = std::filesystem::path(tmp_path("tokenizer.json")).parent_path().string();
  write(dir + "/tokenizer.json", kByteLevelJson);
  write(dir + "/tokenizer_config.json",
        R"({"eos_token": {"content": "<|end|>"}, "add_bos_token": false, "clean_up_tokenization_spaces": false,
            "chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}"})");
  Tokenizer t = Tokenizer::load(dir);  // the directory: its tokenizer.json
  EXPECT_EQ(t.vocab_size(), 11u);
  EXPECT_EQ(t.model_kind(), "gpt2");
  EXPECT_EQ(t.encode("abc ab"), (Ids{6, 3, 4}));  // as the GGUF version (hand-worked there)
  EXPECT_EQ(t.encode("ab<|end|>", false, true), (Ids{4, 8}));
  EXPECT_EQ(t.eos_id(), 8);
  EXPECT_TRUE(t.is_eog(8));
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_EQ(t.chat_template(), "{% for m in messages %}{{ m.content }}{% endfor %}");
  EXPECT_EQ(t.decode({4, 10}), "ab .");  // clean_up_tokenization_spaces false here
  EXPECT_EQ(t.find("<|end|>"), 8);
  EXPECT_FALSE(t.is_eog(9));
  // generation_config.json's eos_token_id list: every id in it ends generation.
  write(dir + "/generation_config.json", R"({"eos_token_id": [8, 9]})");
  Tokenizer g = Tokenizer::load(dir + "/tokenizer.json");
  EXPECT_TRUE(g.is_eog(8));
  EXPECT_TRUE(g.is_eog(9));
  EXPECT_FALSE(g.is_eog(10));
  write(dir + "/generation_config.json", R"({"eos_token_id": 11})");
  expect_error([&] { Tokenizer::load(dir); }, {"generation_config.json", "eos_token_id 11"});
}

// A SentencePiece-style tokenizer.json (llama-hf): spaces become ▁ in the normalizer, BPE merges
// by rank, unknown characters fall back to <0xXX> byte tokens, the post-processor adds <s>.
//  id: 0 <unk> 1 <s> 2 </s> 3 ▁ 4 a 5 b 6 ab 7 ▁ab 8 <0xC3> 9 <0xA9>
TEST(TokenizerJson, ByteFallbackBpe) {
  const std::string json = R"({
    "added_tokens": [{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}],
    "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "▁"},
                   {"type": "Replace", "pattern": {"String": " "}, "content": "▁"}]},
    "pre_tokenizer": null,
    "post_processor": {"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {}},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "byte_fallback": true, "fuse_unk": true,
              "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "▁": 3, "a": 4, "b": 5, "ab": 6, "▁ab": 7, "<0xC3>": 8, "<0xA9>": 9},
              "merges": ["a b", "▁ ab"]}
  })";
  const std::string path = tmp_path("tok.json");
  write(path, json);
  Tokenizer t = Tokenizer::load(path);
  EXPECT_EQ(t.model_kind(), "llama");
  EXPECT_TRUE(t.add_bos());
  EXPECT_EQ(t.bos_id(), 1);
  // "ab é" -> "▁ab▁é": a b (rank 0) -> ab, ▁ ab (rank 1) -> ▁ab; ▁ stays; é -> <0xC3> <0xA9>.
  EXPECT_EQ(t.encode("ab \xC3\xA9"), (Ids{1, 7, 3, 8, 9}));
  EXPECT_EQ(t.decode({7, 3, 8, 9}), "ab \xC3\xA9");
  // No byte token for "z": <unk>.
  EXPECT_EQ(t.encode("z", false), (Ids{3, 0}));
}

TEST(TokenizerErrors, MalformedJson) {
  const std::string p = tmp_path("bad.json");
  write(p, "{ not json");
  expect_error([&] { Tokenizer::load(p); }, {"bad.json", "not valid JSON"});
  write(p, R"({"model": {"type": "WordPiece", "vocab": {"a": 0}}})");
  expect_error([&] { Tokenizer::load(p); }, {"WordPiece", "supported: BPE"});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": "zero"}, "merges": []}})");
  expect_error([&] { Tokenizer::load(p); }, {"model.vocab['a']", "not an integer"});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": [3]}})");
  expect_error([&] { Tokenizer::load(p); }, {"model.merges[0]"});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "added_tokens": [{"content": "x"}]})");
  expect_error([&] { Tokenizer::load(p); }, {"added_tokens[0]", "\"id\""});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Nope"}})");
  expect_error([&] { Tokenizer::load(p); }, {"Nope"});
  expect_error([&] { Tokenizer::load(std::filesystem::path(p).parent_path().string()); }, {"no tokenizer.json"});
}

// Nesting of any depth is an Error, not a stack overflow in a walk over the parsed value: here 30,000 levels
// (60 KB) in each place the loader looks into, and in tokenizer_config.json beside it.
TEST(TokenizerErrors, DeeplyNestedJson) {
  const std::string deep = std::string(30000, '[') + std::string(30000, ']');
  const std::string dir = std::filesystem::path(tmp_path("deep")).string();
  std::filesystem::create_directories(dir);
  const std::string p = dir + "/tokenizer.json";
  const std::string vocab = R"("type": "BPE", "vocab": {"a": 0}, "merges": [])";
  for (const std::string& text :
       {"{\"model\": {\"x\": " + deep + "}}", "{\"model\": {" + vocab + ", \"x\": " + deep + "}}",
        "{\"model\": {" + vocab + "}, \"pre_tokenizer\": {\"type\": \"Sequence\", \"pretokenizers\": " + deep + "}}",
        "{\"model\": {" + vocab + "}, \"decoder\": " + deep + "}",
        "{\"model\": {" + vocab + "}, \"post_processor\": " + deep + "}"}) {
    write(p, text);
    expect_error([&] { Tokenizer::load(dir); }, {"tokenizer.json", "deeper than 512 levels"});
  }
  // Brackets inside strings are text, not nesting.
  write(p, "{\"model\": {" + vocab + "}, \"x\": \"" + std::string(1000, '[') + "\"}");
  EXPECT_EQ(Tokenizer::load(dir).encode("a", false), (Ids{0}));
  write(dir + "/tokenizer_config.json", "{\"chat_template\": " + deep + "}");
  expect_error([&] { Tokenizer::load(dir); }, {"tokenizer_config.json", "deeper than 512 levels"});
  std::filesystem::remove(dir + "/tokenizer_config.json");
}

// A key of the wrong JSON type is an Error that names the key.
TEST(TokenizerErrors, JsonTypeErrorsNameTheKey) {
  const std::string p = tmp_path("typed.json");
  write(p, R"({"model": {"type": 42, "vocab": {"a": 0}, "merges": []}})");
  expect_error([&] { Tokenizer::load(p); }, {"model.type", "number"});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "byte_fallback": "yes"}})");
  expect_error([&] { Tokenizer::load(p); }, {"model.byte_fallback", "string"});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": [], "ignore_merges": 1}})");
  expect_error([&] { Tokenizer::load(p); }, {"model.ignore_merges", "number"});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
               "added_tokens": [{"id": 1, "content": "<s>", "special": "true"}]})");
  expect_error([&] { Tokenizer::load(p); }, {"added_tokens[0].special", "string"});
  write(p, R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "post_processor": {"type": []}})");
  expect_error([&] { Tokenizer::load(p); }, {"post_processor.type", "array"});
}

// An empty vocabulary is an Error, also when added tokens give the file ids (every character would be <unk>).
TEST(TokenizerErrors, EmptyVocabulary) {
  const std::string p = tmp_path("empty_vocab.json");
  write(p, R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})");
  expect_error([&] { Tokenizer::load(p); }, {"model.vocab is empty"});
  write(p, R"({"model": {"type": "BPE", "vocab": {}, "merges": [], "unk_token": "<unk>"},
               "added_tokens": [{"id": 0, "content": "<unk>", "special": true}]})");
  expect_error([&] { Tokenizer::load(p); }, {"model.vocab is empty"});
}

}  // namespace

// ---- transformers' ids (tests/fixtures/llm, written by gen_tokenizer.py / gen_hf.py) ----------------

namespace hf {

const std::string kLlm = std::string(WICK_FIXTURES) + "/llm/";

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

std::string join(const Ids& v) {
  std::string s;
  for (int32_t x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
  return s;
}

// tokenizer/: the SentencePiece-style tokenizer.json (Metaspace, byte fallback) all llama-family fixtures share.
TEST(TokenizerHf, SentencePieceTokenizerJsonCases) {
  Tokenizer t = Tokenizer::load(kLlm + "tokenizer");
  auto cases = read_json(kLlm + "tokenizer/cases.json")["cases"];
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    EXPECT_EQ(join(t.encode(text, true)), join(c["ids"].get<Ids>())) << "'" << text << "'";
    EXPECT_EQ(join(t.encode(text, false)), join(c["ids_no_special"].get<Ids>())) << "'" << text << "'";
  }
}

// bpe/: a byte-level BPE trained by the tokenizers library; transformers parses special tokens in text.
TEST(TokenizerHf, ByteLevelTokenizerJsonCases) {
  Tokenizer t = Tokenizer::load(kLlm + "bpe/tokenizer.json");
  auto cases = read_json(kLlm + "bpe/cases.json")["cases"];
  ASSERT_GE(cases.size(), 10u);
  for (const auto& c : cases) {
    const std::string text = c["text"];
    Ids ids = c["ids"].get<Ids>();
    EXPECT_EQ(join(t.encode(text, true, true)), join(ids)) << "'" << text << "'";
    if (text.find("<|") == std::string::npos) {
      EXPECT_EQ(t.decode(ids), text);  // byte-level: lossless
    }
  }
}

// Each model folder's prompt, through its tokenizer.json and through the GGUF llama.cpp converted.
class TokenizerModelDirs : public ::testing::TestWithParam<std::string> {};
TEST_P(TokenizerModelDirs, PromptIdsAsTransformers) {
  const std::string dir = kLlm + GetParam();
  auto e = read_json(dir + "/expected.json");
  const std::string prompt = e["prompt"];
  const Ids want = e["prompt_ids"].get<Ids>();
  Tokenizer js = Tokenizer::load(dir);
  EXPECT_EQ(join(js.encode(prompt, true, true)), join(want)) << "tokenizer.json of " << GetParam();
  // Every GGUF was converted from the shared tokenizer.model (SentencePiece), so llama.cpp tokenizes the
  // prompt as llama2's transformers tokenizer does; mistral's and qwen2's tokenizer.json were rebuilt by
  // transformers with other rules (no "▁" prefix token; a Qwen2 tokenizer), hence their other ids.
  const bool rebuilt = GetParam() == "mistral" || GetParam() == "qwen2";
  const Ids want_gguf = rebuilt ? read_json(kLlm + "llama2/expected.json")["prompt_ids"].get<Ids>() : want;
  Tokenizer gg = Tokenizer::load(dir + "/model-f16.gguf");
  EXPECT_EQ(gg.model_kind(), "llama");
  EXPECT_EQ(join(gg.encode(prompt, true, true)), join(want_gguf)) << "model-f16.gguf of " << GetParam();
  EXPECT_EQ(gg.bos_id(), 1);
  EXPECT_EQ(gg.eos_id(), 2);
  if (!rebuilt) {
    EXPECT_EQ(gg.vocab_size(), js.vocab_size());
    EXPECT_EQ(js.bos_id(), 1);
    EXPECT_EQ(js.eos_id(), 2);
    EXPECT_EQ(gg.decode(want, true), js.decode(want, true));
  }
}
INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerModelDirs,
                         ::testing::Values("llama2", "llama3", "mistral", "qwen2", "qwen3"));

}  // namespace hf
