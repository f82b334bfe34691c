"""A generated maintenance corpus with fault codes, model numbers and quantities, for routing.

``generate(n_machines=40, seed=0)`` returns ``(docs, questions)``: for each
machine model (``FANUC-0iMD``-like ids) a handful of fault documents (codes
like ``SV0432``), each naming its code, the model, a measured quantity with
its unit (``85℃``, ``0.3MPa``, ``1500 rpm``) and a repair in plain words
drawn from a shared vocabulary, so that plain words alone rarely single out
a document. ``questions`` are ``(question, doc_id, kind)`` with ``kind``
the class a router should give it:

- ``code``: the fault code alone, or the code with the model (``SV0432``,
  ``FANUC-0iMD SV0432``);
- ``numeric``: the part and the quantity with its unit (``spindle 85℃``);
- ``natural``: the symptom and the repair in other words than the document's
  (synonyms), English or Chinese;
- ``mixed``: a sentence naming the code among natural words.

``hard=True`` (the default) makes the set look more like a real alarm
manual, where exact tokens are needed and partial matches mislead:

- **near codes**: a machine's alarms come in families (``SV0432``,
  ``SV0433``, ``SV0437``, ``SP0432``): codes that differ by one character
  from other documents' codes;
- **documents that cite many codes**: each fault document names two to four
  neighbouring alarms to check if it returns, and each machine has an alarm
  list (one line per alarm, never the answer to a question);
- **shared quantities**: thresholds come from a few standard values
  (``85℃``, ``0.5MPa``, ``24V``, ...) that many documents share; a
  part and a quantity still single out one document.

``hard=False`` is the earlier, easier set (unique random codes and values).
"""

from __future__ import annotations

import random

__all__ = ["generate"]

_PARTS = [
    ("spindle", "主轴"), ("servo amplifier", "伺服放大器"), ("coolant pump", "冷却泵"),
    ("hydraulic unit", "液压站"), ("tool changer", "换刀装置"), ("ball screw", "滚珠丝杠"),
    ("encoder", "编码器"), ("lubrication pump", "润滑泵"), ("fan motor", "风扇电机"),
    ("power supply", "电源模块"),
]  # fmt: skip
_SYMPTOMS = [
    ("overheats", "runs hot", "过热"), ("vibrates", "shakes", "振动"),
    ("loses pressure", "pressure drops", "压力不足"), ("makes noise", "sounds loud", "异响"),
    ("stops", "halts", "停机"), ("leaks oil", "drips oil", "漏油"),
]  # fmt: skip
_REPAIRS = [
    ("replace the bearing", "swap the bearing", "更换轴承"),
    ("clean the filter", "wash the filter", "清洗滤网"),
    ("tighten the connector", "secure the plug", "紧固接头"),
    ("refill the oil", "top up the lubricant", "加注润滑油"),
    ("reset the parameter", "restore the setting", "复位参数"),
]  # fmt: skip
_UNITS = [("℃", 40, 120, 0), ("MPa", 1, 9, 1), ("rpm", 500, 9000, -2), ("V", 12, 400, 0)]
_SERIES = ["0iMD", "0iTF", "0iMF", "31iB", "30iB", "35iB", "0iTD", "32iB"]


def _quantity(rng: random.Random) -> str:
    unit, lo, hi, digits = rng.choice(_UNITS)
    value = rng.uniform(lo, hi)
    if unit == "MPa":
        return f"{value / 10:.1f}{unit}"
    return f"{round(value, digits):.0f}{unit}" if digits <= 0 else f"{value:.1f}{unit}"


_STANDARD = ["85℃", "60℃", "70℃", "100℃", "0.5MPa", "0.3MPa", "0.6MPa", "24V", "200V",
             "1500rpm", "3000rpm", "6000rpm"]  # fmt: skip
_PREFIXES = ["SV", "SP", "OT", "PS", "AL"]


def _distance(a: str, b: str) -> int:
    """Characters that differ between two codes of one length."""
    return sum(x != y for x, y in zip(a, b, strict=True)) if len(a) == len(b) else len(a)


def _near(code: str, rng: random.Random) -> str:
    """``code`` with one character changed: a digit, or the prefix's second letter."""
    i = rng.randrange(len(code))
    if i < 2:
        others = [p for p in _PREFIXES if p != code[:2]]
        return rng.choice(others) + code[2:]
    digit = rng.choice([d for d in "0123456789" if d != code[i]])
    return code[:i] + digit + code[i + 1 :]


def generate(
    n_machines: int = 40, seed: int = 0, *, hard: bool = True
) -> tuple[list[dict], list[tuple]]:
    """Documents and ``(question, doc_id, kind)`` questions (see the module docstring)."""
    if hard:
        return _generate_hard(n_machines, seed)
    rng = random.Random(seed)
    docs: list[dict] = []
    questions: list[tuple] = []
    codes: set[str] = set()
    models: set[str] = set()
    for _ in range(n_machines):
        while True:
            model = f"FANUC-{rng.choice(_SERIES)}-{rng.randint(10, 99)}"
            if model not in models:
                models.add(model)
                break
        for _ in range(rng.randint(3, 6)):
            while True:
                code = f"{rng.choice(['SV', 'OT', 'SP', 'PS', 'AL'])}{rng.randint(0, 9999):04d}"
                if code not in codes:
                    codes.add(code)
                    break
            part, part_zh = rng.choice(_PARTS)
            sym, sym_alt, sym_zh = rng.choice(_SYMPTOMS)
            rep, rep_alt, rep_zh = rng.choice(_REPAIRS)
            qty = _quantity(rng)
            doc_id = f"{model}-{code}"
            text = (
                f"Alarm {code} on {model}: the {part} {sym} when the reading reaches {qty}. "
                f"Technicians should {rep} and check the {part} again. "
                f"报警 {code}（{model}）：{part_zh}{sym_zh}，读数 {qty}。处理：{rep_zh}。"
            )
            docs.append({"id": doc_id, "text": text})
            questions += _questions(
                doc_id, code, model, part, qty, sym_alt, rep_alt, (part_zh, sym_zh, rep_zh)
            )
    return docs, questions


def _questions(
    doc_id: str, code: str, model: str, part: str, qty: str, sym_alt: str, rep_alt: str,
    zh: tuple[str, str, str],
) -> list[tuple[str, str, str]]:  # fmt: skip
    """The six questions on one fault document: two code, one numeric, two natural, one mixed."""
    part_zh, sym_zh, rep_zh = zh
    return [
        (code, doc_id, "code"),
        (f"{model} {code}", doc_id, "code"),
        (f"{part} {qty}", doc_id, "numeric"),
        (f"why does the {part} {sym_alt} and how do I {rep_alt}", doc_id, "natural"),
        (f"{part_zh}{sym_zh}怎么{rep_zh}", doc_id, "natural"),
        (f"what should a technician do when the {part} shows alarm {code}", doc_id, "mixed"),
    ]


def _generate_hard(n_machines: int, seed: int) -> tuple[list[dict], list[tuple]]:
    """The ``hard=True`` set: near codes, documents citing many codes, shared quantities."""
    rng = random.Random(seed)
    docs: list[dict] = []
    questions: list[tuple] = []
    codes: set[str] = set()
    models: set[str] = set()
    pairs: set[tuple[str, str]] = set()
    family: list[str] = []  # the codes so far: new ones are drawn near them
    for _ in range(n_machines):
        while True:
            model = f"FANUC-{rng.choice(_SERIES)}-{rng.randint(10, 99)}"
            if model not in models:
                models.add(model)
                break
        mine: list[tuple[str, str, str, str, str, str, str, str]] = []
        for _ in range(rng.randint(3, 6)):
            while True:
                if family and rng.random() < 0.8:
                    code = _near(rng.choice(family), rng)
                else:
                    code = f"{rng.choice(_PREFIXES)}{rng.randint(0, 9999):04d}"
                if code not in codes:
                    codes.add(code)
                    family.append(code)
                    break
            part, part_zh = rng.choice(_PARTS)
            for _ in range(20):  # a standard value the part does not yet have
                qty = rng.choice(_STANDARD)
                if (part, qty) not in pairs:
                    break
            else:
                qty = _quantity(rng)
            pairs.add((part, qty))
            sym, sym_alt, sym_zh = rng.choice(_SYMPTOMS)
            rep, rep_alt, rep_zh = rng.choice(_REPAIRS)
            mine.append((code, part, part_zh, qty, sym, sym_zh, rep, rep_zh))
            doc_id = f"{model}-{code}"
            near = [c for c in family if c != code and _distance(c, code) == 1]
            cited = rng.sample(near, min(len(near), rng.randint(2, 4)))
            while len(cited) < 2:  # always some neighbours, even before the family has them
                cited.append(_near(code, rng))
            also = ", ".join(cited)
            text = (
                f"Alarm {code} on {model}: the {part} {sym} when the reading reaches {qty}. "
                f"Technicians should {rep} and check the {part} again. If the alarm returns, "
                f"also check alarms {also}. "
                f"报警 {code}（{model}）：{part_zh}{sym_zh}，读数 {qty}。处理：{rep_zh}。"
                f"若再次报警，检查 {also}。"
            )
            docs.append({"id": doc_id, "text": text})
            questions += _questions(
                doc_id, code, model, part, qty, sym_alt, rep_alt, (part_zh, sym_zh, rep_zh)
            )
        lines = "; ".join(f"{c} {p} {s} at {q}" for c, p, _, q, s, _, _, _ in mine)
        docs.append({"id": f"{model}-alarm-list", "text": f"Alarm list of {model}: {lines}."})
    return docs, questions
