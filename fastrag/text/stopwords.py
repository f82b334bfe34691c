"""The one stop-word list, and the Chinese question phrases.

Every stage that asks "is this word content?" uses these: the BM25
tokenizer's default stop words (:class:`~fastrag.text.tokenize.Tokenizer`),
query rewriting (:mod:`fastrag.retrieve.rewrite`), the content terms of the
extractive answerer and of the faithfulness and conflict checks
(:mod:`fastrag.text.terms`).

- :data:`ENGLISH_STOPWORDS`: function words (articles, pronouns, auxiliary
  verbs, prepositions) and the words that make a question a question (how,
  what, when, please, tell, ...). Measured against Lucene's 33-word list on
  SciFact (BM25 nDCG@10 0.6277 against 0.6284; hybrid 0.6786 against 0.6774)
  and CMRC 2018 (0.9908 both): the same ranking, and one list for every
  stage instead of three.
- :data:`CHINESE_STOP_CHARS` and :data:`CHINESE_STOP_BIGRAMS`: function
  characters (的 了 吗 ...) and function bigrams (需要 时候 没有); as BM25 stop
  tokens they drop those unigrams and bigrams only (CMRC 2018: 0.9909
  against 0.9908).
- :data:`CHINESE_QUESTION_PHRASES`: 怎么, 多少, 几点, 什么时候, ... removed
  from a question before its terms are taken (so no bigram spans them) and
  from the keyword query by the rewriter.
"""

from __future__ import annotations

import re

__all__ = [
    "CHINESE_QUESTION_PHRASES",
    "CHINESE_STOP_BIGRAMS",
    "CHINESE_STOP_CHARS",
    "ENGLISH_STOPWORDS",
    "STOPWORDS",
]

ENGLISH_STOPWORDS: frozenset[str] = frozenset(
    """a about above after again all am an and any are as at be been before being below
    between both but by can could did do does doing down during each few for from further
    had has have having he her here hers him his how i if in into is it its itself just
    me more most my no nor not now of off on once only or other our ours out over own
    same she should so some such than that the their theirs them then there these they
    this those through to too under until up us very was we were what when where which
    while who whom why will with would you your yours many much get got please tell""".split()
)
"""English function and question words (lower case)."""

CHINESE_STOP_CHARS: frozenset[str] = frozenset("的了吗呢吧啊么什怎哪几谁何是个这那要在")
"""Chinese function characters: never content, alone or in a bigram."""

CHINESE_STOP_BIGRAMS: frozenset[str] = frozenset({"需要", "时候", "没有"})
"""Chinese function bigrams made of content characters."""

CHINESE_QUESTION_PHRASES = re.compile(
    "请问|多长时间|多长|多久|多少|几点|几天|几个|几次|什么时候|什么|怎么样|怎么|怎样|如何|为什么"
    "|为何|是否|能否|可否|可以|有没有|哪些|哪里|哪个|吗|呢|吧|？"
)
"""Chinese question phrases (longest first where one contains another)."""

STOPWORDS: tuple[str, ...] = tuple(
    sorted(ENGLISH_STOPWORDS | CHINESE_STOP_CHARS | CHINESE_STOP_BIGRAMS)
)
"""Every stop token: the BM25 tokenizer's default (``stopwords="default"``)."""
