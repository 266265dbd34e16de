"""Words out of tool names and prose: splitting, folding, stop words and verb synonyms.

Pure and dependency-free. The rules (stated once here, relied on by ``index``):

- ``split_words``: a name or a text is cut at every character outside ``[A-Za-z0-9]``
  (so snake_case, kebab-case, dotted and spaced names split), at lower-to-upper case
  changes (``createIssue`` -> create, issue), at the end of an upper-case run followed by
  a capitalised word (``HTTPRequest`` -> http, request) and between letters and digits
  (``v2api`` -> v, 2, api). Everything is lowercased.
- ``fold``: plural and verb-form folding, a light stemmer of our own: ``ies`` -> ``y``,
  ``sses``/``xes``/``ches``/``shes`` lose ``es``, a final ``s`` goes (not after ``s``,
  ``u`` or ``i``: "class", "status", "analysis" stay), then ``ing``/``ed`` endings go when
  at least four letters remain (``listing`` -> list, ``created`` -> creat, as does
  ``create`` via a final ``e`` drop). Words of three letters or fewer are never folded.
  Measured on the bench's tune half: no folding loses 4 points of top-5; Snowball
  (``snowballstemmer``) in its place gave -2.2 top-1 and +0.7 top-5, so no stemming
  library is a dependency.
- ``STOP_WORDS``: English function words and filler a model puts in a request ("please",
  "the", "my"); dropped from queries and documents alike.
- ``SYNONYMS``: groups of verbs, nouns and short forms that tool names and requests use
  interchangeably (get/fetch/read/retrieve, list/show/enumerate, create/add/new/make,
  row/record/entry, folder/directory, org/organization, ...). A query word in a group
  also searches the group's other words, at ``SYNONYM_WEIGHT``. Measured on the tune
  half: without synonyms, top-1 -6.2 points and top-5 -3.6. The domain groups (software
  dev, browsers, files, data, messaging, docs, clusters, maps, charts, research: ticket
  and defect for issue, load and visit for navigate, db, k8s, env and md as short forms)
  are general vocabulary of what MCP servers do, not words picked from the bench's misses:
  they gave +0.7/+1.8 top-1/top-5 on tune and +1.5/+3.1 on holdout; a second, broader
  batch (cloud, CI, commerce, media, auth, trackers: most of its words are in no bench
  tool) +0.7/+0.3 on tune and +0.4/-0.4 on holdout, kept for the servers the bench lacks.
- ``PHRASES``: two-word phrases a request uses for one idea ("look up", "set up", "sign in",
  "merge request", "sea level"); ``expand_phrases`` appends their meaning to a query.
- ``VERB_CLASS``: what a verb does to data (read, create, update, delete, send, run), for
  the index's verb agreement between a query and a tool's name. The verbs of the domain groups are in
  it too (give and grab read; mark, move and rewrite update; tell and announce send):
  +0/+0.4 top-1/top-5 on tune, +0.8/+0.8 on holdout.
"""

from __future__ import annotations

import re
from itertools import pairwise

__all__ = ["PHRASES", "STOP_WORDS", "SYNONYMS", "SYNONYM_WEIGHT", "expand_phrases", "fold", "split_words", "terms"]

_WORD = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")
"""One word: an upper-case run before a capitalised word, a (capitalised) lower-case run, an
upper-case run, or digits. One ``findall`` does every split rule at once."""

STOP_WORDS: frozenset[str] = frozenset(
    [
        "a",
        "an",
        "the",
        "and",
        "or",
        "but",
        "if",
        "then",
        "else",
        "of",
        "to",
        "in",
        "at",
        "by",
        "for",
        "from",
        "with",
        "into",
        "onto",
        "about",
        "as",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "am",
        "do",
        "does",
        "did",
        "doing",
        "have",
        "has",
        "had",
        "having",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "here",
        "i",
        "me",
        "my",
        "mine",
        "we",
        "us",
        "our",
        "you",
        "your",
        "yours",
        "he",
        "she",
        "they",
        "them",
        "their",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "when",
        "where",
        "why",
        "how",
        "can",
        "could",
        "would",
        "should",
        "shall",
        "will",
        "may",
        "might",
        "must",
        "please",
        "just",
        "some",
        "any",
        "each",
        "every",
        "not",
        "only",
        "also",
        "so",
        "such",
        "than",
        "too",
        "very",
        "again",
        "further",
        "once",
        "want",
        "need",
        "needs",
        "like",
        "let",
        "lets",
        "thing",
        "things",
        "something",
        "stuff",
        "via",
        "using",
        "all",
    ]
)
"""Dropped from queries and documents. "all" is one: a list already is of all."""

SYNONYM_WEIGHT = 0.5
"""A synonym counts this much of the word it stands for (measured with the domain groups:
0.4 -> 0.5 gave +0.8/+0.4 top-1/top-5 on tune, +1.9/+0.8 on holdout; 0.6-0.7 lost)."""

_GROUPS: tuple[tuple[str, ...], ...] = (
    ("get", "fetch", "read", "retrieve", "obtain", "load", "view", "lookup", "see", "check"),
    ("list", "show", "enumerate", "browse", "display"),
    ("create", "add", "new", "make", "insert", "open", "start", "generate", "register"),
    ("delete", "remove", "erase", "drop", "destroy", "trash", "purge", "discard"),
    ("update", "edit", "modify", "change", "patch", "alter", "rename", "set", "rewrite", "revise"),
    ("search", "find", "query", "lookup", "look", "locate", "filter"),
    ("run", "execute", "exec", "invoke", "launch", "trigger"),
    ("write", "save", "store", "put", "persist"),
    ("send", "post", "publish"),
    ("navigate", "go", "visit", "goto", "open", "browse"),
    ("close", "shut", "stop", "end"),
    ("directory", "folder", "dir"),
    ("repository", "repo"),
    ("pull", "pr", "merge"),
    ("issue", "ticket", "bug"),
    ("message", "chat", "msg"),
    ("screenshot", "capture", "snapshot"),
    ("click", "press", "tap"),
    ("type", "fill", "enter", "input"),
    # nouns and short forms common in tool names and in requests
    ("record", "row", "entry", "item"),
    ("field", "column", "property", "attribute"),
    ("organization", "org", "organisation", "workspace"),
    ("document", "doc", "page", "note"),
    ("image", "picture", "photo", "img", "logo"),
    ("chart", "graph", "plot", "diagram", "visualize", "draw"),
    ("email", "mail"),
    ("user", "people", "member", "person", "account", "profile"),
    ("kill", "terminate", "abort", "cancel", "stop", "end"),
    ("url", "link", "site", "website", "web", "webpage"),
    ("log", "logs", "output", "print", "printed"),
    ("documentation", "docs", "doc", "reference", "manual"),
    ("table", "spreadsheet", "sheet"),
    ("text", "content", "body"),
    ("count", "number", "total", "many"),
    ("statistic", "stats", "usage", "metric"),
    ("duplicate", "copy", "clone"),
    ("config", "configuration", "setting", "preference", "option"),
    ("network", "request", "traffic", "http"),
    ("remember", "memory", "store", "save", "recall"),
    ("commit", "history", "change"),
    ("status", "state", "health"),
    # domain vocabulary (software, browsers, files, data, messaging, docs, clusters, maps...)
    ("give", "get", "grab"),
    ("move", "relocate", "transfer", "rename"),
    ("mark", "set", "flag", "update"),
    ("error", "exception", "crash", "failure", "problem", "incident"),
    ("issue", "defect", "problem"),
    ("comment", "reply", "remark", "feedback"),
    ("channel", "room", "conversation"),
    ("message", "dm", "direct"),
    ("navigate", "load", "visit", "go"),
    ("page", "tab", "window"),
    ("database", "db", "datastore"),
    ("collection", "table"),
    ("aggregate", "group", "summarize", "pipeline"),
    ("calculate", "compute", "math", "evaluate", "arithmetic", "calculator", "expression", "percent"),
    ("weather", "forecast", "temperature"),
    ("time", "clock", "timezone", "date"),
    ("convert", "translate", "transform"),
    ("geocode", "address", "location", "coordinate", "place"),
    ("place", "venue", "business", "restaurant", "shop", "nearby", "near"),
    ("direction", "route", "drive", "driving", "travel", "commute", "car", "transit", "walking"),
    ("elevation", "altitude", "height"),
    ("pod", "container"),
    ("deployment", "deploy", "rollout", "release"),
    ("scale", "replica", "resize"),
    ("namespace", "ns"),
    ("cluster", "kubernetes", "k8s", "kubectl"),
    ("calendar", "event", "meeting", "appointment", "schedule"),
    ("email", "inbox", "gmail"),
    ("paper", "article", "publication", "preprint", "research"),
    ("citation", "cite", "bibtex", "bibliography", "reference"),
    ("news", "headline"),
    ("scrape", "extract", "parse"),
    ("markdown", "md"),
    ("javascript", "js", "script"),
    ("environment", "env"),
    ("repository", "project"),
    ("commit", "changeset", "revision"),
    ("diff", "difference", "compare"),
    ("stage", "add"),
    ("checkout", "switch"),
    ("push", "upload"),
    ("user", "assignee", "author", "contributor", "reporter"),
    ("permission", "access", "role"),
    ("label", "tag"),
    ("transition", "status", "workflow"),
    ("worklog", "timesheet", "logged"),
    ("relation", "relationship", "link", "connection", "edge"),
    ("entity", "node", "object"),
    ("append", "add"),
    ("select", "choose", "pick", "dropdown", "option"),
    ("hover", "mouseover"),
    ("upload", "attach", "attachment"),
    ("download", "export"),
    ("wait", "sleep", "pause"),
    ("network", "endpoint", "api"),
    ("console", "javascript", "error"),
    ("performance", "trace", "profile", "perf"),
    ("sql", "query"),
    ("histogram", "distribution", "frequency"),
    ("boxplot", "spread", "quartile"),
    ("scatter", "correlation"),
    ("pie", "proportion", "share"),
    ("waterfall", "cumulative"),
    ("customer", "client", "contact", "lead"),
    ("company", "organization", "business"),
    ("deal", "opportunity"),
    ("invoice", "bill", "payment"),
    ("send", "tell", "notify", "announce"),
    ("thread", "reply", "replies"),
    ("history", "previous", "past", "earlier"),
    ("recent", "latest", "newest", "last"),
    ("size", "space", "storage", "bytes"),
    ("info", "information", "detail", "metadata"),
    ("watch", "monitor", "track", "observe"),
    ("summary", "summarize", "overview", "digest"),
    ("audio", "sound", "speech", "voice"),
    ("video", "movie", "clip"),
    ("transcript", "transcribe", "caption", "subtitle"),
    ("login", "signin", "authenticate", "auth"),
    ("password", "credential", "secret", "token"),
    ("keyboard", "key", "keystroke", "press"),
    ("scroll", "swipe"),
    ("resize", "viewport", "dimension"),
    ("cookie", "session"),
    ("dialog", "alert", "popup", "modal", "prompt", "confirm"),
    ("element", "selector", "locator", "dom"),
    ("accessibility", "aria", "a11y", "tree"),
    ("generate", "produce", "render"),
    ("bucket", "blob", "s3"),
    ("function", "lambda", "serverless"),
    ("instance", "vm", "machine", "host"),
    ("volume", "disk"),
    ("service", "svc"),
    ("metric", "monitoring", "telemetry"),
    ("alert", "alarm", "notification"),
    ("incident", "outage"),
    ("member", "participant", "attendee"),
    ("task", "todo", "chore"),
    ("sprint", "iteration", "cycle"),
    ("epic", "story"),
    ("version", "release", "tag"),
    ("library", "package", "module", "dependency", "lib"),
    ("build", "compile"),
    ("pipeline", "workflow", "job", "ci"),
    ("lint", "format", "style"),
    ("vulnerability", "cve", "security", "advisory"),
    ("order", "purchase", "transaction"),
    ("payment", "charge", "refund"),
    ("subscription", "plan"),
    ("product", "sku", "catalog"),
    ("price", "cost", "amount"),
    ("address", "street", "postal"),
    ("distance", "far", "mile", "km"),
    ("stock", "ticker", "quote", "market"),
    ("currency", "exchange", "forex"),
    ("schema", "structure", "definition", "ddl"),
    ("backup", "dump", "export"),
    ("restore", "recover", "rollback", "revert", "undo"),
    ("revert", "reset", "undo"),
    ("review", "approve", "approval"),
    ("assign", "assignee", "owner", "allocate"),
    ("resolve", "complete", "finish", "done", "close"),
    ("mention", "ping"),
    ("star", "favorite", "bookmark"),
    ("fork", "copy"),
    ("upload", "import", "ingest"),
    ("reaction", "emoji", "react"),
    ("thread", "conversation", "discussion"),
    ("vector", "embedding", "semantic", "similarity"),
    ("keyword", "term", "phrase"),
    ("disk", "file", "filesystem"),
    ("called", "named", "name", "titled"),
    ("box", "field", "input", "textbox"),
    ("visual", "screenshot", "appearance"),
    ("modified", "changed", "uncommitted", "status"),
    ("many", "multiple", "several", "bulk", "batch"),
    ("wiki", "confluence", "kb"),
    ("crm", "hubspot", "salesforce"),
)


PHRASES: dict[tuple[str, str], str] = {
    ("look", "up"): "lookup search",
    ("set", "up"): "create",
    ("spin", "up"): "create start",
    ("sign", "in"): "login",
    ("log", "in"): "login",
    ("sign", "up"): "register",
    ("log", "out"): "logout",
    ("sign", "out"): "logout",
    ("merge", "request"): "pull request",
    ("sea", "level"): "elevation",
    ("time", "zone"): "timezone",
    ("web", "page"): "webpage",
    ("to", "do"): "todo",
    ("check", "out"): "checkout",
    ("clean", "up"): "cleanup",
    ("shut", "down"): "stop",
    ("tear", "down"): "delete",
    ("write", "down"): "save",
    ("jot", "down"): "save",
    ("note", "down"): "save",
    ("find", "out"): "get",
    ("go", "back"): "back",
    ("back", "up"): "backup",
    ("roll", "back"): "rollback",
    ("close", "out"): "close",
    ("fill", "in"): "fill",
    ("fill", "out"): "fill",
    ("pull", "up"): "get",
    ("figure", "out"): "get",
}
"""Two-word phrases (adjacent query words) -> the words they mean; added to the query."""


def expand_phrases(text: str) -> str:
    """``text`` with the words of the ``PHRASES`` it has appended."""
    words = split_words(text)
    extra = [PHRASES[pair] for pair in pairwise(words) if pair in PHRASES]
    return f"{text} {' '.join(extra)}" if extra else text


def _fold_raw(word: str) -> str:
    if len(word) <= 3 or word.isdigit():
        return word
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith(("sses", "xes", "ches", "shes")):
        word = word[:-2]
    elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
        word = word[:-1]
    if word.endswith("ing") and len(word) >= 7:
        word = word[:-3]
    elif word.endswith("ed") and len(word) >= 6:
        word = word[:-2]
    if word.endswith("e") and len(word) >= 5:
        word = word[:-1]
    return word


class _FoldCache(dict[str, str]):
    """word -> folded word; a dict lookup is cheaper than an ``lru_cache`` call, and indexing
    calls ``fold`` a million times for 10,000 tools. Emptied when it gets big."""

    def __missing__(self, word: str) -> str:
        if len(self) >= _FOLD_CACHE_SIZE:
            self.clear()
        folded = self[word] = _fold_raw(word)
        return folded


_FOLD_CACHE_SIZE = 65_536
_folded = _FoldCache()


def fold(word: str) -> str:
    """The folded form of one lowercase word (see the module docstring)."""
    return _folded[word]


_VERB_CLASSES: dict[str, tuple[str, ...]] = {
    "read": (
        "get", "fetch", "read", "retrieve", "list", "show", "view", "search", "find", "query", "describe",
        "check", "lookup", "look", "see", "browse", "display", "download", "export", "inspect", "count",
        "what", "which", "who", "how", "is", "are", "does", "any", "give", "grab",
    ),
    "create": ("create", "add", "new", "make", "insert", "generate", "upload", "register"),
    "update": (
        "update", "edit", "modify", "change", "patch", "set", "rename", "alter", "replace", "mark", "rewrite",
        "revise", "move", "relocate",
    ),
    "delete": ("delete", "remove", "erase", "drop", "destroy", "trash", "purge", "discard"),
    "send": ("send", "post", "publish", "reply", "respond", "notify", "tell", "announce"),
    "run": ("run", "execute", "exec", "invoke", "launch", "trigger", "start"),
}  # fmt: skip
VERB_CLASS: dict[str, str] = {fold(w): c for c, words in _VERB_CLASSES.items() for w in words}
"""Folded verb -> what it does to data: read, create, update, delete, send or run (index's
verb agreement). Question words count as "read": a question asks to see something."""


def _build_synonyms() -> dict[str, tuple[str, ...]]:
    table: dict[str, dict[str, None]] = {}
    for group in _GROUPS:
        folded = [fold(w) for w in group]
        for word in folded:
            others = table.setdefault(word, {})
            others.update(dict.fromkeys(w for w in folded if w != word))
    return {word: tuple(others) for word, others in table.items()}


SYNONYMS: dict[str, tuple[str, ...]] = _build_synonyms()
"""Folded word -> the folded words of every group it is in, itself excluded."""


def split_words(text: str) -> list[str]:
    """Lowercase words of a name or a text (see the module docstring); no folding."""
    found: list[str] = _WORD.findall(text)
    return " ".join(found).lower().split()  # one lower() per text, not one per word


def terms(text: str) -> list[str]:
    """The index terms of a text: split, stop words dropped, folded. Order and repeats kept."""
    folded = _folded
    return [folded[w] for w in split_words(text) if w not in STOP_WORDS]
