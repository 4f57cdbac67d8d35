// Chat templates: each family's template rendered by wick against jinja2's rendering of the same
// template (fixtures/chat.json, written by fixtures/gen_chat.py), plus hand-written cases.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "wick/error.hpp"
#include "wick/gguf.hpp"
#include "wick/llm/generate.hpp"
#include "wick/llm/tokenizer.hpp"

using namespace wick;
using namespace wick::llm;

namespace {

nlohmann::json load_cases() {
  std::ifstream f(std::string(WICK_FIXTURES) + "/chat.json");
  EXPECT_TRUE(f.good()) << "tests/fixtures/chat.json is missing (python3 tests/fixtures/gen_chat.py writes it)";
  nlohmann::json j;
  f >> j;
  return j["cases"];
}

std::vector<ChatMessage> messages(const nlohmann::json& j) {
  std::vector<ChatMessage> out;
  for (const auto& m : j) out.push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
  return out;
}

}  // namespace

TEST(LlmChat, EveryFamilyAsJinjaRendersIt) {
  nlohmann::json cases = load_cases();
  ASSERT_GE(cases.size(), 17u);
  for (const auto& c : cases) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const std::string tmpl = c["template"];
    EXPECT_EQ(detect_chat_template(tmpl), c["format"].get<std::string>());
    std::string got = render_chat(c["format"], tmpl, messages(c["messages"]), c["add_generation_prompt"].get<bool>(),
                                  c["bos"], c["eos"]);
    EXPECT_EQ(got, c["expected"].get<std::string>());
  }
}

// Hand-checked against the Jinja text: Qwen2's template writes its default system turn when the
// first message is not a system one (the literal holds real newlines in llama.cpp's qwen2 vocab).
TEST(LlmChat, ChatmlDefaultSystemByHand) {
  const std::string tmpl =
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\n"
      "You are a helpful assistant<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
      "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>"
      "assistant\n' }}{% endif %}";
  EXPECT_EQ(render_chat("chatml", tmpl, {{"user", "2+2?"}}, true, "", ""),
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n");
  // Qwen3-style: the system turn is only ever built from a message (no literal to take).
  const std::string qwen3 =
      "{%- if messages[0].role == 'system' %}{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}"
      "{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role + '\\n' + message.content + "
      "'<|im_end|>' + '\\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}"
      "{%- endif %}";
  EXPECT_EQ(detect_chat_template(qwen3), "chatml");
  EXPECT_EQ(render_chat("chatml", qwen3, {{"user", "hi"}}, true, "", ""),
            "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
}

TEST(LlmChat, Llama3ByHand) {
  const std::string tmpl =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + "
      "message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 "
      "%}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";
  EXPECT_EQ(render_chat("llama3", tmpl, {{"user", " Hi \n"}}, true, "<|begin_of_text|>", "<|eot_id|>"),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(LlmChat, UnknownTemplateIsPlain) {
  EXPECT_EQ(detect_chat_template(""), "");
  EXPECT_EQ(detect_chat_template("{% for m in messages %}### {{ m['role'] }}: {{ m['content'] }}{% endfor %}"), "");
  EXPECT_EQ(render_chat("plain", "", {{"system", "S"}, {"user", "U"}}, true, "<s>", "</s>"),
            "system: S\nuser: U\nassistant:");
  EXPECT_THROW(render_chat("nosuch", "", {}, true, "", ""), Error);
}

// Through a real tokenizer: llama.cpp's qwen2 vocabulary carries Qwen2's template; its llama-spm one
// carries none (plain prompt, a warning).
TEST(LlmChat, ApplyWithTokenizer) {
  Tokenizer qwen = Tokenizer::load(std::string(WICK_FIXTURES) + "/vocab/ggml-vocab-qwen2.gguf");
  std::string warn = "stale";
  std::string s = apply_chat_template(qwen, {{"user", "Hello"}}, true, &warn);
  EXPECT_EQ(warn, "");
  EXPECT_EQ(s,
            "<|im_start|>system\nYou are a helpful assistant<|im_end|>\n<|im_start|>user\nHello<|im_end|>\n"
            "<|im_start|>assistant\n");
  // parse_special: the markers become their control ids, not text pieces.
  std::vector<int32_t> ids = qwen.encode(s, true, true);
  auto im_start = qwen.find("<|im_start|>");
  ASSERT_TRUE(im_start.has_value());
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(ids[0], *im_start);

  Tokenizer spm = Tokenizer::load(std::string(WICK_FIXTURES) + "/vocab/ggml-vocab-llama-spm.gguf");
  s = apply_chat_template(spm, {{"user", "Hello"}}, true, &warn);
  EXPECT_EQ(s, "user: Hello\nassistant:");
  EXPECT_NE(warn.find("plain"), std::string::npos) << warn;
}

// BOS exactly once: llama.cpp's llama-spm and llama-bpe (Llama 3) vocabularies add BOS, and their
// templates write bos_token first; the vocab files get the family's template added (from chat.json).
namespace {

Tokenizer with_template(const std::string& vocab, const std::string& tmpl, const std::string& name) {
  GGUFFile f = GGUFFile::open(std::string(WICK_FIXTURES) + "/vocab/" + vocab);
  std::vector<std::pair<std::string, GGUFValue>> meta;
  for (const auto& kv : f.metadata())
    if (kv.first != "tokenizer.chat_template") meta.push_back(kv);
  meta.push_back({"tokenizer.chat_template", GGUFValue::of_string(tmpl)});
  const std::string path = ::testing::TempDir() + "/wick_chat_" + name + ".gguf";
  save_gguf(path, meta, {});
  return Tokenizer::load(path);
}

std::string case_template(const std::string& name) {
  for (const auto& c : load_cases())
    if (c["name"] == name) return c["template"];
  ADD_FAILURE() << "no case " << name << " in chat.json";
  return "";
}

}  // namespace

TEST(LlmChat, BosOnceWhenTheTokenizerAddsIt) {
  Tokenizer l2 = with_template("ggml-vocab-llama-spm.gguf", case_template("llama2"), "llama2");
  ASSERT_TRUE(l2.add_bos());
  std::vector<ChatMessage> conv = {{"user", "Hello"}, {"assistant", "Hi there"}, {"user", "Who are you"}};
  std::string s = apply_chat_template(l2, conv, true);
  // The template's first bos_token is the tokenizer's to add; the one inside the history stays.
  EXPECT_EQ(s, "[INST] Hello [/INST] Hi there </s><s>[INST] Who are you [/INST]");
  std::vector<int32_t> ids = l2.encode(s, true, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], l2.bos_id());
  EXPECT_NE(ids[1], l2.bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), l2.bos_id()), 2);  // the first, and the second turn's <s>

  Tokenizer l3 = with_template("ggml-vocab-llama-bpe.gguf", case_template("llama3"), "llama3");
  ASSERT_TRUE(l3.add_bos());
  s = apply_chat_template(l3, {{"user", "Hi"}}, true);
  EXPECT_EQ(
      s, "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n");
  ids = l3.encode(s, true, true);
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], l3.bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), l3.bos_id()), 1);
  EXPECT_EQ(ids[1], *l3.find("<|start_header_id|>"));
}

// A system message under a Gemma template (Gemma 2's refuses one): merged into the first user turn with a
// blank line, as llama.cpp's llama-chat.cpp does; the expected text is llama.cpp's own expected output for
// google/gemma-7b-it in its tests/test-chat-template.cpp (messages as chat.json's longer conversation).
TEST(LlmChat, GemmaSystemMergedAsLlamaCppDoes) {
  const std::string tmpl =
      "{% for message in messages %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% "
      "set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + "
      "'<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
  ASSERT_EQ(detect_chat_template(tmpl), "gemma");
  const std::vector<ChatMessage> msgs = {{"system", "You are a helpful assistant"},
                                         {"user", "Hello"},
                                         {"assistant", "Hi there"},
                                         {"user", "Who are you"},
                                         {"assistant", "   I am an assistant   "},
                                         {"user", "Another question"}};
  EXPECT_EQ(render_chat("gemma", tmpl, msgs, true, "<bos>", "<eos>"),
            "<start_of_turn>user\nYou are a helpful assistant\n\nHello<end_of_turn>\n<start_of_turn>model\nHi "
            "there<end_of_turn>\n<start_of_turn>user\nWho are you<end_of_turn>\n<start_of_turn>model\nI am an "
            "assistant<end_of_turn>\n<start_of_turn>user\nAnother question<end_of_turn>\n<start_of_turn>model\n");
}
