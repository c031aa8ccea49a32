#!/usr/bin/env python3
"""Switchyard end-to-end benchmark driver (standard library only).

Run it through bench/run.sh, which installs the public tools, builds the
release binary and pins this driver (and so wrk, the upstream and the Python
clients it starts) to the client core. This script starts every server
itself, measures, and writes bench/results/latest.{md,json}. See
bench/README.md for what each figure means.
"""

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")


class BenchError(Exception):
    """A run that must not produce figures (errors, wrong replies, a server that died)."""


def log(msg):
    print("[bench %s] %s" % (time.strftime("%H:%M:%S"), msg), file=sys.stderr, flush=True)


# --------------------------------------------------------------------------
# Requests: what each protocol's caller sends.
# --------------------------------------------------------------------------


def words(n):
    return " ".join("tok%d" % i for i in range(n))


# The mock's reply is "[<protocol> <model>] you said: <text>", split into one
# stream delta per space-separated word: 4 prefix words plus the echoed ones.
PREFIX_WORDS = 4
CHAT_TEXT = "hello there, this is a small benchmark chat"  # 8 words: a small chat completion


def stream_text(deltas):
    return words(deltas - PREFIX_WORDS)


def body_openai(model, text, stream):
    b = {"model": model, "messages": [{"role": "user", "content": text}]}
    if stream:
        b["stream"] = True
    return json.dumps(b, separators=(",", ":")).encode()


def body_anthropic(model, text, stream):
    b = {"model": model, "max_tokens": 1024, "messages": [{"role": "user", "content": text}]}
    if stream:
        b["stream"] = True
    return json.dumps(b, separators=(",", ":")).encode()


def body_mcp(tool, text):
    """An MCP `tools/call` of `tool` with `text` (the mock's `echo` answers with it)."""
    return json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": {"name": tool, "arguments": {"text": text}}}).encode()


def mcp_session(port, headers):
    """Opens an MCP session on `port` as the caller of `headers`; the
    headers its messages then carry."""
    hello = json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize",
                        "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                                   "clientInfo": {"name": "bench", "version": "1"}}}).encode()
    c = RawClient(port)
    try:
        status, answer, reply, _, _ = c.post("/mcp", hello, headers)
    finally:
        c.close()
    if status != 200 or not answer.get("mcp-session-id"):
        raise BenchError("mcp: initialize answered %s: %s" % (status, reply[:300]))
    return dict(headers or {}, **{"mcp-session-id": answer["mcp-session-id"], "accept": "application/json, text/event-stream"})


def body_responses(model, text, stream, store):
    """A Responses request; `store: false` is not kept, no `store` is (OpenAI's default)."""
    b = {"model": model, "input": text}
    if not store:
        b["store"] = False
    if stream:
        b["stream"] = True
    return json.dumps(b, separators=(",", ":")).encode()


def body_bedrock(text):
    b = {"messages": [{"role": "user", "content": [{"text": text}]}]}
    return json.dumps(b, separators=(",", ":")).encode()


# Embeddings: 16 inputs of a sentence each, vectors of 1024 floats (a
# common size) from the fake, about 330 kB of JSON a reply.
EMBED_MODEL = "text-embedding-3-small"  # an embed lane, named as its wire model
EMBED_INPUTS = ["sentence %d of the corpus that a retrieval system embeds for search" % i for i in range(16)]
EMBED_DIMS = 1024


def body_openai_embed(model):
    b = {"model": model, "input": EMBED_INPUTS, "dimensions": EMBED_DIMS}
    return json.dumps(b, separators=(",", ":")).encode()


def body_cohere_embed(model):
    b = {"model": model, "texts": EMBED_INPUTS, "input_type": "search_document",
         "embedding_types": ["float"], "output_dimension": EMBED_DIMS}
    return json.dumps(b, separators=(",", ":")).encode()


OPENAI_MODEL = "gpt-4o-mini"  # lane name == wire model: byte passthrough
ANTHROPIC_MODEL = "claude-sonnet-4-5"
POOL_ALIAS = "chat-alias"  # a pool whose only member is the gpt-4o-mini lane
HELD_POOL = "stream-held"  # the same lane first, a fallback lane behind it, a first-token deadline
PREFIX_POOL = "chat-prefix"  # the pool alias with prompt-cache affinity on
MIXED_POOL = "chat-mixed"  # the lane first, an Anthropic lane behind it: two protocols
CONTINUED_POOL = "stream-continued"  # the held pool's lanes, streams continued on a break
CACHED_POOL = "chat-cached"  # the lane behind the response cache (every request after the first a hit)
GUARDED_POOL = "chat-guarded"  # the lane behind a policy of 20 regexes, request and reply
HEDGED_POOL = "stream-hedged"  # the held pool, hedged after 2 s (never late here)
TAIL_POOLS = ("tail-plain", "tail-hedged")  # two lanes on the heavy-tailed upstream, without and with hedging
HELD_POOL_CONF = """  {prefix_pool}:
    affinity: {{ prefix: 5m }}
    members: [{{ model: {openai_model} }}]
  {mixed_pool}:
    members: [{{ model: {openai_model}, weight: 1000000 }}, {{ model: {anthropic_model}, weight: 1 }}]
  {continued_pool}:
    failover: {{ stream_failure: continue }}
    members: [{{ model: {openai_model}, weight: 1000000 }}, {{ model: {openai_model}-b, weight: 1 }}]
  {pool}:
    failover: {{ first_token: 15s }}
    members: [{{ model: {openai_model}, weight: 1000 }}, {{ model: {openai_model}-b, weight: 1 }}]
  {hedged_pool}:
    failover: {{ first_token: 15s }}
    hedge: {{ after: 2s, max_extra: 10% }}
    members: [{{ model: {openai_model}, weight: 1000 }}, {{ model: {openai_model}-b, weight: 1 }}]
  {cached_pool}:
    cache: {{ ttl: 1h }}
    members: [{{ model: {openai_model} }}]
  {guarded_pool}:
    policies: [twenty]
    members: [{{ model: {openai_model} }}]
  tail-plain:
    members: [{{ model: tail-a, weight: 1000 }}, {{ model: tail-b, weight: 1 }}]
  tail-hedged:
    hedge: {{ after: p95, max_extra: 10% }}
    members: [{{ model: tail-a, weight: 1000 }}, {{ model: tail-b, weight: 1 }}]
"""


# A policy of 20 named regexes, masking both ways; none matches the bench's
# text, so the cost measured is the screening itself.
TWENTY_REGEXES = "policies:\n  twenty:\n    action: mask\n    regex:\n" + "".join(
    '      r%02d: "%s-[0-9]{6}"\n' % (n, "ABCDEFGHIJKLMNOPQRSTUVWXYZ"[n] * 3) for n in range(20))


# The setups that govern: their requests carry a virtual key.
GOVERNED_SETUPS = ("governed", "fleet", "fleet_leased", "retained", "end_users", "jwt", "receipts", "shaped", "runs")
# The end user the "end_users" setup's requests name (the operator's header).
BENCH_END_USER = "bench-user"


def key_headers(admin_port, ingress, name="bench", setup=None):
    """Mints a virtual key (a big budget and limits, in the `bench` group,
    granted case 22's MCP tool; in the "shaped" setup with the budget's
    shaping and the quotas too) on the gateway's admin port; the headers an `ingress` caller sends it in
    (and, in the "end_users" setup, the end user it names)."""
    budget, limits = {"usd": 1000000, "window": "1d"}, {"rpm": 1000000000}
    if setup == "shaped":
        budget, limits = dict(budget, **SHAPED_BUDGET), dict(limits, **SHAPED_LIMITS)
    req = urllib.request.Request(
        "http://127.0.0.1:%d/api/v1/admin/keys" % admin_port, method="POST",
        data=json.dumps({"name": name, "group": "bench", "budget": budget,
                         "limits": limits, "mcp": ["mock__echo"]}).encode(),
        headers={"authorization": "Bearer " + BENCH_ADMIN_TOKEN, "content-type": "application/json"})
    if setup == "jwt":
        # A workload's identity-provider token instead of a key (auth.jwt).
        with open(os.path.join(IDENTITY_FILES, "bench-token.txt")) as f:
            return {"authorization": "Bearer " + f.read().strip()}
    with urllib.request.urlopen(req, timeout=30) as r:
        key = json.loads(r.read())["key"]
    headers = {"x-api-key": key} if ingress == "anthropic" else {"authorization": "Bearer " + key}
    if setup == "end_users":
        headers["x-switchyard-user"] = BENCH_END_USER
    return headers


def case_request(cid):
    """The case `cid` as (title, ingress protocol, path, body), or None."""
    case = next((c for c in CASES if c[0] == cid), None)
    if case is None:
        return None
    _, title, ingress, name, bkey = case
    b = BASELINES[bkey]
    path, body = request(ingress, name, b["text"], b["stream"])
    return title, ingress, path, body


def request(protocol, model, text, stream):
    """(path, body) of a caller's request in `protocol`."""
    if protocol == "openai":
        return "/v1/chat/completions", body_openai(model, text, stream)
    if protocol == "anthropic":
        return "/v1/messages", body_anthropic(model, text, stream)
    if protocol in ("responses", "responses-stored"):
        return "/v1/responses", body_responses(model, text, stream, protocol == "responses-stored")
    if protocol == "bedrock":
        return "/model/%s/%s" % (model, "converse-stream" if stream else "converse"), body_bedrock(text)
    if protocol == "openai-embed":
        return "/v1/embeddings", body_openai_embed(model)
    if protocol == "cohere-embed":
        return "/v2/embed", body_cohere_embed(model)
    if protocol == "mcp":
        return "/mcp", body_mcp(model, text)
    raise ValueError(protocol)


# Baselines: the upstream exchange a case's lane performs, sent straight to
# the upstream (direct) and through nginx. A case's gateway figures are
# compared with the baseline of the same upstream exchange.
BASELINES = {
    "chat-openai": dict(protocol="openai", model=OPENAI_MODEL, text=CHAT_TEXT, stream=False, deltas=None),
    "chat-anthropic": dict(protocol="anthropic", model=ANTHROPIC_MODEL, text=CHAT_TEXT, stream=False, deltas=None),
    "stream64-openai": dict(protocol="openai", model=OPENAI_MODEL, text=stream_text(64), stream=True, deltas=64),
    "stream64-anthropic": dict(
        protocol="anthropic", model=ANTHROPIC_MODEL, text=stream_text(64), stream=True, deltas=64
    ),
    "stream20-openai": dict(protocol="openai", model=OPENAI_MODEL, text=stream_text(20), stream=True, deltas=20),
    # text=None: an embeddings reply is checked by its vectors, not an echo.
    "embed16-openai": dict(protocol="openai-embed", model=EMBED_MODEL, text=None, stream=False, deltas=None),
    # An MCP tool call answered by the mock's `echo` tool.
    "mcp-echo": dict(protocol="mcp", model="echo", text=CHAT_TEXT, stream=False, deltas=None),
}

# Gateway cases: (id, title, ingress protocol, name the caller uses, baseline).
CASES = [
    ("1-passthrough", "1. OpenAI → openai lane, exact wire model (byte passthrough)", "openai", OPENAI_MODEL, "chat-openai"),
    ("2-pool-alias", "2. OpenAI → openai lane via pool alias (model spliced)", "openai", POOL_ALIAS, "chat-openai"),
    ("3a-openai-to-anthropic", "3a. OpenAI → anthropic lane (cross)", "openai", ANTHROPIC_MODEL, "chat-anthropic"),
    ("3b-anthropic-to-openai", "3b. Anthropic → openai lane (cross)", "anthropic", OPENAI_MODEL, "chat-openai"),
    ("4-bedrock-to-openai", "4. Bedrock Converse → openai lane", "bedrock", OPENAI_MODEL, "chat-openai"),
    ("5-1-stream64-passthrough", "5/1. stream 64 deltas, OpenAI → openai (passthrough)", "openai", OPENAI_MODEL, "stream64-openai"),
    ("5-1-stream20-passthrough", "5/1. stream 20 deltas, OpenAI → openai (passthrough)", "openai", OPENAI_MODEL, "stream20-openai"),
    ("5-3a-stream64-openai-to-anthropic", "5/3a. stream 64, OpenAI → anthropic lane", "openai", ANTHROPIC_MODEL, "stream64-anthropic"),
    ("5-3b-stream64-anthropic-to-openai", "5/3b. stream 64, Anthropic → openai lane", "anthropic", OPENAI_MODEL, "stream64-openai"),
    ("5-4-stream64-bedrock-to-openai", "5/4. stream 64, Bedrock converse-stream → openai lane", "bedrock", OPENAI_MODEL, "stream64-openai"),
    # Governed: the same exchanges with a virtual key, a budget, rate limits and the SQLite ledger.
    ("6-governed-passthrough", "6. case 1 governed (key + budget + limits + ledger)", "openai", OPENAI_MODEL, "chat-openai"),
    ("6-governed-anthropic-to-openai", "6. case 3b governed", "anthropic", OPENAI_MODEL, "chat-openai"),
    ("6-governed-stream64", "6. case 5/1 stream 64 governed", "openai", OPENAI_MODEL, "stream64-openai"),
    # Shaped: case 6 with warnings, a downgrade with forecast, and hour/day/USD and per-model quotas, none tripping.
    ("6-shaped-passthrough", "6. case 6 with budget shaping and quotas (warn, downgrade, forecast, per-model)", "openai", OPENAI_MODEL, "chat-openai"),
    # Receipts: case 6 with each settled request's receipt hash-chained and sealed (receipts:).
    ("6-receipts-passthrough", "6. case 6 with signed, hash-chained receipts", "openai", OPENAI_MODEL, "chat-openai"),
    # Fleet: governed on PostgreSQL and Redis (loopback) instead of SQLite and in-process counters.
    ("6-fleet-passthrough", "6. case 1 governed as a fleet (PostgreSQL + Redis)", "openai", OPENAI_MODEL, "chat-openai"),
    ("6-fleet-stream64", "6. case 5/1 stream 64 governed as a fleet", "openai", OPENAI_MODEL, "stream64-openai"),
    # The fleet admitting on leased slices of the bench group's budget and rates (storage.redis.lease).
    ("6-fleet-leased-passthrough", "6. case 1 governed as a fleet on leased slices", "openai", OPENAI_MODEL, "chat-openai"),
    # Telemetry: the default (metrics and the access line on) against everything off,
    # metrics alone, and traces at a 100 % sample exported to a collector.
    ("7-quiet-passthrough", "7. case 1 without metrics", "openai", OPENAI_MODEL, "chat-openai"),
    ("7-access-line-passthrough", "7. case 1 + the access line (the default)", "openai", OPENAI_MODEL, "chat-openai"),
    ("7-traced-passthrough", "7. case 1 + traces at 100 % over OTLP", "openai", OPENAI_MODEL, "chat-openai"),
    ("7-traced-stream64", "7. case 5/1 stream 64 + traces at 100 % over OTLP", "openai", OPENAI_MODEL, "stream64-openai"),
    # TLS on the data listener (server.tls, ECDSA P-256, keep-alive connections).
    ("19-tls-passthrough", "19. case 1 over TLS (server.tls)", "openai", OPENAI_MODEL, "chat-openai"),
    ("19-tls-stream64", "19. case 5/1 stream 64 over TLS", "openai", OPENAI_MODEL, "stream64-openai"),
    # A workload's identity-provider token (auth.jwt) instead of a virtual key.
    ("20-jwt-passthrough", "20. case 6 with a JWT instead of a key (auth.jwt)", "openai", OPENAI_MODEL, "chat-openai"),
    # The console: case 6 while an operator watches (every page's API calls, each second).
    ("8-console-watched-governed", "8. case 6 governed, the console polled every second", "openai", OPENAI_MODEL, "chat-openai"),
    # Embeddings: 16 inputs, 1024-float vectors.
    ("9-embed16-passthrough", "9. embeddings, 16 inputs, OpenAI → openai embed lane (passthrough)", "openai-embed", EMBED_MODEL, "embed16-openai"),
    ("9-embed16-cohere-to-openai", "9. embeddings, 16 inputs, Cohere → openai embed lane (translated)", "cohere-embed", EMBED_MODEL, "embed16-openai"),
    ("9-governed-embed16", "9. case 9 passthrough governed", "openai-embed", EMBED_MODEL, "embed16-openai"),
    # Retention: the key's group keeps its requests' text, redacted and sealed.
    ("17-retained-chat", "17. case 6 with the group keeping redacted text (sealed, written behind)", "openai", OPENAI_MODEL, "chat-openai"),
    ("17-retained-stream64", "17. case 6 stream 64 with the group keeping redacted text", "openai", OPENAI_MODEL, "stream64-openai"),
    # End users: the request names its end user, whose own budget and rate
    # limit (the group's end-user policy) are held beside the key's.
    ("18-end-user-chat", "18. case 6 naming its end user, held on the end user's own budget and limit", "openai", OPENAI_MODEL, "chat-openai"),
    # The pre-content hold and first-token deadline on streams that do not
    # fail: a one-lane pool (nothing held) against a two-lane pool with
    # first_token: 15s (frames held until the first content), same upstream.
    ("10-stream64-one-lane-pool", "10. stream 64 via a one-lane pool (no hold)", "openai", POOL_ALIAS, "stream64-openai"),
    ("10-stream64-held", "10. stream 64 via a two-lane pool with first_token (held until content)", "openai", HELD_POOL, "stream64-openai"),
    # Prompt-cache affinity: case 2 with the prompt's head hashed and pinned.
    ("11-prefix-affinity", "11. case 2 with prompt-cache affinity (affinity.prefix)", "openai", PREFIX_POOL, "chat-openai"),
    # A pool of two protocols: the conversation-lineage check (is the body
    # signed?) runs on every plan; this body is not, so no lane is dropped.
    ("12-two-protocol-pool", "12. case 2 via a pool of an OpenAI and an Anthropic lane (lineage check)", "openai", MIXED_POOL, "chat-openai"),
    # Continuation on: a stream that never breaks, decoded and re-encoded so
    # another lane could carry it on (against case 10's one-lane pool).
    # Guardrails: a policy of 20 regexes on the request and the reply.
    ("15-guarded-chat", "15. case 2 behind a policy of 20 regexes (request and reply)", "openai", GUARDED_POOL, "chat-openai"),
    ("15-guarded-stream64", "15. stream 64 behind a policy of 20 regexes (reply screened as it streams)", "openai", GUARDED_POOL, "stream64-openai"),
    # The response cache: the same request again and again, answered from
    # the cache after the first (a hit against a routed request).
    ("16-cache-hit-chat", "16. case 2 answered from the response cache", "openai", CACHED_POOL, "chat-openai"),
    ("16-cache-hit-stream64", "16. stream 64 replayed from the response cache", "openai", CACHED_POOL, "stream64-openai"),
    # Hedging on streams that are never late: the held pool with a hedge
    # after 2 s (the race is set up, its timer never fires).
    ("14-stream64-hedged", "14. stream 64 via the held pool with hedging on (never late)", "openai", HEDGED_POOL, "stream64-openai"),
    # Stored responses: a Responses caller that says store: false, against
    # the default (kept for previous_response_id, in the open gateway's
    # in-process store).
    ("21-responses-to-openai", "21. Responses → openai lane, store: false", "responses", OPENAI_MODEL, "chat-openai"),
    ("21-responses-stored", "21. case 21 kept for previous_response_id (the default)", "responses-stored", OPENAI_MODEL, "chat-openai"),
    ("13-stream64-continued", "13. stream 64 via a pool that continues broken streams (re-encoded)", "openai", CONTINUED_POOL, "stream64-openai"),
    # MCP: a tools/call through /mcp (session, names, pins, the call task)
    # against the same call straight to the server; and governed (grant,
    # admission on the key's chain, settlement, a ledger row).
    ("22-mcp-tool-call", "22. MCP tools/call through /mcp to an HTTP server", "mcp", "mock__echo", "mcp-echo"),
    ("22-mcp-governed", "22. case 22 governed (key, limits, ledger row)", "mcp", "mock__echo", "mcp-echo"),
]

# Cases that run the same exchange as another case with something added to
# the config, and the goal for their CPU per request against it (same run).
# "extra" names a config addition below; "governed" cases send a virtual key.
VARIANTS = {
    "6-governed-passthrough": dict(of="1-passthrough", extra="governed", goal="≤ 1.15"),
    "6-governed-anthropic-to-openai": dict(of="3b-anthropic-to-openai", extra="governed", goal="≤ 1.15"),
    "6-governed-stream64": dict(of="5-1-stream64-passthrough", extra="governed", goal="≤ 1.15"),
    "6-fleet-passthrough": dict(of="6-governed-passthrough", extra="fleet", goal="≤ 1.2"),
    "6-shaped-passthrough": dict(of="6-governed-passthrough", extra="shaped", goal="≤ 1.03"),
    "6-receipts-passthrough": dict(of="6-governed-passthrough", extra="receipts", goal="≤ 1.05"),
    "6-fleet-stream64": dict(of="6-governed-stream64", extra="fleet", goal="≤ 1.2"),
    "6-fleet-leased-passthrough": dict(of="6-governed-passthrough", extra="fleet_leased", goal="≤ 1.1"),
    "7-quiet-passthrough": dict(of=None, extra="quiet"),
    "7-access-line-passthrough": dict(of="1-passthrough", extra="access_line", goal="≤ 1.10"),
    "7-traced-passthrough": dict(of="1-passthrough", extra="traced", goal="≤ 1.15"),
    "7-traced-stream64": dict(of="5-1-stream64-passthrough", extra="traced", goal="≤ 1.15"),
    "8-console-watched-governed": dict(of="6-governed-passthrough", extra="governed", watch=True, goal="≤ 1.05"),
    "9-governed-embed16": dict(of="9-embed16-passthrough", extra="governed", goal="≤ 1.15"),
    "17-retained-chat": dict(of="6-governed-passthrough", extra="retained", goal="≤ 1.15"),
    "17-retained-stream64": dict(of="6-governed-stream64", extra="retained", goal="≤ 1.15"),
    "18-end-user-chat": dict(of="6-governed-passthrough", extra="end_users", goal="≤ 1.05"),
    "19-tls-passthrough": dict(of="1-passthrough", extra="tls", goal="≤ 1.3"),
    "20-jwt-passthrough": dict(of="6-governed-passthrough", extra="jwt", goal="≤ 1.05"),
    "19-tls-stream64": dict(of="5-1-stream64-passthrough", extra="tls", goal="≤ 1.3"),
    "11-prefix-affinity": dict(of="2-pool-alias", extra=None, goal="≤ 1.05"),
    "12-two-protocol-pool": dict(of="2-pool-alias", extra=None, goal="≤ 1.02"),
    "13-stream64-continued": dict(of="10-stream64-one-lane-pool", extra=None, goal="≤ 1.5", ttfb_goal="≤ 1.05"),
    "10-stream64-held": dict(of="10-stream64-one-lane-pool", extra=None, goal="≤ 1.05", ttfb_goal="≤ 1.05"),
    "14-stream64-hedged": dict(of="10-stream64-held", extra=None, goal="≤ 1.05", ttfb_goal="≤ 1.05"),
    "15-guarded-chat": dict(of="2-pool-alias", extra=None, goal="≤ 1.15"),
    "16-cache-hit-chat": dict(of="2-pool-alias", extra=None, goal="≤ 0.5"),
    "16-cache-hit-stream64": dict(of="10-stream64-one-lane-pool", extra=None, goal="≤ 0.5"),
    "15-guarded-stream64": dict(of="10-stream64-one-lane-pool", extra=None, goal="≤ 1.15"),
    "21-responses-stored": dict(of="21-responses-to-openai", extra=None, goal="≤ 1.15"),
    "22-mcp-governed": dict(of="22-mcp-tool-call", extra="governed", goal="≤ 1.15"),
}

# What the console asks for while a page is open (the overview redraws every
# 5 s; the watcher asks for every page's data every second, a heavier load).
CONSOLE_POLLS = (
    "/api/v1/admin/history?window=1h", "/api/v1/admin/history?window=1d", "/api/v1/admin/lanes",
    "/api/v1/admin/keys?limit=100", "/api/v1/admin/groups", "/api/v1/admin/spend?by=key",
    "/api/v1/admin/requests?limit=50",
)


class ConsoleWatcher(threading.Thread):
    """Polls the admin API the way an open console does, once a second."""

    def __init__(self, admin_port):
        super().__init__(daemon=True)
        self.admin_port, self.polls, self.stopping = admin_port, 0, threading.Event()

    def cycle(self):
        """One refresh of every page's data."""
        for path in CONSOLE_POLLS:
            req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.admin_port, path),
                                         headers={"authorization": "Bearer " + BENCH_ADMIN_TOKEN})
            with urllib.request.urlopen(req, timeout=30) as r:
                r.read()
        self.polls += 1

    def cost(self, pid, cycles=20):
        """The gateway's CPU ms per refresh, measured with no traffic, and
        the ledger rows the refresh read."""
        cpu0 = cpu_seconds(pid)
        for _ in range(cycles):
            self.cycle()
        cpu_ms = (cpu_seconds(pid) - cpu0) / cycles * 1e3
        req = urllib.request.Request("http://127.0.0.1:%d/stats" % self.admin_port,
                                     headers={"authorization": "Bearer " + BENCH_ADMIN_TOKEN})
        with urllib.request.urlopen(req, timeout=30) as r:
            rows = json.loads(r.read())["governance"]["ledger"]["rows_written"]
        self.polls = 0
        return {"cpu_ms_per_refresh": cpu_ms, "ledger_rows": rows}

    def run(self):
        while not self.stopping.is_set():
            self.cycle()
            self.stopping.wait(1.0)

    def stop(self):
        self.stopping.set()
        self.join(timeout=30)
        return self.polls
# Metrics' own cost: the base case (metrics on) against the case without.
METRICS_ON_OFF = ("1-passthrough", "7-quiet-passthrough")


# --------------------------------------------------------------------------
# Processes and /proc.
# --------------------------------------------------------------------------


class Procs:
    """Every process this driver started, stopped by pid on exit."""

    def __init__(self):
        self.procs = []

    def start(self, argv, cpu=None, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, **kw):
        if cpu is not None:
            argv = ["taskset", "-c", str(cpu)] + list(argv)
        p = subprocess.Popen(argv, stdout=stdout, stderr=stderr, **kw)
        self.procs.append(p)
        return p

    def stop(self, p, sig=signal.SIGTERM, wait=5.0):
        if p.poll() is None:
            try:
                p.send_signal(sig)
                p.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        if p in self.procs:
            self.procs.remove(p)

    def stop_all(self):
        for p in list(reversed(self.procs)):
            self.stop(p, wait=2.0)


def cpu_seconds(pid):
    """utime + stime of the whole process (all threads, dead ones included)."""
    with open("/proc/%d/stat" % pid) as f:
        stat = f.read()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK


def mem_kib(pid):
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "VmHWM:")):
                name, value = line.split(":", 1)
                out[name] = int(value.split()[0])
    return out["VmRSS"], out["VmHWM"]


def core_ticks():
    """{cpu: (busy, total)} jiffies from /proc/stat (every process on the core, not just ours)."""
    out = {}
    with open("/proc/stat") as f:
        for line in f:
            if line.startswith("cpu") and line[3].isdigit():
                name, *vals = line.split()
                vals = [int(v) for v in vals[:8]]
                total = sum(vals)
                out[name[3:]] = (total - vals[3] - vals[4], total)
    return out


def core_busy(before, after, cpu):
    b0, t0 = before.get(str(cpu), (0, 0))
    b1, t1 = after.get(str(cpu), (0, 0))
    return (b1 - b0) / (t1 - t0) if t1 > t0 else None


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# Ports that speak TLS right now (the "tls" setup's gateway while it runs):
# every client here (wrk, RawClient, the health wait) reads its scheme from
# this, so a case measures the same exchange over TLS with nothing else
# changed. The bench trusts its own test certificate without checking it.
TLS_PORTS = set()
TLS_FILES = os.path.join(HERE, "..", "crates", "gateway", "tests", "fixtures", "tls-data")


def scheme(port):
    return "https" if port in TLS_PORTS else "http"


def unverified():
    import ssl
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def wait_http(port, path="/healthz", proc=None, timeout=10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise BenchError("a server on port %d exited with %s while starting" % (port, proc.returncode))
        try:
            ctx = unverified() if port in TLS_PORTS else None
            with urllib.request.urlopen("%s://127.0.0.1:%d%s" % (scheme(port), port, path), timeout=1, context=ctx) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.05)
    raise BenchError("nothing answered %s://127.0.0.1:%d%s within %.0fs" % (scheme(port), port, path, timeout))


# --------------------------------------------------------------------------
# A minimal HTTP/1.1 client over a raw socket: validation and TTFB.
# --------------------------------------------------------------------------


class RawClient:
    def __init__(self, port):
        self.port = port
        self.sock = None
        self.buf = b""

    def connect(self):
        self.sock = socket.create_connection(("127.0.0.1", self.port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.port in TLS_PORTS:
            self.sock = unverified().wrap_socket(self.sock, server_hostname="localhost")
        self.buf = b""

    def close(self):
        if self.sock:
            self.sock.close()
            self.sock = None

    def _recv(self):
        data = self.sock.recv(262144)
        if not data:
            raise BenchError("connection to port %d closed mid-response" % self.port)
        return data

    def post(self, path, body, headers=None):
        """Sends one request; returns (status, headers, body, t_first_byte_ns, t_first_body_ns) with times from send."""
        if self.sock is None:
            self.connect()
        extra = "".join("%s: %s\r\n" % kv for kv in (headers or {}).items()).encode()
        req = (
            b"POST %s HTTP/1.1\r\nhost: 127.0.0.1:%d\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%s\r\n"
            % (path.encode(), self.port, len(body), extra)
        ) + body
        t0 = time.perf_counter_ns()
        self.sock.sendall(req)
        buf = self.buf
        t_first = t_body = None
        while b"\r\n\r\n" not in buf:
            buf += self._recv()
            if t_first is None:
                t_first = time.perf_counter_ns()
        head, buf = buf.split(b"\r\n\r\n", 1)
        if buf:
            t_body = t_first
        lines = head.split(b"\r\n")
        status = int(lines[0].split(b" ")[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(b":")
            headers[k.strip().lower().decode()] = v.strip().decode()
        body_out = bytearray()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                while b"\r\n" not in buf:
                    buf += self._recv()
                    if t_body is None:
                        t_body = time.perf_counter_ns()
                size_line, buf = buf.split(b"\r\n", 1)
                size = int(size_line.split(b";")[0], 16)
                while len(buf) < size + 2:
                    buf += self._recv()
                body_out += buf[:size]
                buf = buf[size + 2 :]
                if size == 0:
                    break
        else:
            length = int(headers.get("content-length", "0"))
            while len(buf) < length:
                buf += self._recv()
                if t_body is None:
                    t_body = time.perf_counter_ns()
            body_out += buf[:length]
            buf = buf[length:]
        self.buf = buf
        if headers.get("connection", "").lower() == "close":
            self.close()
        if t_body is None:
            t_body = t_first
        return status, headers, bytes(body_out), t_first - t0, t_body - t0


def count_frames(body, headers):
    ctype = headers.get("content-type", "")
    if "amazon.eventstream" in ctype:
        n, i = 0, 0
        while i + 4 <= len(body):
            n += 1
            i += int.from_bytes(body[i : i + 4], "big")
        return n
    if "text/event-stream" in ctype:
        return sum(1 for ev in body.split(b"\n\n") if b"data:" in ev)
    return None


def validate(port, path, body, text, stream, what, headers=None):
    """One request: 200, the echoed words all present, and the frame count. Fails loudly."""
    c = RawClient(port)
    try:
        status, headers, reply, _, _ = c.post(path, body, headers)
    finally:
        c.close()
    if status != 200:
        raise BenchError("%s: status %d: %s" % (what, status, reply[:300]))
    if text is None:
        vectors = embedded(reply)
        if len(vectors) != len(EMBED_INPUTS) or any(len(v) != EMBED_DIMS for v in vectors):
            raise BenchError("%s: expected %d vectors of %d floats: %s" % (what, len(EMBED_INPUTS), EMBED_DIMS, reply[:300]))
        return {"status": status, "content_type": headers.get("content-type"), "bytes": len(reply),
                "frames": None, "lane": headers.get("x-switchyard-lane")}
    want = text.split()
    got = re.findall(rb"tok\d+", streamed_text(reply)) if stream else None
    if stream and len(got) != len(want):
        raise BenchError("%s: expected %d echoed words in the stream, found %d" % (what, len(want), len(got)))
    if not stream and want[-1].encode() not in reply:
        raise BenchError("%s: reply does not echo the message: %s" % (what, reply[:300]))
    return {
        "status": status,
        "content_type": headers.get("content-type"),
        "bytes": len(reply),
        "frames": count_frames(reply, headers) if stream else None,
        "lane": headers.get("x-switchyard-lane"),
    }


def streamed_text(reply):
    """An SSE stream's text deltas joined (a screened stream's hold-back
    cuts words across frames); other framings as they came."""
    if not reply.startswith((b"data:", b"event:")):
        return reply
    pieces = []

    def walk(value):
        if isinstance(value, dict):
            for key, inner in value.items():
                if key in ("content", "text") and isinstance(inner, str):
                    pieces.append(inner)
                else:
                    walk(inner)
        elif isinstance(value, list):
            for inner in value:
                walk(inner)

    for line in reply.split(b"\n"):
        if line.startswith(b"data: {"):
            try:
                walk(json.loads(line[6:]))
            except ValueError:
                pass
    return "".join(pieces).encode()


def embedded(reply):
    """The vectors of an OpenAI or Cohere embeddings reply."""
    body = json.loads(reply)
    if "data" in body:
        return [item["embedding"] for item in body["data"]]
    return body["embeddings"]["float"]


def percentile(values, q):
    s = sorted(values)
    if not s:
        return None
    k = (len(s) - 1) * q / 100.0
    lo, hi = int(k), min(int(k) + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def ttfb(port, path, body, n, warmup, headers=None):
    """Sequential requests on one keep-alive connection: time to the first
    response byte and to the first body byte (the first streamed frame)."""
    c = RawClient(port)
    first, frame = [], []
    try:
        for i in range(warmup + n):
            status, _, _, t_first, t_body = c.post(path, body, headers)
            if status != 200:
                raise BenchError("TTFB run on port %d: status %d" % (port, status))
            if i >= warmup:
                first.append(t_first / 1000.0)
                frame.append(t_body / 1000.0)
    finally:
        c.close()
    return {
        "n": n,
        "first_byte_us": {"p50": percentile(first, 50), "p90": percentile(first, 90), "p99": percentile(first, 99)},
        "first_frame_us": {"p50": percentile(frame, 50), "p90": percentile(frame, 90), "p99": percentile(frame, 99)},
    }


# --------------------------------------------------------------------------
# wrk.
# --------------------------------------------------------------------------


class Wrk:
    def __init__(self, tmp):
        self.tmp = tmp
        self.n = 0

    def run(self, port, path, body, conns, secs, what, check=True, headers=None):
        self.n += 1
        secs = max(1, int(round(secs)))  # wrk takes whole seconds
        body_file = os.path.join(self.tmp, "body-%d.json" % self.n)
        out_file = os.path.join(self.tmp, "wrk-%d.json" % self.n)
        with open(body_file, "wb") as f:
            f.write(body)
        env = dict(os.environ, BENCH_BODY=body_file, BENCH_OUT=out_file,
                   BENCH_HEADERS="\n".join("%s: %s" % kv for kv in (headers or {}).items()))
        argv = [
            "wrk", "-t1", "-c%d" % conns, "-d%ds" % secs, "--timeout", "5s", "--latency",
            "-s", os.path.join(HERE, "wrk_post.lua"), "%s://127.0.0.1:%d%s" % (scheme(port), port, path),
        ]
        p = subprocess.run(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=secs + 30)
        if p.returncode != 0 or not os.path.exists(out_file):
            raise BenchError("%s: wrk failed (%s):\n%s" % (what, p.returncode, p.stdout.decode(errors="replace")))
        with open(out_file) as f:
            r = json.load(f)
        errors = sum(r["errors"].values())
        if check and (errors or r["requests"] == 0):
            raise BenchError(
                "%s: wrk saw %d errors in %d requests (%s); every run must be error-free"
                % (what, errors, r["requests"], r["errors"])
            )
        r["rps"] = r["requests"] / (r["duration_us"] / 1e6)
        return r


# --------------------------------------------------------------------------
# The servers under test.
# --------------------------------------------------------------------------

NGINX_CONF = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
worker_rlimit_nofile {nofile};
events {{ worker_connections {conns}; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    upstream backend {{
        server 127.0.0.1:{upstream};
        keepalive 128;
        keepalive_requests 1000000;
    }}
    keepalive_requests 1000000;
    # Whole replies: nginx's default (buffered) proxying.
    server {{
        listen 127.0.0.1:{port_buffered};
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
    # The same two over TLS (the test certificate the gateway's tls setup
    # serves), for the TLS cases' own baseline.
    server {{
        listen 127.0.0.1:{port_tls_buffered} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
        }}
    }}
    server {{
        listen 127.0.0.1:{port_tls_stream} ssl;
        ssl_certificate {cert};
        ssl_certificate_key {key};
        ssl_protocols TLSv1.2 TLSv1.3;
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
    # Streams: unbuffered, every upstream frame relayed as it arrives.
    server {{
        listen 127.0.0.1:{port_stream};
        location / {{
            proxy_pass http://backend;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
            proxy_read_timeout 300s;
        }}
    }}
}}
"""

GATEWAY_CONF = """# Generated by bench/bench.py: every lane points at a loopback upstream over http.
listen: 127.0.0.1:{port}
admin_listen: 127.0.0.1:{admin_port}
providers:
  up-openai:    {{ protocol: openai,    base_url: "http://127.0.0.1:{upstream}" }}
  up-anthropic: {{ protocol: anthropic, base_url: "http://127.0.0.1:{upstream}" }}
  slow-openai:  {{ protocol: openai,    base_url: "http://127.0.0.1:{slow}" }}
  tail-openai:  {{ protocol: openai,    base_url: "http://127.0.0.1:{tail}" }}
models:
  # Named exactly as their wire models, so a caller naming them gets byte passthrough.
  {openai_model}: {{ provider: up-openai }}
  {anthropic_model}: {{ provider: up-anthropic }}
{embed_lane}  slow-gpt: {{ provider: slow-openai }}
  tail-a: {{ provider: tail-openai, model: tail }}
  tail-b: {{ provider: tail-openai, model: tail }}
pools:
  {pool}:
    members: [{{ model: {openai_model} }}]
{held_pool}{telemetry}
"""

# The governed cases add keys, a group budget and limits, and the SQLite ledger.
GOVERNED_EXTRA = """
auth: {{ mode: keys }}
admin: {{ tokens: [{admin_token}] }}
storage: {{ sqlite_path: "{db}" }}
rate_card:
  {openai_model}: {{ input_utok: 0.15, output_utok: 0.6 }}
  {anthropic_model}: {{ input_utok: 3, output_utok: 15 }}
{embed_rate}groups:
  bench: {{ budget: {{ usd: 1000000, window: 1mo }}, limits: {{ rpm: 1000000000, tpm: 100000000000 }} }}
"""
BENCH_ADMIN_TOKEN = "bench-admin-token-0123456789abcdef"
# A workload's token (auth.jwt) instead of a virtual key: the bench group,
# its signing key published by a static JWKS server (ensure_jwks).
JWT_EXTRA = GOVERNED_EXTRA.replace(
    "auth: {{ mode: keys }}",
    'auth: {{ mode: keys, jwt: [{{ name: bench, issuer: "https://idp.bench.example", '
    'jwks_url: "http://127.0.0.1:{jwks}/jwks-k1.json", audience: switchyard, group_claim: team }}] }}')
IDENTITY_FILES = os.path.join(HERE, "..", "crates", "gateway", "tests", "fixtures", "identity")
JWKS = {"port": None}


def ensure_jwks(procs):
    """Serves the identity fixtures' JWKS on loopback (once per run)."""
    if JWKS["port"] is None:
        port = free_port()
        proc = procs.start([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                            "--directory", IDENTITY_FILES], stderr=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
        wait_http(port, "/jwks-k1.json", proc=proc)
        JWKS["port"] = port
    return JWKS["port"]
# Retention: the same governance, the bench group keeping redacted text.
RETAINED_EXTRA = GOVERNED_EXTRA.replace(
    "  bench: {{ budget:", "  bench: {{ retention: redacted, budget:") + (
    'retention: {{ key: "%s", days: 30 }}\n' % ("5e" * 32))

# The fleet cases: the same governance on the servers run.sh starts
# (scripts/services.sh: PostgreSQL and Redis on loopback).
# End users: the bench group gives each of its end users a budget and a
# rate limit of their own (the requests name one in the operator's header).
END_USERS_EXTRA = GOVERNED_EXTRA.replace(
    "  bench: {{ budget:",
    "  bench: {{ end_users: {{ budget: {{ usd: 1000000, window: 1d }}, limits: {{ rpm: 1000000000 }} }}, budget:")

# Agent runs on and unused: the bench group sets run limits (with the
# loop breaker), and the requests name no run.
RUNS_EXTRA = GOVERNED_EXTRA.replace(
    "  bench: {{ budget:",
    "  bench: {{ runs: {{ usd: 1000000, calls: 1000000000, loop: {{ repeats: 32 }} }}, budget:")

# Shaping (issue 47): the governed setup with every budget warning at 80 %
# and 95 % and downgrading (forecast on) to a cheaper pool, and quotas of
# an hour, a day, USD a day and the bench's model a day, on the key and its
# group; all far from tripping, so the cost measured is the checks'.
SHAPED_BUDGET = {"warn": [80, 95], "on_exhaust": {"downgrade": "chat-cheap", "forecast": True}}
SHAPED_LIMITS = {"rph": 1000000000, "tpd": 1000000000000, "usd_per_day": 1000000,
                 "per_model": {OPENAI_MODEL: {"tpd": 1000000000000}}}
SHAPED_EXTRA = GOVERNED_EXTRA.replace(
    "window: 1mo }}, limits: {{ rpm: 1000000000, tpm: 100000000000 }}",
    "window: 1mo, warn: [80%, 95%], on_exhaust: {{ downgrade: chat-cheap, forecast: true }} }}, "
    "limits: {{ rpm: 1000000000, tpm: 100000000000, rph: 1000000000, tpd: 1000000000000, usd_per_day: 1000000, "
    "per_model: {{ {openai_model}: {{ tpd: 1000000000000 }} }} }}").replace(
    "{embed_rate}", "  bench-cheap: {{ input_utok: 0.015, output_utok: 0.06 }}\n{embed_rate}")
SHAPED_POOL = "  bench-cheap: { provider: up-openai, model: %s }\npools:\n  chat-cheap:\n    members: [{ model: bench-cheap }]\n" % OPENAI_MODEL

# The fleet serves its own file (`config: { locked: true }`): an unlocked
# instance serves the newest config version PostgreSQL holds, and a gateway
# started before on the same database (another port, another run) recorded
# its own, which this one would then reload into mid-measurement.
FLEET_EXTRA = GOVERNED_EXTRA.replace(
    'storage: {{ sqlite_path: "{db}" }}',
    'storage: {{ postgres_url: "{postgres}", redis_url: "{redis}" }}\nconfig: {{ locked: true }}')
# The fleet on leased slices (storage.redis.lease, its defaults written
# out): requests admit on this instance's slice of the bench group's
# budget and rates.
FLEET_LEASED_EXTRA = FLEET_EXTRA.replace(
    'redis_url: "{redis}" }}',
    'redis_url: "{redis}", redis: {{ lease: {{ ttl: 15s, share: 10%, max_usd: 1, max_requests: 10000, '
    'max_tokens: 100000000 }} }} }}')

# The gateway's telemetry in each setup. The cases run without the access
# line, as nginx runs with `access_log off`; its cost is a case of its own.
# The mock upstream also answers OTLP's POST /v1/traces.
TELEMETRY = {
    "base": "telemetry: {{ access_log: false }}",
    "quiet": "telemetry: {{ metrics: false, access_log: false }}",
    "access_line": "telemetry: {{ access_log: true }}",
    "traced": 'telemetry: {{ access_log: false, otlp_endpoint: "http://127.0.0.1:{upstream}", sample_ratio: 1.0 }}',
}
# Setups a case can run with: "open" is the base config; "before" is the
# same without a `telemetry:` key, for a binary that predates it (--before).
SETUPS = ("open", "governed", "fleet", "fleet_leased", "retained", "end_users", "jwt", "quiet", "access_line", "traced", "tls", "before",
          "receipts", "shaped", "runs")


def gateway_config(setup, tmp, port, admin_port, upstream, slow, embed=None, tail=0):
    """The gateway config of `setup` (see SETUPS). The embed lane is there
    unless `embed` is False (by default, but for "before": a binary that
    predates operations would refuse it)."""
    telemetry = "" if setup == "before" else TELEMETRY.get(setup, TELEMETRY["base"]).format(upstream=upstream)
    if embed is None:
        embed = setup != "before"
    embed_lane = "  %s: { provider: up-openai, operation: embed }\n" % EMBED_MODEL if embed else ""
    # A second lane to the same upstream, so a stream has a fallback and is
    # held until its first content (with a first-token deadline).
    if embed:
        embed_lane += "  %s-b: { provider: up-openai, model: %s }\n" % (OPENAI_MODEL, OPENAI_MODEL)
    held_pool = (HELD_POOL_CONF.format(
        pool=HELD_POOL, prefix_pool=PREFIX_POOL, mixed_pool=MIXED_POOL, continued_pool=CONTINUED_POOL,
        hedged_pool=HEDGED_POOL, guarded_pool=GUARDED_POOL, cached_pool=CACHED_POOL,
        openai_model=OPENAI_MODEL,
        anthropic_model=ANTHROPIC_MODEL) if embed else "")
    embed_rate = "  %s: { input_utok: 0.02 }\n" % EMBED_MODEL if embed else ""
    if embed:
        held_pool += TWENTY_REGEXES
        # The mock's MCP server behind /mcp (case 22; nothing else reads it).
        held_pool += 'mcp:\n  servers:\n    mock: {{ url: "http://127.0.0.1:{upstream}/mcp" }}\n'.format(upstream=upstream)
    text = GATEWAY_CONF.format(
        port=port, admin_port=admin_port, upstream=upstream, slow=slow, tail=tail, telemetry=telemetry,
        openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, pool=POOL_ALIAS, embed_lane=embed_lane,
        held_pool=held_pool,
    )
    if setup in ("governed", "receipts"):
        text += GOVERNED_EXTRA.format(
            admin_token=BENCH_ADMIN_TOKEN, db=os.path.join(tmp, "governed-%d.db" % time.monotonic_ns()),
            openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, embed_rate=embed_rate)
        if setup == "receipts":
            # "governed" with a signed, hash-chained receipt per settled request.
            text += 'receipts: {{ key: bench-receipts-secret-0123456789, path: "{path}" }}\n'.format(
                path=os.path.join(tmp, "receipts-%d.jsonl" % time.monotonic_ns()))
    elif setup == "shaped":
        text = text.replace("\npools:\n", "\n" + SHAPED_POOL, 1) + SHAPED_EXTRA.format(
            admin_token=BENCH_ADMIN_TOKEN, db=os.path.join(tmp, "shaped-%d.db" % time.monotonic_ns()),
            openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, embed_rate=embed_rate)
    elif setup == "runs":
        text += RUNS_EXTRA.format(
            admin_token=BENCH_ADMIN_TOKEN, db=os.path.join(tmp, "runs-%d.db" % time.monotonic_ns()),
            openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, embed_rate=embed_rate)
    elif setup == "end_users":
        text += END_USERS_EXTRA.format(
            admin_token=BENCH_ADMIN_TOKEN, db=os.path.join(tmp, "end-users-%d.db" % time.monotonic_ns()),
            openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, embed_rate=embed_rate)
    elif setup == "jwt":
        if JWKS["port"] is None:
            raise BenchError("the jwt setup needs its JWKS server (ensure_jwks)")
        text += JWT_EXTRA.format(
            admin_token=BENCH_ADMIN_TOKEN, db=os.path.join(tmp, "jwt-%d.db" % time.monotonic_ns()), jwks=JWKS["port"],
            openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, embed_rate=embed_rate)
    elif setup == "retained":
        text += RETAINED_EXTRA.format(
            admin_token=BENCH_ADMIN_TOKEN, db=os.path.join(tmp, "retained-%d.db" % time.monotonic_ns()),
            openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, embed_rate=embed_rate)
    elif setup in ("fleet", "fleet_leased"):
        postgres, redis = os.environ.get("BENCH_POSTGRES_URL"), os.environ.get("BENCH_REDIS_URL")
        if not (postgres and redis):
            raise BenchError("the fleet setup needs BENCH_POSTGRES_URL and BENCH_REDIS_URL (bench/run.sh starts them)")
        text += (FLEET_LEASED_EXTRA if setup == "fleet_leased" else FLEET_EXTRA).format(
            admin_token=BENCH_ADMIN_TOKEN, postgres=postgres, redis=redis,
            openai_model=OPENAI_MODEL, anthropic_model=ANTHROPIC_MODEL, embed_rate=embed_rate)
    elif setup == "tls":
        text += 'server: {{ tls: {{ cert: "{cert}", key: "{key}" }} }}\n'.format(
            cert=os.path.join(TLS_FILES, "server-a.pem"), key=os.path.join(TLS_FILES, "server-a.key"))
    elif setup not in SETUPS:
        raise BenchError("unknown setup %s (have %s)" % (setup, ", ".join(SETUPS)))
    return text


class Nginx:
    def __init__(self, procs, tmp, upstream, cpu, streams=False):
        self.dir = tempfile.mkdtemp(prefix="nginx-", dir=tmp)
        os.chmod(tmp, 0o755)
        os.chmod(self.dir, 0o755)  # the worker may run as another user
        self.port_buffered = free_port()
        self.port_stream = free_port()
        self.port_tls_buffered = free_port()
        self.port_tls_stream = free_port()
        conf = os.path.join(self.dir, "nginx.conf")
        with open(conf, "w") as f:
            f.write(
                NGINX_CONF.format(
                    tmp=self.dir, upstream=upstream, port_buffered=self.port_buffered,
                    port_stream=self.port_stream, conns=16384 if streams else 1024,
                    nofile=max(4096, nofile_limit()),
                    port_tls_buffered=self.port_tls_buffered, port_tls_stream=self.port_tls_stream,
                    cert=os.path.abspath(os.path.join(TLS_FILES, "server-a.pem")),
                    key=os.path.abspath(os.path.join(TLS_FILES, "server-a.key")),
                )
            )
        self.procs = procs
        self.master = procs.start(
            ["nginx", "-p", self.dir, "-e", os.path.join(self.dir, "nginx-error.log"), "-c", conf, "-g", "daemon off;"],
            cpu=cpu, stderr=open(os.path.join(self.dir, "stderr.log"), "wb"),
        )
        deadline = time.monotonic() + 10
        while True:
            kids = children(self.master.pid)
            if kids:
                self.worker = kids[0]
                break
            if self.master.poll() is not None or time.monotonic() > deadline:
                raise BenchError("nginx did not start: %s" % self.error_log())
            time.sleep(0.02)
        self._wait(self.port_buffered)
        self._wait(self.port_stream)

    def _wait(self, port):
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.02)
        raise BenchError("nginx is not listening on %d: %s" % (port, self.error_log()))

    def error_log(self):
        try:
            with open(os.path.join(self.dir, "nginx-error.log")) as f:
                return f.read()[-2000:]
        except OSError:
            return ""

    def port_for(self, stream, tls=False):
        if tls:
            return self.port_tls_stream if stream else self.port_tls_buffered
        return self.port_stream if stream else self.port_buffered

    def stop(self):
        self.procs.stop(self.master, sig=signal.SIGQUIT)


def nofile_limit():
    import resource

    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


# --------------------------------------------------------------------------
# Measurements.
# --------------------------------------------------------------------------


def handshakes(wrk, port, path, body, pid, opts, what, headers=None):
    """A new TLS connection per request (`Connection: close`) at c=16:
    handshakes a second and the proxy's CPU per handshake (with its request)."""
    closing = dict(headers or {}, Connection="close")
    cpu0 = cpu_seconds(pid)
    r = wrk.run(port, path, body, 16, opts.c1_secs, what, headers=closing)
    cpu = (cpu_seconds(pid) - cpu0) / max(r["requests"], 1) * 1e6
    return {"per_second": r["rps"], "cpu_us_per_handshake": cpu, "per_core_second": 1e6 / cpu if cpu else None}


def measure(wrk, port, path, body, pid, opts, what, extra_pids=(), headers=None):
    """c=64 warm-up, c=1 latency, c=64 throughput with CPU of `pid` around each run."""
    wrk.run(port, path, body, 64, opts.warmup, what + " warm-up", headers=headers)
    cpu0 = cpu_seconds(pid)
    c1 = wrk.run(port, path, body, 1, opts.c1_secs, what + " c=1", headers=headers)
    cpu1 = cpu_seconds(pid)
    extra0 = {p: cpu_seconds(p) for p in extra_pids}
    ticks0 = core_ticks()
    c64 = wrk.run(port, path, body, 64, opts.c64_secs, what + " c=64", headers=headers)
    cpu2 = cpu_seconds(pid)
    ticks1 = core_ticks()
    extra = {p: (cpu_seconds(p) - extra0[p]) / c64["requests"] * 1e6 for p in extra_pids}
    pct = c1["latency_us"]["percentiles"]
    return {
        "c1": {
            "requests": c1["requests"],
            "rps": c1["rps"],
            "p50_us": pct["50"],
            "p90_us": pct["90"],
            "p99_us": pct["99"],
            "mean_us": c1["latency_us"]["mean"],
            "cpu_us_per_req": (cpu1 - cpu0) / c1["requests"] * 1e6,
        },
        "c64": {
            "requests": c64["requests"],
            "duration_s": c64["duration_us"] / 1e6,
            "rps": c64["rps"],
            "p50_us": c64["latency_us"]["percentiles"]["50"],
            "p99_us": c64["latency_us"]["percentiles"]["99"],
            "cpu_us_per_req": (cpu2 - cpu1) / c64["requests"] * 1e6,
            "core_busy": (cpu2 - cpu1) / (c64["duration_us"] / 1e6),
            "proxy_core_total_busy": core_busy(ticks0, ticks1, opts.proxy_cpu),
            "client_core_total_busy": core_busy(ticks0, ticks1, opts.client_cpu),
        },
        "extra_cpu_us_per_req": extra,
    }


def machine():
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass

    def cmd(argv):
        try:
            return subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout.strip()
        except OSError:
            return None

    wrk_version = (cmd(["wrk", "-v"]) or "").splitlines()
    return {
        "nproc": os.cpu_count(),
        "cpu_model": model,
        "kernel": platform.release(),
        "os": platform.platform(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "loadavg_at_start": open("/proc/loadavg").read().split()[:3],
        "wrk": re.sub(r"\s*\[.*$", "", wrk_version[0]).replace("debian/", "") if wrk_version else None,
        "nginx": cmd(["nginx", "-v"]),
        "python": platform.python_version(),
        "switchyard_commit": cmd(["git", "-C", REPO, "rev-parse", "--short", "HEAD"]),
        "switchyard_tree_dirty": bool(cmd(["git", "-C", REPO, "status", "--porcelain", "--", "crates", "Cargo.toml", "Cargo.lock"])),
    }


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def run(opts):
    tmp = tempfile.mkdtemp(prefix="switchyard-bench-")
    procs = Procs()
    wrk = Wrk(tmp)
    settings = vars(opts).copy()
    # Paths are recorded relative to the repository: results are committed,
    # and no path of the machine that ran them belongs in the repository.
    for key in ("switchyard", "out", "before"):
        if isinstance(settings.get(key), str) and os.path.isabs(settings[key]):
            settings[key] = os.path.relpath(settings[key], REPO)
    results = {"machine": machine(), "settings": settings, "layout": {}, "baselines": {}, "cases": []}
    sy = opts.switchyard
    P, C = opts.proxy_cpu, opts.client_cpu
    results["layout"] = {
        "proxy_cpu": P,
        "client_cpu": C,
        "note": "gateway or nginx on the proxy core; wrk, the upstream and the Python clients on the client core",
    }
    mock_log = open(os.path.join(tmp, "mock.log"), "wb")
    try:
        # ---- 1. The upstream on its own: is it fast enough to stay out of the way?
        log("upstream check: switchyard mock-upstream alone on cpu %s, wrk on cpu %s" % (P, C))
        up_port = free_port()
        mock = procs.start([sy, "mock-upstream", "--listen", "127.0.0.1:%d" % up_port], cpu=P, stderr=mock_log)
        wait_http(up_port, proc=mock)
        check = {}
        for key in ("chat-openai", "stream64-openai"):
            b = BASELINES[key]
            path, body = request(b["protocol"], b["model"], b["text"], b["stream"])
            wrk.run(up_port, path, body, 64, opts.warmup, "upstream check warm-up")
            c0 = cpu_seconds(mock.pid)
            r = wrk.run(up_port, path, body, 64, opts.c64_secs, "upstream check %s" % key)
            cpu = cpu_seconds(mock.pid) - c0
            check[key] = {
                "rps": r["rps"],
                "cpu_us_per_req": cpu / r["requests"] * 1e6,
                "core_busy": cpu / (r["duration_us"] / 1e6),
                "capacity_rps_per_core": r["requests"] / cpu if cpu > 0 else None,
            }
            log("  %s: %.0f req/s, upstream %.1f µs CPU/req (%.0f%% of its core)"
                % (key, r["rps"], check[key]["cpu_us_per_req"], 100 * check[key]["core_busy"]))
        procs.stop(mock)
        results["upstream_check"] = check

        # ---- 2. The main layout: upstream on the client core.
        up_port = free_port()
        mock = procs.start([sy, "mock-upstream", "--listen", "127.0.0.1:%d" % up_port], cpu=C, stderr=mock_log)
        wait_http(up_port, proc=mock)
        results["upstream_rss_kib"] = mem_kib(mock.pid)[0]
        slow_port, tail_port = free_port(), free_port()
        gw_conf = os.path.join(tmp, "switchyard-bench.yaml")
        gw_port, gw_admin = free_port(), free_port()
        with open(gw_conf, "w") as f:
            f.write(gateway_config("open", tmp, gw_port, gw_admin, up_port, slow_port, tail=tail_port))
        with open(gw_conf) as fh:
            results["gateway_config"] = fh.read()
        variant_confs = {}
        ensure_jwks(procs)
        for setup in SETUPS[1:]:
            if setup in ("fleet", "fleet_leased") and not os.environ.get("BENCH_POSTGRES_URL"):
                continue  # no servers: the fleet cases say so if selected
            variant_confs[setup] = os.path.join(tmp, "switchyard-bench-%s.yaml" % setup)
            with open(variant_confs[setup], "w") as f:
                f.write(gateway_config(setup, tmp, gw_port, gw_admin, up_port, slow_port, tail=tail_port))
        results["telemetry"] = TELEMETRY
        gw_env = dict(os.environ)
        gw_env.setdefault("SWITCHYARD_LOG", opts.gateway_log_level)
        gw_stderr_path = os.path.join(tmp, "gateway.log") if opts.keep_gateway_log else os.devnull

        def start_gateway(binary, conf=gw_conf):
            gw = procs.start([binary, "serve", "--config", conf], cpu=P, env=gw_env, stderr=open(gw_stderr_path, "ab"))
            wait_http(gw_port, proc=gw)
            time.sleep(0.2)
            return gw

        def gateway_case(binary, cid, gpath, gbody, b, before=False):
            extra = "before" if before else VARIANTS.get(cid, {}).get("extra")
            governed = extra in GOVERNED_SETUPS
            if extra and extra not in variant_confs:
                raise BenchError("%s needs BENCH_POSTGRES_URL and BENCH_REDIS_URL (bench/run.sh starts them)" % cid)
            if extra == "tls":
                TLS_PORTS.add(gw_port)
            gw = start_gateway(binary, variant_confs[extra] if extra else gw_conf)
            try:
                idle_rss, _ = mem_kib(gw.pid)
                headers = None
                if governed:
                    headers = key_headers(gw_admin, "anthropic" if "anthropic" in cid else "openai", setup=extra)
                if gpath == "/mcp":
                    headers = mcp_session(gw_port, headers)
                chk = validate(gw_port, gpath, gbody, b["text"], b["stream"], cid, headers)
                watcher, refresh = None, None
                if not before and VARIANTS.get(cid, {}).get("watch"):
                    # Fill the ledger first, so the refresh reads a busy one.
                    wrk.run(gw_port, gpath, gbody, 64, opts.c64_secs, cid + " ledger fill", headers=headers)
                    time.sleep(1.5)
                    watcher = ConsoleWatcher(gw_admin)
                    refresh = watcher.cost(gw.pid)
                    watcher.start()
                g = measure(wrk, gw_port, gpath, gbody, gw.pid, opts, cid, extra_pids=(mock.pid,), headers=headers)
                if watcher:
                    g["console"] = dict(refresh, refreshes_during_runs=watcher.stop())
                g["idle_rss_kib"] = idle_rss
                g["rss_kib"], g["hwm_kib"] = mem_kib(gw.pid)
                if b["stream"]:
                    g["ttfb"] = ttfb(gw_port, gpath, gbody, opts.ttfb_n, opts.ttfb_warmup, headers)
                elif extra == "tls":
                    g["handshakes"] = handshakes(wrk, gw_port, gpath, gbody, gw.pid, opts, cid + " handshakes", headers)
                if gw.poll() is not None:
                    raise BenchError("%s: the gateway exited" % cid)
            finally:
                procs.stop(gw)
                TLS_PORTS.discard(gw_port)
            return chk, g

        for key, b in BASELINES.items():
            path, body = request(b["protocol"], b["model"], b["text"], b["stream"])
            base = {"request": {"protocol": b["protocol"], "path": path, "model": b["model"], "stream": b["stream"],
                                "deltas": b["deltas"], "body_bytes": len(body)}}
            # direct
            log("%s: direct" % key)
            base["direct_check"] = validate(up_port, path, body, b["text"], b["stream"], key + " direct")
            d = measure(wrk, up_port, path, body, mock.pid, opts, key + " direct")
            d["rss_kib"], d["hwm_kib"] = mem_kib(mock.pid)
            if b["stream"]:
                d["ttfb"] = ttfb(up_port, path, body, opts.ttfb_n, opts.ttfb_warmup)
            base["direct"] = d
            # nginx
            log("%s: nginx" % key)
            ng = Nginx(procs, tmp, up_port, P)
            try:
                nport = ng.port_for(b["stream"])
                n_idle = mem_kib(ng.worker)[0]
                base["nginx_check"] = validate(nport, path, body, b["text"], b["stream"], key + " nginx")
                n = measure(wrk, nport, path, body, ng.worker, opts, key + " nginx", extra_pids=(mock.pid,))
                n["idle_rss_kib"] = n_idle
                n["rss_kib"], n["hwm_kib"] = mem_kib(ng.worker)
                n["master_rss_kib"] = mem_kib(ng.master.pid)[0]
                if b["stream"]:
                    n["ttfb"] = ttfb(nport, path, body, opts.ttfb_n, opts.ttfb_warmup)
                tls_cases = [cid for cid, _, _, _, bkey in CASES if bkey == key and VARIANTS.get(cid, {}).get("extra") == "tls"
                             and (not opts.only or any(o in cid for o in opts.only))]
                if tls_cases:
                    # nginx terminating TLS, the TLS cases' baseline, and
                    # its handshakes (a new connection per request).
                    log("%s: nginx over TLS" % key)
                    tport = ng.port_for(b["stream"], tls=True)
                    TLS_PORTS.add(tport)
                    try:
                        validate(tport, path, body, b["text"], b["stream"], key + " nginx tls")
                        base["nginx_tls"] = measure(wrk, tport, path, body, ng.worker, opts, key + " nginx tls",
                                                    extra_pids=(mock.pid,))
                        if not b["stream"]:
                            base["nginx_tls_handshakes"] = handshakes(wrk, tport, path, body, ng.worker, opts,
                                                                      key + " nginx tls handshakes")
                    finally:
                        TLS_PORTS.discard(tport)
            finally:
                ng.stop()
            base["nginx"] = n
            results["baselines"][key] = base

            # gateway cases on this baseline, right after it
            for cid, title, ingress, name, bkey in CASES:
                if bkey != key:
                    continue
                if opts.only and not any(o in cid for o in opts.only):
                    continue
                gpath, gbody = request(ingress, name, b["text"], b["stream"])
                before = None
                # A binary from before operations serves no embeddings.
                if opts.before and cid not in VARIANTS and b["text"] is not None and gpath != "/mcp":
                    log("%s: switchyard before (%s)" % (cid, opts.before))
                    _, before = gateway_case(opts.before, cid + " before", gpath, gbody, b, before=True)
                log("%s: switchyard" % cid)
                chk, g = gateway_case(sy, cid, gpath, gbody, b)
                results["cases"].append({
                    "id": cid, "title": title, "ingress": ingress, "name": name, "baseline": key,
                    "request": {"path": gpath, "body_bytes": len(gbody), "stream": b["stream"], "deltas": b["deltas"]},
                    "check": chk, "gateway": g, "before": before,
                })

        # ---- 3. Hedging under a heavy-tailed first token.
        if opts.hedge_n > 0 and (not opts.only or any("hedg" in o or "tail" in o for o in opts.only)):
            results["hedging"] = hedging_tail(opts, procs, tmp, sy, gw_conf, gw_port, gw_admin, gw_env, tail_port, P, C)

        # ---- 4. Open streams.
        if opts.streams > 0:
            results["open_streams"] = open_streams(
                opts, procs, tmp, sy, gw_conf, variant_confs["before"], gw_port, gw_env, slow_port, P, C)

        # ---- 5. Duplex: a Responses turn over a socket and over an HTTP
        # stream, and idle sockets beside nginx proxying a WebSocket.
        if opts.duplex_turns > 0 and (not opts.only or any("duplex" in o for o in opts.only)):
            results["duplex"] = duplex(opts, procs, tmp, sy, gw_conf, gw_port, gw_env, P, C)
        procs.stop(mock)
    finally:
        procs.stop_all()
    derive(results)
    return results, tmp


TAIL_SHARE, TAIL_SECS = 0.03, 1.0


def hedging_tail(opts, procs, tmp, sy, gw_conf, gw_port, gw_admin, gw_env, tail_port, P, C):
    """Sequential streams over two lanes on one heavy-tailed upstream (3 %
    of first tokens come a second late, the rest in 5-15 ms), through a pool
    without hedging and one hedged at its p95 with at most 10 % extra
    attempts: time to first content (p50/p90/p99) and the extra attempts."""
    out = {"n": opts.hedge_n, "upstream": "bench/slow_upstream.py --tail-share %s --tail-secs %s" % (TAIL_SHARE, TAIL_SECS)}
    tail = procs.start(
        [sys.executable, os.path.join(HERE, "slow_upstream.py"), "--listen", "127.0.0.1:%d" % tail_port,
         "--interval", "0", "--frames", "4", "--tail-share", str(TAIL_SHARE), "--tail-secs", str(TAIL_SECS)],
        cpu=C, stderr=open(os.path.join(tmp, "tail.log"), "wb"),
    )
    wait_http(tail_port, proc=tail)
    # The open setup, with an admin token to read the hedge counters by.
    conf = os.path.join(tmp, "switchyard-bench-tail.yaml")
    with open(gw_conf) as src, open(conf, "w") as dst:
        dst.write(src.read() + "\nadmin: { tokens: [%s] }\n" % BENCH_ADMIN_TOKEN)
    gw = procs.start([sy, "serve", "--config", conf], cpu=P, env=gw_env, stderr=open(os.devnull, "wb"))
    try:
        wait_http(gw_port, proc=gw)
        for pool in TAIL_POOLS:
            log("hedging: %d streams through %s" % (opts.hedge_n, pool))
            path, body = request("openai", pool, "a question with a slow first token sometimes", True)
            out[pool] = ttfb(gw_port, path, body, opts.hedge_n, opts.ttfb_warmup)
        metrics = scrape(gw_admin)
        hedges = {o: metrics.get('switchyard_hedges_total{pool="tail-hedged",outcome="%s"}' % o, 0.0)
                  for o in ("primary_won", "hedge_won", "failed", "denied")}
        started = hedges["primary_won"] + hedges["hedge_won"] + hedges["failed"]
        out["hedges"] = hedges
        out["extra_attempts"] = started
        out["extra_share"] = started / float(opts.hedge_n + opts.ttfb_warmup)
        for q in ("p50", "p90", "p99"):
            out["ratio_" + q] = (out["tail-hedged"]["first_frame_us"][q]
                                 / max(out["tail-plain"]["first_frame_us"][q], 1.0))
    finally:
        procs.stop(gw)
        procs.stop(tail)
    return out


def scrape(admin_port):
    """The gateway's Prometheus counters, by series."""
    req = urllib.request.Request("http://127.0.0.1:%d/metrics" % admin_port,
                                 headers={"authorization": "Bearer " + BENCH_ADMIN_TOKEN})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
    series = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            try:
                series[name] = float(value)
            except ValueError:
                pass
    return series


def open_streams(opts, procs, tmp, sy, gw_conf, before_conf, gw_port, gw_env, slow_port, P, C):
    out = {"count": opts.streams, "upstream": "bench/slow_upstream.py (first frame at once, then one per second)"}
    slow = procs.start(
        [sys.executable, os.path.join(HERE, "slow_upstream.py"), "--listen", "127.0.0.1:%d" % slow_port,
         "--interval", "1", "--frames", "600"],
        cpu=C, stderr=open(os.path.join(tmp, "slow.log"), "wb"),
    )
    wait_http(slow_port, proc=slow)

    def hold(port, pid, what, idle):
        log("open streams: %d through %s" % (opts.streams, what))
        client = procs.start(
            [sys.executable, os.path.join(HERE, "open_streams.py"), "--target", "127.0.0.1:%d" % port,
             "--count", str(opts.streams), "--model", "slow-gpt"],
            cpu=C, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "streams.log"), "ab"),
        )
        line = client.stdout.readline()
        if not line:
            raise BenchError("open-streams client through %s died" % what)
        rep = json.loads(line)
        time.sleep(0.5)
        rss, hwm = mem_kib(pid)
        client.stdin.write(b"close\n")
        client.stdin.flush()
        client.stdout.readline()
        procs.stop(client)
        time.sleep(1.0)
        after, _ = mem_kib(pid)
        # How long RSS takes to come back under twice idle (polled each
        # second, for up to 30 s after the streams close).
        settle_s, settled = None, after
        for waited in range(1, 31):
            if settled < 2 * idle:
                settle_s = waited
                break
            time.sleep(1.0)
            settled, _ = mem_kib(pid)
        if rep["failed"]:
            raise BenchError("open streams through %s: %d of %d failed: %s" % (what, rep["failed"], opts.streams, rep["errors"]))
        return {
            "open": rep["open"], "ramp_s": rep["elapsed_s"], "idle_rss_kib": idle, "rss_open_kib": rss,
            "hwm_kib": hwm, "rss_after_close_kib": after, "rss_settled_kib": settled, "settle_s": settle_s,
            "kib_per_stream": (rss - idle) / max(rep["open"], 1),
        }

    try:
        runs = [("switchyard_before", opts.before)] if opts.before else []
        for who, binary in runs + [("switchyard", sy)]:
            conf = before_conf if who == "switchyard_before" else gw_conf
            gw = procs.start([binary, "serve", "--config", conf], cpu=P, env=gw_env, stderr=open(os.devnull, "wb"))
            wait_http(gw_port, proc=gw)
            time.sleep(0.2)
            try:
                out[who] = hold(gw_port, gw.pid, who, mem_kib(gw.pid)[0])
            finally:
                procs.stop(gw)
        ng = Nginx(procs, tmp, slow_port, P, streams=True)
        try:
            out["nginx"] = hold(ng.port_stream, ng.worker, "nginx", mem_kib(ng.worker)[0])
        finally:
            ng.stop()
    finally:
        procs.stop(slow)
    return out


NGINX_WS_CONF = """
worker_processes 1;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
worker_rlimit_nofile {nofile};
events {{ worker_connections {conns}; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/client_body;
    proxy_temp_path {tmp}/proxy;
    fastcgi_temp_path {tmp}/fastcgi;
    uwsgi_temp_path {tmp}/uwsgi;
    scgi_temp_path {tmp}/scgi;
    map $http_upgrade $connection_upgrade {{ default upgrade; '' close; }}
    # A WebSocket proxied as nginx's documentation writes it.
    server {{
        listen 127.0.0.1:{port};
        location / {{
            proxy_pass http://127.0.0.1:{upstream};
            proxy_http_version 1.1;
            proxy_set_header Upgrade $http_upgrade;
            proxy_set_header Connection $connection_upgrade;
            proxy_read_timeout 3600s;
        }}
    }}
}}
"""

# The turns compared: the Responses request of the stream20 and stream64
# baselines (16 and 60 words, so 20 and 64 text deltas), to the OpenAI lane.
DUPLEX_TURNS = (("stream20", words(16)), ("stream64", words(60)))
DUPLEX_CONNS = 8


def duplex(opts, procs, tmp, sy, gw_conf, gw_port, gw_env, P, C):
    """The same Responses turn (`gpt-4o-mini`, on the fake) over a socket
    (`response.create` on `GET /v1/responses`) and over an HTTP stream
    (`POST /v1/responses`, keep-alive), by bench/duplex.py on the client
    core with 8 connections each: the gateway's CPU per turn, read around
    the turns only (handshakes and the checked first turns are not counted),
    in alternating rounds so drift falls on both. Then N idle sockets: the
    gateway's RSS over its idle RSS, ÷ N, and the same through nginx (one
    worker) proxying the WebSocket to a second gateway on the client core
    (the nginx worker's RSS)."""
    client = os.path.join(HERE, "duplex.py")
    out = {"conns": DUPLEX_CONNS, "turns_per_round": opts.duplex_turns, "rounds": opts.duplex_rounds,
           "model": OPENAI_MODEL, "sockets": opts.duplex_sockets, "turns": {}}

    def turns(port, mode, text):
        c = procs.start(
            [sys.executable, client, "turns", "--target", "127.0.0.1:%d" % port, "--mode", mode,
             "--model", OPENAI_MODEL, "--text", text, "--conns", str(DUPLEX_CONNS), "--turns", str(opts.duplex_turns)],
            cpu=C, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "duplex.log"), "ab"),
        )
        try:
            if not c.stdout.readline():
                raise BenchError("duplex client (%s) died before its turns: see duplex.log" % mode)
            return c
        except Exception:
            procs.stop(c)
            raise

    def run_turns(pid, port, mode, text):
        c = turns(port, mode, text)
        try:
            cpu0 = cpu_seconds(pid)
            c.stdin.write(b"go\n")
            c.stdin.flush()
            line = c.stdout.readline()
            cpu = cpu_seconds(pid) - cpu0
        finally:
            procs.stop(c)
        if not line:
            raise BenchError("duplex client (%s) died during its turns" % mode)
        rep = json.loads(line)
        if rep["failed"]:
            raise BenchError("duplex %s turns: %d failed: %s" % (mode, rep["failed"], rep["errors"]))
        return rep, cpu

    gw = procs.start([sy, "serve", "--config", gw_conf], cpu=P, env=gw_env, stderr=open(os.devnull, "wb"))
    try:
        wait_http(gw_port, proc=gw)
        time.sleep(0.2)
        for name, text in DUPLEX_TURNS:
            log("duplex: %s turns over http and over a socket (%d rounds of %d)" % (name, opts.duplex_rounds, opts.duplex_turns))
            # A warm-up round of each, not counted.
            for mode in ("http", "socket"):
                run_turns(gw.pid, gw_port, mode, text)
            tot = {m: {"turns": 0, "cpu_s": 0.0, "elapsed_s": 0.0, "frames": 0.0, "rounds_us": []} for m in ("http", "socket")}
            for rnd in range(opts.duplex_rounds):
                order = ("http", "socket") if rnd % 2 == 0 else ("socket", "http")
                for mode in order:
                    rep, cpu = run_turns(gw.pid, gw_port, mode, text)
                    t = tot[mode]
                    t["turns"] += rep["turns"]
                    t["cpu_s"] += cpu
                    t["elapsed_s"] += rep["elapsed_s"]
                    t["frames"] += rep["frames_per_turn"] * rep["turns"]
                    t["rounds_us"].append(round(cpu / max(rep["turns"], 1) * 1e6, 1))
            fig = {}
            for mode, t in tot.items():
                fig[mode] = {
                    "turns": t["turns"], "cpu_us_per_turn": t["cpu_s"] / max(t["turns"], 1) * 1e6,
                    "turns_per_s": t["turns"] / max(t["elapsed_s"], 1e-9),
                    "frames_per_turn": t["frames"] / max(t["turns"], 1), "rounds_cpu_us_per_turn": t["rounds_us"],
                }
            fig["ratio"] = ratio(fig["socket"]["cpu_us_per_turn"], fig["http"]["cpu_us_per_turn"])
            out["turns"][name] = fig
            log("  %s: http %.1f µs CPU/turn, socket %.1f µs CPU/turn: %.3fx" % (
                name, fig["http"]["cpu_us_per_turn"], fig["socket"]["cpu_us_per_turn"], fig["ratio"] or 0))
        out["gateway"] = idle_sockets(procs, tmp, client, gw_port, gw.pid, opts.duplex_sockets, "switchyard", C)
    finally:
        procs.stop(gw)

    # nginx proxying the WebSocket to a second gateway on the client core.
    back_port = free_port()
    back_conf = os.path.join(tmp, "switchyard-bench-ws-backend.yaml")
    with open(gw_conf) as src, open(back_conf, "w") as dst:
        # Its own data port; the admin port is the stopped gateway's.
        dst.write(src.read().replace("listen: 127.0.0.1:%d" % gw_port, "listen: 127.0.0.1:%d" % back_port, 1))
    back = procs.start([sy, "serve", "--config", back_conf], cpu=C, env=gw_env, stderr=open(os.devnull, "wb"))
    ng_dir = tempfile.mkdtemp(prefix="nginx-ws-", dir=tmp)
    os.chmod(ng_dir, 0o755)
    ng_port = free_port()
    conf = os.path.join(ng_dir, "nginx.conf")
    with open(conf, "w") as fh:
        fh.write(NGINX_WS_CONF.format(tmp=ng_dir, upstream=back_port, port=ng_port,
                                      conns=max(1024, 4 * opts.duplex_sockets + 256), nofile=max(4096, nofile_limit())))
    master = procs.start(["nginx", "-p", ng_dir, "-e", os.path.join(ng_dir, "nginx-error.log"), "-c", conf,
                          "-g", "daemon off;"], cpu=P, stderr=open(os.path.join(ng_dir, "stderr.log"), "wb"))
    try:
        wait_http(back_port, proc=back)
        deadline = time.monotonic() + 10
        while not children(master.pid):
            if master.poll() is not None or time.monotonic() > deadline:
                raise BenchError("nginx (WebSocket) did not start")
            time.sleep(0.02)
        worker = children(master.pid)[0]
        wait_http(ng_port)
        # A turn through nginx first: the proxy carries the socket end to end.
        check, _ = run_turns(worker, ng_port, "socket", DUPLEX_TURNS[0][1])
        out["nginx_turn_check"] = check["turns"]
        out["nginx"] = idle_sockets(procs, tmp, client, ng_port, worker, opts.duplex_sockets, "nginx", C)
    finally:
        procs.stop(master, sig=signal.SIGQUIT)
        procs.stop(back)
    out["kib_per_socket_vs_nginx"] = ratio(out["gateway"]["kib_per_socket"], out["nginx"]["kib_per_socket"])
    return out


def idle_sockets(procs, tmp, client, port, pid, count, what, C):
    """`count` sockets opened through `port` and held idle: `pid`'s RSS
    over its RSS before, ÷ the sockets open."""
    log("duplex: %d idle sockets through %s" % (count, what))
    time.sleep(0.3)
    idle, _ = mem_kib(pid)
    c = procs.start([sys.executable, client, "idle", "--target", "127.0.0.1:%d" % port, "--count", str(count)],
                    cpu=C, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=open(os.path.join(tmp, "duplex.log"), "ab"))
    try:
        line = c.stdout.readline()
        if not line:
            raise BenchError("idle-socket client through %s died" % what)
        rep = json.loads(line)
        time.sleep(0.5)
        rss, hwm = mem_kib(pid)
        c.stdin.write(b"close\n")
        c.stdin.flush()
        c.stdout.readline()
    finally:
        procs.stop(c)
    if rep["failed"]:
        raise BenchError("idle sockets through %s: %d of %d failed: %s" % (what, rep["failed"], count, rep["errors"]))
    return {"open": rep["open"], "ramp_s": rep["elapsed_s"], "idle_rss_kib": idle, "rss_open_kib": rss, "hwm_kib": hwm,
            "kib_per_socket": (rss - idle) / max(rep["open"], 1)}


# --------------------------------------------------------------------------
# Derived figures and the report.
# --------------------------------------------------------------------------


def derive(results):
    for case in results["cases"]:
        base = results["baselines"][case["baseline"]]
        d, n, g = base["direct"], base["nginx"], case["gateway"]
        added = lambda x, k: x["c1"][k] - d["c1"][k]  # noqa: E731
        out = {
            "added_p50_us": added(g, "p50_us"),
            "added_p99_us": added(g, "p99_us"),
            "nginx_added_p50_us": added(n, "p50_us"),
            "nginx_added_p99_us": added(n, "p99_us"),
        }
        r = {
            "p50_vs_direct": ratio(g["c1"]["p50_us"], d["c1"]["p50_us"]),
            "p99_vs_direct": ratio(g["c1"]["p99_us"], d["c1"]["p99_us"]),
            "p50_vs_nginx": ratio(g["c1"]["p50_us"], n["c1"]["p50_us"]),
            "p99_vs_nginx": ratio(g["c1"]["p99_us"], n["c1"]["p99_us"]),
            "added_p50_vs_nginx": ratio(out["added_p50_us"], out["nginx_added_p50_us"]),
            "added_p99_vs_nginx": ratio(out["added_p99_us"], out["nginx_added_p99_us"]),
            "rps_vs_direct": ratio(g["c64"]["rps"], d["c64"]["rps"]),
            "rps_vs_nginx": ratio(g["c64"]["rps"], n["c64"]["rps"]),
            "cpu_vs_upstream": ratio(g["c64"]["cpu_us_per_req"], d["c64"]["cpu_us_per_req"]),
            "cpu_vs_nginx": ratio(g["c64"]["cpu_us_per_req"], n["c64"]["cpu_us_per_req"]),
            "cpu_c1_vs_nginx": ratio(g["c1"]["cpu_us_per_req"], n["c1"]["cpu_us_per_req"]),
            "idle_rss_vs_upstream": ratio(g["idle_rss_kib"], d["rss_kib"]),
            "idle_rss_vs_nginx": ratio(g["idle_rss_kib"], n["idle_rss_kib"]),
            "peak_rss_vs_upstream": ratio(g["hwm_kib"], d["hwm_kib"]),
            "peak_rss_vs_nginx": ratio(g["hwm_kib"], n["hwm_kib"]),
        }
        if "ttfb" in g:
            gf, df, nf = (x["ttfb"]["first_frame_us"]["p50"] for x in (g, d, n))
            out["added_ttfb_p50_us"] = gf - df
            out["nginx_added_ttfb_p50_us"] = nf - df
            r["ttfb_vs_direct"] = ratio(gf, df)
            r["ttfb_vs_nginx"] = ratio(gf, nf)
            r["added_ttfb_vs_nginx"] = ratio(out["added_ttfb_p50_us"], out["nginx_added_ttfb_p50_us"])
        nt = base.get("nginx_tls")
        if nt and VARIANTS.get(case["id"], {}).get("extra") == "tls":
            r["cpu_vs_nginx_tls"] = ratio(g["c64"]["cpu_us_per_req"], nt["c64"]["cpu_us_per_req"])
            r["rps_vs_nginx_tls"] = ratio(g["c64"]["rps"], nt["c64"]["rps"])
            hs, nhs = g.get("handshakes"), base.get("nginx_tls_handshakes")
            if hs and nhs:
                r["handshake_cpu_vs_nginx_tls"] = ratio(hs["cpu_us_per_handshake"], nhs["cpu_us_per_handshake"])
        bf = case.get("before")
        if bf:
            r["cpu_vs_before"] = ratio(g["c64"]["cpu_us_per_req"], bf["c64"]["cpu_us_per_req"])
            r["cpu_c1_vs_before"] = ratio(g["c1"]["cpu_us_per_req"], bf["c1"]["cpu_us_per_req"])
            r["p99_vs_before"] = ratio(g["c1"]["p99_us"], bf["c1"]["p99_us"])
            if "ttfb" in g and "ttfb" in bf:
                r["ttfb_vs_before"] = ratio(g["ttfb"]["first_frame_us"]["p50"], bf["ttfb"]["first_frame_us"]["p50"])
        case["added"] = out
        case["ratios"] = r
    cases = {c["id"]: c for c in results["cases"]}
    goals = []

    def goal(label, value, target):
        goals.append({"goal": label, "measured": value, "target": target})

    def cpu(cid):
        return cases[cid]["gateway"]["c64"]["cpu_us_per_req"] if cid in cases else None

    # Issue 31's targets first: the cost of a request, a translation, a
    # stream, governance, a fleet and an open stream, against nginx.
    if "1-passthrough" in cases:
        c = cases["1-passthrough"]
        goal("passthrough CPU/req ÷ nginx", c["ratios"]["cpu_vs_nginx"], "≤ 1.5")
        goal("passthrough req/s ÷ nginx", c["ratios"].get("rps_vs_nginx"), "≥ 0.7")
        goal("passthrough added p50 ÷ nginx added p50", c["ratios"]["added_p50_vs_nginx"], "≤ 1.2")
    for cid in ("3a-openai-to-anthropic", "3b-anthropic-to-openai"):
        if cid in cases:
            goal("%s CPU/req ÷ nginx" % cid, cases[cid]["ratios"]["cpu_vs_nginx"], "≤ 1.8")
    for cid, c in cases.items():
        if c["request"]["stream"]:
            target = "≤ 2.5"
            if cid == "5-1-stream64-passthrough":
                target = "≤ 1.5"
            elif cid in ("5-3a-stream64-openai-to-anthropic", "5-3b-stream64-anthropic-to-openai",
                         "5-4-stream64-bedrock-to-openai"):
                target = "≤ 2"
            goal("%s CPU/req ÷ nginx" % cid, c["ratios"]["cpu_vs_nginx"], target)
            goal("%s added TTFB ÷ nginx added TTFB" % cid, c["ratios"].get("added_ttfb_vs_nginx"), "≤ 1.2")
    if "6-fleet-passthrough" in cases and "6-governed-passthrough" in cases:
        more = (cases["6-fleet-passthrough"]["gateway"]["c1"]["p50_us"]
                - cases["6-governed-passthrough"]["gateway"]["c1"]["p50_us"])
        goal("fleet p50 at c=1 − governed p50 (µs)", more, "≤ +100")
    if "6-fleet-leased-passthrough" in cases and "6-governed-passthrough" in cases:
        more = (cases["6-fleet-leased-passthrough"]["gateway"]["c1"]["p50_us"]
                - cases["6-governed-passthrough"]["gateway"]["c1"]["p50_us"])
        goal("leased fleet p50 at c=1 − governed p50 (µs)", more, "≤ +50")
    idle = [c["gateway"]["idle_rss_kib"] / 1024 for c in cases.values()]
    if idle:
        goal("idle RSS MiB (max over cases)", max(idle), "≤ 10")
    os_ = results.get("open_streams", {}).get("switchyard")
    if os_:
        goal("RSS MiB with %d open streams" % os_["open"], os_["rss_open_kib"] / 1024, "≤ 100")
        goal("seconds until RSS < 2× idle after they close", os_.get("settle_s"), "≤ 30")
    for cid, variant in VARIANTS.items():
        of = variant["of"]
        if of and cid in cases and of in cases:
            goal("%s CPU/req ÷ %s" % (cid, of), ratio(cpu(cid), cpu(of)), variant["goal"])
            if variant.get("ttfb_goal") and "ttfb" in cases[cid]["gateway"] and "ttfb" in cases[of]["gateway"]:
                goal("%s TTFB p50 ÷ %s" % (cid, of), ratio(cases[cid]["gateway"]["ttfb"]["first_frame_us"]["p50"],
                                                          cases[of]["gateway"]["ttfb"]["first_frame_us"]["p50"]),
                     variant["ttfb_goal"])
    on, off = METRICS_ON_OFF
    if on in cases and off in cases:
        goal("metrics on (%s) CPU/req ÷ off (%s)" % (on, off), ratio(cpu(on), cpu(off)), "≤ 1.05")
    for cid, c in cases.items():
        if "added_p99_vs_nginx" in c["ratios"] and not c["request"]["stream"]:
            goal("%s added p99 (c=1) ÷ nginx's" % cid, c["ratios"]["added_p99_vs_nginx"], "≤ 2")
        if c["ratios"].get("cpu_vs_before") is not None:
            goal("%s CPU/req ÷ before" % cid, c["ratios"]["cpu_vs_before"], "≤ 1.05")
    for name, fig in results.get("duplex", {}).get("turns", {}).items():
        goal("duplex %s: socket turn CPU ÷ HTTP stream turn" % name, fig["ratio"], "≤ 1.1")
    results["goals"] = goals


def f(x, nd=0, suffix=""):
    if x is None:
        return "–"
    return ("%%.%df%%s" % nd) % (x, suffix)


def x_(r):
    return "–" if r is None else "%.2f×" % r


def busy(c64):
    return "%s / %s / %s" % (f(100 * c64["core_busy"], 0, "%"), f(100 * (c64.get("proxy_core_total_busy") or 0), 0, "%"),
                             f(100 * (c64.get("client_core_total_busy") or 0), 0, "%"))


def mib(kib):
    return None if kib is None else kib / 1024.0


def render(results):
    m = results["machine"]
    s = results["settings"]
    L = []
    L.append("# Switchyard benchmark results\n")
    L.append(
        "Machine: %s × %s, kernel %s, %s; load average at start %s. Switchyard %s%s; %s; %s.\n"
        % (m["nproc"], m["cpu_model"], m["kernel"], m["date"], " ".join(m["loadavg_at_start"]),
           m["switchyard_commit"], " (uncommitted changes)" if m["switchyard_tree_dirty"] else "", m["wrk"], m["nginx"])
    )
    L.append(
        "Layout: proxy (Switchyard or nginx) pinned to cpu %s; wrk, the upstream (`switchyard mock-upstream`) and "
        "the Python clients pinned to cpu %s. c=1 runs %ss, c=64 runs %ss (wrk -t1), TTFB over %d sequential "
        "keep-alive requests. Gateway log level `%s`. Every wrk run had zero socket errors and zero non-2xx replies (the harness stops otherwise). Ratios compare figures "
        "from this same run only: the machine is shared and noisy, so absolute numbers move between runs.\n"
        % (results["layout"]["proxy_cpu"], results["layout"]["client_cpu"], s["c1_secs"], s["c64_secs"],
           s["ttfb_n"], s["gateway_log_level"])
    )
    uc = results.get("upstream_check", {})
    if uc:
        L.append("## Upstream check (mock-upstream alone on the proxy core, wrk c=64 on the other)\n")
        L.append("| request | req/s | upstream CPU µs/req | upstream core busy | req/s per upstream core |")
        L.append("|---|---:|---:|---:|---:|")
        for k, v in uc.items():
            L.append("| %s | %s | %s | %s | %s |" % (k, f(v["rps"]), f(v["cpu_us_per_req"], 1),
                                                   f(100 * v["core_busy"], 0, "%"), f(v["capacity_rps_per_core"])))
        L.append("")

    base = results["baselines"]
    L.append("## Latency at c=1 (µs; added = minus direct on the same baseline)\n")
    L.append("| case | p50 | p99 | added p50 | added p99 | p50 ÷ direct | p50 ÷ nginx | added p50 ÷ nginx's | added p99 ÷ nginx's |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, b in base.items():
        d, n = b["direct"], b["nginx"]
        L.append("| **direct** %s | %s | %s | | | 1.00× | %s | | |" % (key, f(d["c1"]["p50_us"]), f(d["c1"]["p99_us"]),
                                                               x_(ratio(d["c1"]["p50_us"], n["c1"]["p50_us"]))))
        L.append("| **nginx** %s | %s | %s | %s | %s | %s | 1.00× | 1.00× | 1.00× |" % (
            key, f(n["c1"]["p50_us"]), f(n["c1"]["p99_us"]), f(n["c1"]["p50_us"] - d["c1"]["p50_us"]),
            f(n["c1"]["p99_us"] - d["c1"]["p99_us"]), x_(ratio(n["c1"]["p50_us"], d["c1"]["p50_us"]))))
        for c in results["cases"]:
            if c["baseline"] != key:
                continue
            g, a, r = c["gateway"], c["added"], c["ratios"]
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["title"], f(g["c1"]["p50_us"]), f(g["c1"]["p99_us"]), f(a["added_p50_us"]), f(a["added_p99_us"]),
                x_(r["p50_vs_direct"]), x_(r["p50_vs_nginx"]), x_(r["added_p50_vs_nginx"]), x_(r["added_p99_vs_nginx"])))
    L.append("")

    L.append("## Throughput at c=64 and CPU per request\n")
    L.append("Proxy CPU is utime+stime of the gateway process (nginx: its worker) over the c=64 run ÷ requests; "
             "\"direct\" rows show the upstream's own CPU. A proxy process well under 100% busy means the client core (wrk + upstream) or another user "
             "was the limit. Busy: the proxy process (upstream process on direct rows) / all of the proxy core / "
             "all of the client core, over the c=64 run; the whole-core figures include other users' processes.\n")
    L.append("| case | req/s | ÷ direct | ÷ nginx | CPU µs/req (c=64) | ÷ upstream | ÷ nginx | CPU µs/req (c=1) | ÷ nginx (c=1) | busy: process / proxy core / client core |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for key, b in base.items():
        d, n = b["direct"], b["nginx"]
        L.append("| **direct** %s | %s | 1.00× | %s | %s (upstream) | 1.00× | | %s (upstream) | | %s |" % (
            key, f(d["c64"]["rps"]), x_(ratio(d["c64"]["rps"], n["c64"]["rps"])), f(d["c64"]["cpu_us_per_req"], 1),
            f(d["c1"]["cpu_us_per_req"], 1), busy(d["c64"])))
        L.append("| **nginx** %s | %s | %s | 1.00× | %s | %s | 1.00× | %s | 1.00× | %s |" % (
            key, f(n["c64"]["rps"]), x_(ratio(n["c64"]["rps"], d["c64"]["rps"])), f(n["c64"]["cpu_us_per_req"], 1),
            x_(ratio(n["c64"]["cpu_us_per_req"], d["c64"]["cpu_us_per_req"])), f(n["c1"]["cpu_us_per_req"], 1),
            busy(n["c64"])))
        for c in results["cases"]:
            if c["baseline"] != key:
                continue
            g, r = c["gateway"], c["ratios"]
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["title"], f(g["c64"]["rps"]), x_(r["rps_vs_direct"]), x_(r["rps_vs_nginx"]),
                f(g["c64"]["cpu_us_per_req"], 1), x_(r["cpu_vs_upstream"]), x_(r["cpu_vs_nginx"]),
                f(g["c1"]["cpu_us_per_req"], 1), x_(r["cpu_c1_vs_nginx"]), busy(g["c64"])))
    L.append("")

    tls_cases = [c for c in results["cases"] if "cpu_vs_nginx_tls" in c["ratios"]]
    if tls_cases:
        L.append("## TLS on the data listener\n")
        L.append("Each TLS case against nginx terminating TLS with the same certificate (ECDSA P-256) in the same run, "
                 "and against its own plain twin; keep-alive connections at c=64. Handshakes: a new connection per "
                 "request (`Connection: close`) at c=16, the proxy's CPU per handshake with its request, and what one "
                 "core would do at that cost.\n")
        L.append("| case | CPU µs/req | ÷ nginx TLS | ÷ plain twin | req/s ÷ nginx TLS | handshakes/s | CPU µs/handshake | per core-second | ÷ nginx's |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        by_id = {c["id"]: c for c in results["cases"]}
        for c in tls_cases:
            g, r = c["gateway"], c["ratios"]
            twin = by_id.get(VARIANTS[c["id"]]["of"])
            plain = x_(ratio(g["c64"]["cpu_us_per_req"], twin["gateway"]["c64"]["cpu_us_per_req"])) if twin else ""
            hs = g.get("handshakes") or {}
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["title"], f(g["c64"]["cpu_us_per_req"], 1), x_(r["cpu_vs_nginx_tls"]), plain, x_(r["rps_vs_nginx_tls"]),
                f(hs["per_second"]) if hs else "", f(hs["cpu_us_per_handshake"], 1) if hs else "",
                f(hs["per_core_second"]) if hs.get("per_core_second") else "",
                x_(r["handshake_cpu_vs_nginx_tls"]) if "handshake_cpu_vs_nginx_tls" in r else ""))
        for key, b in results["baselines"].items():
            if "nginx_tls" in b:
                nt, nhs = b["nginx_tls"], b.get("nginx_tls_handshakes")
                L.append("| **nginx TLS** %s | %s | 1.00× | | 1.00× | %s | %s | %s | 1.00× |" % (
                    key, f(nt["c64"]["cpu_us_per_req"], 1), f(nhs["per_second"]) if nhs else "",
                    f(nhs["cpu_us_per_handshake"], 1) if nhs else "", f(nhs["per_core_second"]) if nhs else ""))
        L.append("")

    L.append("## Memory (MiB)\n")
    L.append("Idle = VmRSS right after start; peak = VmHWM after the case's runs (each case starts a fresh gateway). "
             "\"÷ upstream\" compares with the mock upstream process (also a switchyard binary).\n")
    L.append("| case | idle RSS | peak RSS | idle ÷ upstream | idle ÷ nginx | peak ÷ upstream | peak ÷ nginx |")
    L.append("|---|---:|---:|---:|---:|---:|---:|")
    for key, b in base.items():
        d, n = b["direct"], b["nginx"]
        L.append("| **upstream** (mock) %s | %s | %s | | | | |" % (key, f(mib(results.get("upstream_rss_kib")), 1), f(mib(d["hwm_kib"]), 1)))
        L.append("| **nginx** worker %s | %s | %s | | 1.00× | | 1.00× |" % (key, f(mib(n["idle_rss_kib"]), 1), f(mib(n["hwm_kib"]), 1)))
        for c in results["cases"]:
            if c["baseline"] != key:
                continue
            g, r = c["gateway"], c["ratios"]
            L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                c["title"], f(mib(g["idle_rss_kib"]), 1), f(mib(g["hwm_kib"]), 1), x_(r["idle_rss_vs_upstream"]),
                x_(r["idle_rss_vs_nginx"]), x_(r["peak_rss_vs_upstream"]), x_(r["peak_rss_vs_nginx"])))
    L.append("")

    streams = [c for c in results["cases"] if c["request"]["stream"]]
    if streams:
        L.append("## Time to first streamed byte (µs, p50 of %d sequential requests)\n" % s["ttfb_n"])
        L.append("First frame = first body byte after the response headers; first byte = status line.\n")
        L.append("| case | first frame | added | ÷ direct | ÷ nginx | added ÷ nginx's | first byte |")
        L.append("|---|---:|---:|---:|---:|---:|---:|")
        seen = set()
        for c in streams:
            key = c["baseline"]
            d, n = base[key]["direct"]["ttfb"], base[key]["nginx"]["ttfb"]
            if key not in seen:
                seen.add(key)
                df, nf = d["first_frame_us"]["p50"], n["first_frame_us"]["p50"]
                L.append("| **direct** %s | %s | | 1.00× | %s | | %s |" % (key, f(df), x_(ratio(df, nf)), f(d["first_byte_us"]["p50"])))
                L.append("| **nginx** %s | %s | %s | %s | 1.00× | 1.00× | %s |" % (key, f(nf), f(nf - df), x_(ratio(nf, df)), f(n["first_byte_us"]["p50"])))
            g, a, r = c["gateway"]["ttfb"], c["added"], c["ratios"]
            L.append("| %s | %s | %s | %s | %s | %s | %s |" % (
                c["title"], f(g["first_frame_us"]["p50"]), f(a["added_ttfb_p50_us"]), x_(r["ttfb_vs_direct"]),
                x_(r["ttfb_vs_nginx"]), x_(r["added_ttfb_vs_nginx"]), f(g["first_byte_us"]["p50"])))
        L.append("")

    h = results.get("hedging")
    if h:
        L.append("## Hedging under a heavy-tailed first token\n")
        L.append("Upstream: %s. %d sequential streams per pool (after %d warm-up), two lanes on it; "
                 "time to the first content frame (µs).\n" % (h["upstream"], h["n"], 20))
        L.append("| pool | p50 | p90 | p99 |")
        L.append("|---|---:|---:|---:|")
        for pool in TAIL_POOLS:
            q = h[pool]["first_frame_us"]
            L.append("| %s | %s | %s | %s |" % (pool, f(q["p50"]), f(q["p90"]), f(q["p99"])))
        L.append("| hedged ÷ plain | %s | %s | %s |" % (x_(h["ratio_p50"]), x_(h["ratio_p90"]), x_(h["ratio_p99"])))
        L.append("")
        L.append("Extra attempts: %d of %d requests (%.1f %%; the cap is 10 %% plus a burst of 10); outcomes %s.\n" % (
            h["extra_attempts"], h["n"] + 20, 100 * h["extra_share"],
            ", ".join("%s %d" % (k, v) for k, v in h["hedges"].items())))

    os_ = results.get("open_streams")
    if os_:
        L.append("## %d concurrent open streams (MiB)\n" % os_["count"])
        L.append("Upstream: %s. The client holds every stream open after its first frame.\n" % os_["upstream"])
        L.append("RSS after close is read 1 s after the streams close; \"under 2× idle\" polls each second for up to "
                 "30 s and gives the seconds it took (\"no\": still above after 30 s) and the RSS then.\n")
        L.append("| proxy | open | idle RSS | RSS while open | peak (VmHWM) | RSS after close | under 2× idle after | RSS then "
                 "| KiB per stream | RSS open ÷ nginx |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        nref = os_.get("nginx", {}).get("rss_open_kib")
        for who in ("switchyard_before", "switchyard", "nginx"):
            v = os_.get(who)
            if not v:
                continue
            settle = v.get("settle_s")
            L.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                who, v["open"], f(mib(v["idle_rss_kib"]), 1), f(mib(v["rss_open_kib"]), 1), f(mib(v["hwm_kib"]), 1),
                f(mib(v["rss_after_close_kib"]), 1), "%d s" % settle if settle else "no",
                f(mib(v.get("rss_settled_kib", v["rss_after_close_kib"])), 1),
                f(v["kib_per_stream"], 1), x_(ratio(v["rss_open_kib"], nref))))
        L.append("")

    dx = results.get("duplex")
    if dx:
        L.append("## Duplex: a Responses turn over a socket and over an HTTP stream\n")
        L.append("The same turn (`%s` on the fake, Responses ingress) sent by bench/duplex.py with %d connections: "
                 "`response.create` on `GET /v1/responses`, and `POST /v1/responses` streamed on keep-alive "
                 "connections. The gateway's CPU is read around the turns only, %d rounds of %d turns each, "
                 "alternating which goes first.\n" % (dx["model"], dx["conns"], dx["rounds"], dx["turns_per_round"]))
        L.append("| turn | HTTP µs CPU/turn | socket µs CPU/turn | socket ÷ HTTP | HTTP turns/s | socket turns/s "
                 "| chunks or frames per turn (HTTP / socket) | per round µs (HTTP; socket) |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---|")
        for name, fig in dx["turns"].items():
            h, w = fig["http"], fig["socket"]
            L.append("| %s | %s | %s | %s | %s | %s | %s / %s | %s; %s |" % (
                name, f(h["cpu_us_per_turn"], 1), f(w["cpu_us_per_turn"], 1), x_(fig["ratio"]), f(h["turns_per_s"]),
                f(w["turns_per_s"]), f(h["frames_per_turn"], 1), f(w["frames_per_turn"], 1),
                ", ".join(str(v) for v in h["rounds_cpu_us_per_turn"]), ", ".join(str(v) for v in w["rounds_cpu_us_per_turn"])))
        L.append("")
        L.append("Idle sockets: %d opened and held (handshake answered 101, nothing sent); RSS read 0.5 s after the last "
                 "opened, over the RSS before. nginx (one worker) proxies the WebSocket (`Upgrade`/`Connection` set, as "
                 "its documentation writes it) to a second gateway on the client core; %d socket turns went "
                 "through it first (the first on each connection checked).\n" % (dx["sockets"], dx.get("nginx_turn_check", 0)))
        L.append("| proxy | open | RSS before (MiB) | RSS open (MiB) | KiB per idle socket | ÷ nginx |")
        L.append("|---|---:|---:|---:|---:|---:|")
        for who in ("gateway", "nginx"):
            v = dx[who]
            L.append("| %s | %d | %s | %s | %s | %s |" % (
                "switchyard" if who == "gateway" else "nginx", v["open"], f(mib(v["idle_rss_kib"]), 1),
                f(mib(v["rss_open_kib"]), 1), f(v["kib_per_socket"], 1),
                x_(dx["kib_per_socket_vs_nginx"]) if who == "gateway" else x_(1.0)))
        L.append("")

    befores = [c for c in results["cases"] if c.get("before")]
    if befores:
        L.append("## Before and after, same run\n")
        L.append("The same cases through the `--before` binary (%s), each run right before the current one.\n" % s.get("before"))
        L.append("| case | CPU µs/req c=64 before | after | ÷ before | CPU c=1 ÷ before | p99 c=1 before | after | TTFB p50 before | after |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for c in befores:
            g, bf, r = c["gateway"], c["before"], c["ratios"]
            L.append("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                c["title"], f(bf["c64"]["cpu_us_per_req"], 1), f(g["c64"]["cpu_us_per_req"], 1), x_(r.get("cpu_vs_before")),
                x_(r.get("cpu_c1_vs_before")), f(bf["c1"]["p99_us"]), f(g["c1"]["p99_us"]),
                f(bf.get("ttfb", {}).get("first_frame_us", {}).get("p50")), f(g.get("ttfb", {}).get("first_frame_us", {}).get("p50"))))
        L.append("")

    watched = [c for c in results["cases"] if c["gateway"].get("console")]
    if watched:
        L.append("## The console\n")
        L.append("What an open console costs the gateway: one refresh asks for every page's data (%s), measured "
                 "with no traffic over a ledger filled by the case's own load; during the case's runs it refreshes "
                 "every second (the overview itself redraws every 5 s).\n" % ", ".join("`%s`" % p for p in CONSOLE_POLLS))
        L.append("| case | ledger rows | CPU ms per refresh | share of a core at one refresh/s | refreshes during the runs |")
        L.append("|---|---:|---:|---:|---:|")
        for c in watched:
            w = c["gateway"]["console"]
            L.append("| %s | %s | %s | %s | %s |" % (c["title"], f(w["ledger_rows"]), f(w["cpu_ms_per_refresh"], 2),
                                                 f(w["cpu_ms_per_refresh"] / 10, 2, " %"), f(w["refreshes_during_runs"])))
        L.append("")

    if results.get("goals"):
        L.append("## Goals (measured, this run)\n")
        L.append("| goal | measured | target |")
        L.append("|---|---:|---|")
        for g in results["goals"]:
            L.append("| %s | %s | %s |" % (g["goal"], f(g["measured"], 2), g["target"]))
        L.append("")
    return "\n".join(L)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--switchyard", default=os.path.join(REPO, "target", "release", "switchyard"))
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--proxy-cpu", default=os.environ.get("BENCH_PROXY_CPU", "0"))
    ap.add_argument("--client-cpu", default=os.environ.get("BENCH_CLIENT_CPU", "1"))
    ap.add_argument("--c1-secs", type=int, default=int(os.environ.get("BENCH_C1_SECS", "2")))
    ap.add_argument("--c64-secs", type=int, default=int(os.environ.get("BENCH_C64_SECS", "3")))
    ap.add_argument("--warmup", type=int, default=int(os.environ.get("BENCH_WARMUP_SECS", "1")))
    ap.add_argument("--ttfb-n", type=int, default=int(os.environ.get("BENCH_TTFB_N", "300")))
    ap.add_argument("--ttfb-warmup", type=int, default=20)
    ap.add_argument("--streams", type=int, default=int(os.environ.get("BENCH_STREAMS", "5000")))
    ap.add_argument("--hedge-n", type=int, default=int(os.environ.get("BENCH_HEDGE_N", "400")))
    ap.add_argument("--duplex-turns", type=int, default=int(os.environ.get("BENCH_DUPLEX_TURNS", "3000")),
                    help="turns per round of the duplex case (0 skips it)")
    ap.add_argument("--duplex-rounds", type=int, default=int(os.environ.get("BENCH_DUPLEX_ROUNDS", "4")))
    ap.add_argument("--duplex-sockets", type=int, default=int(os.environ.get("BENCH_DUPLEX_SOCKETS", "2000")))
    ap.add_argument("--gateway-log-level", default=os.environ.get("BENCH_GATEWAY_LOG", "info"),
                    help="SWITCHYARD_LOG for the gateway (default info: what it ships with)")
    ap.add_argument("--keep-gateway-log", action="store_true", help="write gateway stderr to the temp dir")
    ap.add_argument("--only", action="append", help="run only cases whose id contains this (repeatable)")
    ap.add_argument("--before", default=os.environ.get("BENCH_BEFORE"),
                    help="another switchyard binary to run every case with too, right before the current one")
    opts = ap.parse_args()
    if not os.access(opts.switchyard, os.X_OK):
        sys.exit("no switchyard binary at %s (run bench/run.sh, or cargo build --release -p switchyard)" % opts.switchyard)
    os.makedirs(opts.out, exist_ok=True)
    started = time.monotonic()
    try:
        results, tmp = run(opts)
    except BenchError as err:
        log("FAILED: %s" % err)
        sys.exit(1)
    results["elapsed_s"] = round(time.monotonic() - started, 1)
    md = render(results)
    with open(os.path.join(opts.out, "latest.json"), "w") as fh:
        json.dump(results, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    with open(os.path.join(opts.out, "latest.md"), "w") as fh:
        fh.write(md + "\n")
    shutil.rmtree(tmp, ignore_errors=True)
    print(md)
    log("done in %.0fs: %s" % (results["elapsed_s"], os.path.join(opts.out, "latest.md")))


if __name__ == "__main__":
    main()
