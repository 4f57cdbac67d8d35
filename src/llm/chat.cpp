// Chat templates: the formats of the supported families, recognised by the markers their
// tokenizer.chat_template holds (as llama.cpp's llama-chat.cpp recognises them) and rendered as
// Hugging Face's Jinja renderer renders those templates. Not a Jinja interpreter.
#include <ctime>
#include <string>
#include <string_view>
#include <vector>

#include "wick/error.hpp"
#include "wick/llm/generate.hpp"

namespace wick::llm {
namespace {

bool has(const std::string& s, std::string_view what) { return s.find(what) != std::string::npos; }

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// Jinja's |trim and Python's str.strip() (ASCII whitespace is all the templates meet in practice).
std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && is_space(s[b])) ++b;
  while (e > b && is_space(s[e - 1])) --e;
  return s.substr(b, e - b);
}

// A string literal's escapes as Jinja reads them (\n, \t, \', \", \\).
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 == s.size()) {
      out += s[i];
      continue;
    }
    char c = s[++i];
    out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
  }
  return out;
}

// The default system prompt a chatml template writes when the first message is not a system one
// (Qwen2/2.5: "You are Qwen, ...", SmolLM2: "You are a helpful AI assistant named SmolLM, ..."):
// the first '<|im_start|>system\n...<|im_end|>' that is one plain literal. "" when there is none
// (Qwen3, plain chatml), whose system turn always comes from a message.
std::string chatml_default_system(const std::string& tmpl) {
  const std::string open = "<|im_start|>system";
  for (size_t at = tmpl.find(open); at != std::string::npos; at = tmpl.find(open, at + 1)) {
    size_t p = at + open.size();
    if (tmpl.compare(p, 2, "\\n") == 0)
      p += 2;
    else if (p < tmpl.size() && tmpl[p] == '\n')
      p += 1;
    else
      continue;
    size_t end = tmpl.find("<|im_end|>", p);
    if (end == std::string::npos) return "";
    std::string_view body(tmpl.data() + p, end - p);
    if (body.find_first_of("'\"{}+") != std::string_view::npos) continue;  // an expression, not a literal
    return unescape(body);
  }
  return "";
}

// Llama 3.1+ writes "Today Date: " + date_string: strftime_now("%d %b %Y") where the template asks
// for it (3.2, as transformers defines strftime_now), else its literal default ("26 Jul 2024").
std::string llama3_date(const std::string& tmpl) {
  if (has(tmpl, "strftime_now")) {
    std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%d %b %Y", &tm);
    return buf;
  }
  const std::string key = "set date_string = \"";
  size_t p = tmpl.find(key);
  if (p == std::string::npos) return "26 Jul 2024";
  p += key.size();
  size_t e = tmpl.find('"', p);
  return e == std::string::npos ? "26 Jul 2024" : tmpl.substr(p, e - p);
}

// A leading system message, which the llama and mistral formats take out of the turns and put
// elsewhere: its text, and the index of the first other message.
struct LeadingSystem {
  bool present = false;
  std::string text;
  size_t first = 0;
};
LeadingSystem leading_system(const std::vector<ChatMessage>& msgs) {
  if (msgs.empty() || msgs[0].role != "system") return {};
  return {true, msgs[0].content, 1};
}

std::string render_chatml(const std::string& tmpl, const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  std::string def = chatml_default_system(tmpl);
  if (!def.empty() && (msgs.empty() || msgs[0].role != "system")) out += "<|im_start|>system\n" + def + "<|im_end|>\n";
  for (const auto& m : msgs) out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_llama3(const std::string& tmpl, const std::vector<ChatMessage>& msgs, bool gen,
                          const std::string& bos) {
  std::string out = bos;
  size_t first = 0;
  auto turn = [](const std::string& role, const std::string& content) {
    return "<|start_header_id|>" + role + "<|end_header_id|>\n\n" + content + "<|eot_id|>";
  };
  // 3.1+: a system turn always, with the knowledge cut-off and date before the system message.
  if (has(tmpl, "Cutting Knowledge Date")) {
    const LeadingSystem sys = leading_system(msgs);
    first = sys.first;
    out += turn("system",
                "Cutting Knowledge Date: December 2023\nToday Date: " + llama3_date(tmpl) + "\n\n" + trim(sys.text));
  }
  for (size_t i = first; i < msgs.size(); ++i) out += turn(msgs[i].role, trim(msgs[i].content));
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Llama-2-chat: <<SYS>> inside the first user turn, BOS before every [INST], EOS after answers.
std::string render_llama2(const std::string& tmpl, const std::vector<ChatMessage>& msgs, const std::string& bos,
                          const std::string& eos) {
  const bool strip = has(tmpl, "strip()");
  const LeadingSystem sys = leading_system(msgs);
  std::string out;
  for (size_t i = sys.first; i < msgs.size(); ++i) {
    std::string content = msgs[i].content;
    if (i == sys.first && sys.present) content = "<<SYS>>\n" + sys.text + "\n<</SYS>>\n\n" + content;
    if (strip) content = trim(content);
    if (msgs[i].role == "user")
      out += bos + "[INST] " + content + " [/INST]";
    else if (msgs[i].role == "assistant")
      out += " " + content + " " + eos;
  }
  return out;
}

// The Mistral instruct formats (mistralai's cookbook names them v1, v3, v3-tekken, v7) and the
// older v0.1/v0.2 one without a system role ("mistral-v0": the system text goes before the first user
// message, where v1 puts it, since that template would raise).
std::string render_mistral(const std::string& fmt, const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                           const std::string& bos, const std::string& eos) {
  std::string out = bos;
  if (fmt == "mistral-v7") {
    const std::string sp = has(tmpl, "[INST] ") ? " " : "";
    for (const auto& m : msgs) {
      if (m.role == "system")
        out += "[SYSTEM_PROMPT]" + sp + m.content + "[/SYSTEM_PROMPT]";
      else if (m.role == "user")
        out += "[INST]" + sp + m.content + "[/INST]";
      else
        out += sp + m.content + eos;
    }
    return out;
  }
  const LeadingSystem sys = leading_system(msgs);
  for (size_t i = sys.first; i < msgs.size(); ++i) {
    const ChatMessage& m = msgs[i];
    const bool is_first = i == sys.first, is_last = i + 1 == msgs.size();
    if (m.role == "user") {
      if (fmt == "mistral-v0" || fmt == "mistral-v1") {
        // v1: " [INST] " + system + "\n\n" + content + " [/INST]" on the first user turn.
        std::string lead = fmt == "mistral-v1" ? " [INST] " : "[INST] ";
        out += lead + (is_first && sys.present ? sys.text + "\n\n" : "") + m.content + " [/INST]";
      } else {
        // v3 and v3-tekken put the system message in the LAST message's turn (loop.last).
        std::string lead = fmt == "mistral-v3" ? "[INST] " : "[INST]";
        out += lead + (is_last && sys.present ? sys.text + "\n\n" : "") + m.content + "[/INST]";
      }
    } else if (m.role == "assistant") {
      if (fmt == "mistral-v0")
        out += m.content + eos;
      else if (fmt == "mistral-v1")
        out += " " + m.content + eos;
      else if (fmt == "mistral-v3")
        out += " " + trim(m.content) + eos;
      else
        out += m.content + eos;
    }
  }
  return out;
}

// TinyLlama-chat / Zephyr: '<|role|>\n' + content + eos_token, one a line.
std::string render_zephyr(const std::vector<ChatMessage>& msgs, bool gen, const std::string& eos) {
  std::string out;
  for (const auto& m : msgs) out += "<|" + m.role + "|>\n" + m.content + eos + "\n";
  if (gen && !msgs.empty()) out += "<|assistant|>\n";
  return out;
}

// Phi-3 small/vision (and templates like theirs): '<|role|>\n' + content + '<|end|>\n' for every message,
// then '<|assistant|>\n' (vision: unless the last message is the assistant's) or, where the template
// has one, eos_token. Phi-3 mini/medium ("phi3-mini"): user and assistant messages only (others are
// dropped, as the template does), the assistant's prompt after every user message.
std::string render_phi3(const std::string& fmt, const std::string& tmpl, const std::vector<ChatMessage>& msgs, bool gen,
                        const std::string& bos, const std::string& eos) {
  std::string out = has(tmpl, "bos_token") ? bos : "";
  if (fmt == "phi3-mini") {
    for (const auto& m : msgs) {
      if (m.role == "user")
        out += "<|user|>\n" + m.content + "<|end|>\n<|assistant|>\n";
      else if (m.role == "assistant")
        out += m.content + "<|end|>\n";
    }
    return out;
  }
  // Phi-3.5-mini's template leaves out an empty system message.
  const bool skip_empty_system = has(tmpl, "'system' and message['content']");
  for (const auto& m : msgs)
    if (!(skip_empty_system && m.role == "system" && m.content.empty()))
      out += "<|" + m.role + "|>\n" + m.content + "<|end|>\n";
  if (has(tmpl, "eos_token"))
    out += gen ? "<|assistant|>\n" : eos;
  else if (gen && (msgs.empty() || msgs.back().role != "assistant"))
    out += "<|assistant|>\n";
  return out;
}

// Gemma: '<start_of_turn>' + role ('model' for the assistant) + '\n' + trimmed content + '<end_of_turn>\n',
// the model's opening as the generation prompt. Gemma 2's template refuses a system message and Gemma 3's
// puts it before the first user message with a blank line: done here as llama.cpp's llama-chat.cpp does.
std::string render_gemma(const std::string& tmpl, const std::vector<ChatMessage>& msgs, bool gen,
                         const std::string& bos) {
  std::string out = has(tmpl, "bos_token") ? bos : "", system;
  for (const auto& m : msgs) {
    if (m.role == "system") {
      system += trim(m.content);
      continue;
    }
    const std::string role = m.role == "assistant" ? "model" : m.role;
    out += "<start_of_turn>" + role + "\n";
    if (!system.empty() && role != "model") {
      out += system + "\n\n";
      system.clear();
    }
    out += trim(m.content) + "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

// Phi-4: system, user and assistant turns between <|im_start|>role<|im_sep|> and <|im_end|>, the
// assistant's opening after every user message (the template has no generation-prompt branch).
std::string render_phi4(const std::vector<ChatMessage>& msgs) {
  std::string out;
  for (const auto& m : msgs) {
    if (m.role == "system")
      out += "<|im_start|>system<|im_sep|>" + m.content + "<|im_end|>";
    else if (m.role == "user")
      out += "<|im_start|>user<|im_sep|>" + m.content + "<|im_end|><|im_start|>assistant<|im_sep|>";
    else if (m.role == "assistant")
      out += m.content + "<|im_end|>";
  }
  return out;
}

std::string render_plain(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  for (const auto& m : msgs) out += m.role + ": " + m.content + "\n";
  if (gen) out += "assistant:";
  return out;
}

}  // namespace

std::string detect_chat_template(const std::string& t) {
  if (t.empty()) return "";
  if (has(t, "<|im_start|>") && !has(t, "<|im_sep|>") && !has(t, "<end_of_utterance>")) return "chatml";
  if (has(t, "<|start_header_id|>") && has(t, "<|end_header_id|>")) return "llama3";
  if (has(t, "[INST]")) {
    if (has(t, "[SYSTEM_PROMPT]")) return "mistral-v7";
    if (has(t, "' [INST] ' + system_message") || has(t, "[AVAILABLE_TOOLS]")) {
      if (has(t, " [INST]")) return "mistral-v1";
      if (has(t, "\"[INST]\"")) return "mistral-v3-tekken";
      return "mistral-v3";
    }
    return has(t, "<<SYS>>") ? "llama2" : "mistral-v0";
  }
  if (has(t, "<|user|>") && has(t, "<|assistant|>") && !has(t, "<|end|>") && has(t, "eos_token")) return "zephyr";
  if (has(t, "<|im_sep|>") && has(t, "<|im_start|>")) return "phi4";
  if (has(t, "<start_of_turn>")) return "gemma";
  if (has(t, "<|assistant|>") && has(t, "<|end|>"))
    return has(t, "'<|' + message['role'] + '|>'") || has(t, "<|system|>") ? "phi3" : "phi3-mini";
  return "";
}

std::string render_chat(const std::string& format, const std::string& tmpl, const std::vector<ChatMessage>& msgs,
                        bool add_generation_prompt, const std::string& bos_text, const std::string& eos_text) {
  if (format == "chatml") return render_chatml(tmpl, msgs, add_generation_prompt);
  if (format == "llama3") return render_llama3(tmpl, msgs, add_generation_prompt, bos_text);
  if (format == "llama2") return render_llama2(tmpl, msgs, bos_text, eos_text);
  if (format.rfind("mistral-", 0) == 0 && (format == "mistral-v0" || format == "mistral-v1" || format == "mistral-v3" ||
                                           format == "mistral-v3-tekken" || format == "mistral-v7"))
    return render_mistral(format, tmpl, msgs, bos_text, eos_text);
  if (format == "zephyr") return render_zephyr(msgs, add_generation_prompt, eos_text);
  if (format == "phi3" || format == "phi3-mini")
    return render_phi3(format, tmpl, msgs, add_generation_prompt, bos_text, eos_text);
  if (format == "phi4") return render_phi4(msgs);
  if (format == "gemma") return render_gemma(tmpl, msgs, add_generation_prompt, bos_text);
  if (format == "plain") return render_plain(msgs, add_generation_prompt);
  throw Error(ErrorKind::Argument,
              "render_chat: unknown chat format '" + format +
                  "'; the formats are chatml, llama3, llama2, mistral-v0, mistral-v1, mistral-v3, mistral-v3-tekken, "
                  "mistral-v7, zephyr, phi3, phi3-mini, phi4, gemma, plain");
}

std::string apply_chat_template(const Tokenizer& t, const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                std::string* warning) {
  const std::string& tmpl = t.chat_template();
  std::string fmt = detect_chat_template(tmpl);
  if (warning) warning->clear();
  if (fmt.empty()) {
    if (warning)
      *warning = tmpl.empty() ? "the model has no chat template (tokenizer.chat_template); using a plain "
                                "'role: content' prompt"
                              : "the model's chat template is not one wick recognises (chatml, llama3, llama2, "
                                "mistral, zephyr, phi3, phi4, gemma); using a plain 'role: content' prompt";
    return render_plain(msgs, add_generation_prompt);
  }
  const std::string bos = t.bos_id() >= 0 ? t.token_text(t.bos_id()) : "";
  const std::string eos = t.eos_id() >= 0 ? t.token_text(t.eos_id()) : "";
  std::string out = render_chat(fmt, tmpl, msgs, add_generation_prompt, bos, eos);
  // The template's leading bos_token: the tokenizer adds it when encoding, so drop it here.
  if (t.add_bos() && !bos.empty() && out.rfind(bos, 0) == 0) out.erase(0, bos.size());
  return out;
}

}  // namespace wick::llm
