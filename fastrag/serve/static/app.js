// fastrag page: ask a question, show the retrieved chunks, then the cited answer (streamed).
"use strict";

const STRINGS = {
  en: {
    tagline: "Answers from your knowledge base, with their sources",
    kb: "Knowledge base", placeholder: "Ask a question…", ask: "Ask", key: "API key", save: "Save",
    sources: "Retrieved chunks", answer: "Answer", retrieving: "Searching the knowledge base…",
    answering: "Writing the answer…", done: "Done", needkey: "This server needs an API key.",
    notfound: "Not found: the knowledge base does not contain an answer to this question.",
    nochunks: "No chunk matched the question.", confidence: "confidence", faithfulness: "faithfulness",
    score: "score", error: "Error", lang: "中文",
  },
  zh: {
    tagline: "基于知识库的回答，附带出处",
    kb: "知识库", placeholder: "请输入问题…", ask: "提问", key: "API 密钥", save: "保存",
    sources: "检索到的片段", answer: "回答", retrieving: "正在检索知识库…",
    answering: "正在生成回答…", done: "完成", needkey: "此服务需要 API 密钥。",
    notfound: "未找到：知识库中没有该问题的答案。",
    nochunks: "没有与问题匹配的片段。", confidence: "置信度", faithfulness: "忠实度",
    score: "得分", error: "错误", lang: "English",
  },
};

const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
// The first of ?lang=, the saved choice and the browser's language that names a language of
// STRINGS itself (Object.hasOwn: "__proto__" or "toString" are not languages), else English.
const DEFAULT_LANG = "en";
let lang = [
  params.get("lang"), localStorage.getItem("fastrag.lang"),
  (navigator.language || "").toLowerCase().startsWith("zh") ? "zh" : DEFAULT_LANG,
].find((l) => typeof l === "string" && Object.hasOwn(STRINGS, l)) || DEFAULT_LANG;

function t(name) { return STRINGS[lang][name]; }

function applyLanguage() {
  document.documentElement.lang = lang === "zh" ? "zh-CN" : "en";
  document.querySelectorAll("[data-i18n]").forEach((el) => { el.textContent = t(el.dataset.i18n); });
  document.querySelectorAll("[data-i18n-placeholder]").forEach((el) => { el.placeholder = t(el.dataset.i18nPlaceholder); });
  $("lang").textContent = t("lang");
}

function headers() {
  const h = { "Content-Type": "application/json" };
  const key = localStorage.getItem("fastrag.key");
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function setStatus(state, text) {
  const el = $("status");
  el.dataset.state = state;
  el.textContent = text || "";
}

async function loadKbs() {
  const r = await fetch("/v1/kbs", { headers: headers() });
  if (r.status === 401) { $("keybox").hidden = false; setStatus("error", t("needkey")); return; }
  const body = await r.json();
  const select = $("kb");
  select.textContent = "";
  for (const kb of body.kbs) {
    const opt = document.createElement("option");
    opt.value = kb.name;
    opt.textContent = `${kb.name} (${kb.chunks})`;
    select.appendChild(opt);
  }
}

function preview(text, n) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > n ? flat.slice(0, n - 1) + "…" : flat;
}

function renderHits(hits) {
  const list = $("chunks");
  list.textContent = "";
  $("sources").hidden = false;
  if (!hits.length) {
    const li = document.createElement("li");
    li.className = "chunk empty";
    li.textContent = t("nochunks");
    list.appendChild(li);
    return;
  }
  hits.forEach((hit, i) => {
    const n = i + 1;
    const meta = hit.metadata || {};
    const li = document.createElement("li");
    li.className = "chunk";
    li.id = `chunk-${n}`;
    li.dataset.marker = String(n);
    li.dataset.chunkId = String(hit.chunk_id);
    const head = document.createElement("div");
    head.className = "head";
    const add = (cls, text) => { const s = document.createElement("span"); s.className = cls; s.textContent = text; head.appendChild(s); };
    add("marker", `[${n}]`);
    add("title", meta.title || hit.doc_id);
    add("source", meta.source || hit.doc_id);
    add("score", `${t("score")} ${Number(hit.score).toFixed(3)}`);
    const p = document.createElement("p");
    p.className = "preview";
    p.textContent = preview(hit.text, 240);
    li.append(head, p);
    list.appendChild(li);
  });
}

// The answer text with every [n] that names a shown chunk turned into a link to it.
function renderAnswer(text, nHits) {
  const box = $("answer");
  box.textContent = "";
  const re = /\[(\d{1,4})\]/g;
  let last = 0, m;
  while ((m = re.exec(text)) !== null) {
    box.appendChild(document.createTextNode(text.slice(last, m.index)));
    const n = Number(m[1]);
    if (n >= 1 && n <= nHits) {
      const a = document.createElement("a");
      a.className = "cite";
      a.href = `#chunk-${n}`;
      a.dataset.marker = String(n);
      a.textContent = m[0];
      a.addEventListener("click", () => {
        const el = $(`chunk-${n}`);
        if (el) { el.classList.add("flash"); setTimeout(() => el.classList.remove("flash"), 1200); }
      });
      box.appendChild(a);
    } else {
      box.appendChild(document.createTextNode(m[0]));
    }
    last = re.lastIndex;
  }
  box.appendChild(document.createTextNode(text.slice(last)));
}

function renderFinal(ans, nHits) {
  renderAnswer(ans.answer, nHits);
  const nf = $("notfound");
  nf.hidden = ans.found;
  nf.textContent = ans.found ? "" : t("notfound");
  const conf = ans.confidence == null ? "–" : ans.confidence.toFixed(2);
  $("meta").textContent = `${t("confidence")} ${conf} · ${t("faithfulness")} ${ans.faithfulness.toFixed(2)} · ${ans.audit_digest.slice(0, 12)}`;
  const warn = $("warnings");
  warn.textContent = "";
  for (const w of ans.warnings || []) { const li = document.createElement("li"); li.textContent = w; warn.appendChild(li); }
}

async function ask(question) {
  $("submit").disabled = true;
  $("answer-box").hidden = true;
  $("sources").hidden = true;
  $("notfound").hidden = true;
  $("answer").textContent = "";
  $("meta").textContent = "";
  setStatus("retrieving", t("retrieving"));
  let nHits = 0, text = "";
  try {
    const r = await fetch("/v1/answer", {
      method: "POST", headers: headers(),
      body: JSON.stringify({ question, kb: $("kb").value || null, stream: true }),
    });
    if (!r.ok) {
      const body = await r.json().catch(() => ({}));
      if (r.status === 401) $("keybox").hidden = false;
      throw new Error((body.error && body.error.message) || `HTTP ${r.status}`);
    }
    const reader = r.body.getReader();
    const decoder = new TextDecoder();
    let buf = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let cut;
      while ((cut = buf.indexOf("\n\n")) >= 0) {
        const raw = buf.slice(0, cut);
        buf = buf.slice(cut + 2);
        let event = "message", data = "";
        for (const line of raw.split("\n")) {
          if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        }
        const payload = JSON.parse(data);
        if (event === "hits") {
          nHits = payload.hits.length;
          renderHits(payload.hits);
          setStatus("answering", t("answering"));
        } else if (event === "delta") {
          text += payload.text;
          $("answer-box").hidden = false;
          renderAnswer(text, nHits);
        } else if (event === "answer") {
          $("answer-box").hidden = false;
          renderFinal(payload, nHits);
          setStatus("done", t("done"));
        } else if (event === "error") {
          throw new Error(payload.error.message);
        }
      }
    }
  } catch (err) {
    setStatus("error", `${t("error")}: ${err.message}`);
  } finally {
    $("submit").disabled = false;
  }
}

$("ask").addEventListener("submit", (e) => { e.preventDefault(); const q = $("question").value.trim(); if (q) ask(q); });
$("lang").addEventListener("click", () => { lang = lang === "zh" ? "en" : "zh"; localStorage.setItem("fastrag.lang", lang); applyLanguage(); });
$("savekey").addEventListener("click", () => { localStorage.setItem("fastrag.key", $("key").value); $("keybox").hidden = true; setStatus("idle", ""); loadKbs(); });
applyLanguage();
loadKbs().catch((err) => setStatus("error", `${t("error")}: ${err.message}`));
